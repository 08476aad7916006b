// Clusters, nodes, bootstrap tokens, and the documents admins apply:
// resource groups, project groups, priority classes.
#include <algorithm>
#include <set>

#include "common/ids.h"
#include "model/documents.h"
#include "server/control_plane.h"
#include "server/internal.h"

namespace cp {

using internal::forbidden_for;
using internal::make_event;

namespace {

struct ClusterBody {
  std::string id;
  std::string display_name;
  ExecutorKind executor = ExecutorKind::local;
  std::string storage_pool = "default";
  std::string storage_mount;
  Labels labels;
};
BOOST_DESCRIBE_STRUCT(ClusterBody, (), (id, display_name, executor, storage_pool, storage_mount, labels))

struct ClusterPatch {
  std::optional<std::string> display_name;
  std::optional<std::string> storage_pool;
  std::optional<std::string> storage_mount;
  std::optional<Labels> labels;
  std::optional<bool> draining;
};
BOOST_DESCRIBE_STRUCT(ClusterPatch, (), (display_name, storage_pool, storage_mount, labels, draining))

// "" (not checked) or an absolute path.
Status validate_mount(const std::string& path) {
  if (path.empty() || (path.front() == '/' && path.find('\0') == std::string::npos && path.size() <= 4096)) return {};
  return errors::invalid("storage_mount", "must be an absolute path, e.g. /mnt/shared", "必须是绝对路径，例如 /mnt/shared");
}

struct NodePatch {
  std::optional<Labels> labels;
  std::optional<bool> maintenance;
};
BOOST_DESCRIBE_STRUCT(NodePatch, (), (labels, maintenance))

struct BootstrapBody {
  std::int64_t ttl_s = 0;
};
BOOST_DESCRIBE_STRUCT(BootstrapBody, (), (ttl_s))

Error admin_only(const Principal& p, const std::string& en, const std::string& zh) {
  Error e = forbidden_for(p, en + " (platform admins only)", zh + "（仅平台管理员）");
  return e;
}

}  // namespace

Result<Cluster> ControlPlane::create_cluster(const Principal& p, const json::value& body) {
  if (!p.is_admin()) return admin_only(p, "register clusters", "注册集群");
  ClusterBody b;
  CP_TRY(from_json(body, b, DecodeContext{"", true}));
  CP_TRY(validate_name(b.id, "id"));
  CP_TRY(validate_name(b.storage_pool, "storage_pool"));
  CP_TRY(validate_mount(b.storage_mount));
  CP_TRY(validate_labels(b.labels, "labels"));
  Millis now = clock_.now_ms();
  Cluster c;
  c.id = b.id;
  c.display_name = b.display_name.empty() ? b.id : b.display_name;
  c.executor = b.executor;
  c.storage_pool = b.storage_pool;
  c.storage_mount = b.storage_mount;
  c.labels = b.labels;
  c.created_at = c.updated_at = now;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(c));
    CP_ASSIGN(auto id, tx.append_event(make_event(now, p.user, "cluster", c.id, "cluster.created", "", "offline")));
    (void)id;
    return {};
  }));
  return c;
}

Result<std::vector<Cluster>> ControlPlane::list_clusters(const Principal& p) {
  (void)p;  // every signed-in user may see the fleet
  std::vector<Cluster> out;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(out, tx.list_clusters());
    return {};
  }));
  return out;
}

Result<Cluster> ControlPlane::get_cluster(const Principal& p, const std::string& id) {
  (void)p;
  std::optional<Cluster> c;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(c, tx.get_cluster(id));
    return {};
  }));
  if (!c) return errors::not_found("cluster", id);
  return *c;
}

Result<Cluster> ControlPlane::patch_cluster(const Principal& p, const std::string& id, const json::value& body) {
  if (!p.is_admin()) return admin_only(p, "change clusters", "修改集群");
  ClusterPatch patch;
  CP_TRY(from_json(body, patch, DecodeContext{"", true}));
  if (patch.labels) CP_TRY(validate_labels(*patch.labels, "labels"));
  if (patch.storage_pool) CP_TRY(validate_name(*patch.storage_pool, "storage_pool"));
  if (patch.storage_mount) CP_TRY(validate_mount(*patch.storage_mount));
  Millis now = clock_.now_ms();
  Cluster out;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto c, tx.get_cluster(id));
    if (!c) return errors::not_found("cluster", id);
    if (patch.display_name) c->display_name = *patch.display_name;
    if (patch.storage_pool) c->storage_pool = *patch.storage_pool;
    if (patch.storage_mount) c->storage_mount = *patch.storage_mount;
    if (patch.labels) c->labels = *patch.labels;
    if (patch.draining) {
      std::string from = boost::describe::enum_to_string(c->state, "?");
      if (*patch.draining && c->state != ClusterState::draining) {
        c->state = ClusterState::draining;
        c->state_reason = "admin_drain";
        c->state_message = "drained by " + p.user + ": running work finishes, nothing new is placed";
      } else if (!*patch.draining && c->state == ClusterState::draining) {
        c->state = ClusterState::offline;  // the next sync brings it online
        c->state_reason = "undrained";
        c->state_message = "waiting for the next agent sync";
      }
      if (from != boost::describe::enum_to_string(c->state, "?")) {
        CP_ASSIGN(auto eid, tx.append_event(make_event(now, p.user, "cluster", id, "cluster.state", from,
                                                      boost::describe::enum_to_string(c->state, "?"),
                                                      c->state_message)));
        (void)eid;
      }
    }
    c->updated_at = now;
    CP_TRY(tx.update_cluster(*c));
    out = *c;
    return {};
  }));
  wake_scheduler();
  return out;
}

Status ControlPlane::delete_cluster(const Principal& p, const std::string& id) {
  if (!p.is_admin()) return admin_only(p, "delete clusters", "删除集群");
  Millis now = clock_.now_ms();
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto c, tx.get_cluster(id));
    if (!c) return errors::not_found("cluster", id);
    CP_ASSIGN(auto active, tx.active_attempts(id));
    if (!active.empty()) {
      // Unknown ones end only when its agent reports them or an admin
      // confirms them lost (unknown_attempts.h): draining does not help.
      const bool unknown = std::any_of(active.begin(), active.end(),
                                       [](const Attempt& a) { return a.state == AttemptState::Unknown; });
      Error e = errors::conflict(
          "cluster " + id + " still runs " + std::to_string(active.size()) + " attempts; " +
              (unknown ? "once their jobs are gone: cubeplane clusters confirm-lost " + id : "drain it first"),
          "集群 " + id + " 仍有 " + std::to_string(active.size()) + " 个任务在运行，" +
              (unknown ? "确认其作业已不存在后运行：cubeplane clusters confirm-lost " + id : "请先排空"));
      e.details["active_attempts"] = static_cast<std::int64_t>(active.size());
      return e;
    }
    CP_TRY(tx.delete_cluster(id));
    CP_ASSIGN(auto eid, tx.append_event(make_event(now, p.user, "cluster", id, "cluster.deleted")));
    (void)eid;
    return {};
  }));
  live_inventory_.forget(id);
  fleet_nodes_.changed(id);
  return ok_status();
}

Result<json::object> ControlPlane::create_bootstrap_token(const Principal& p, const std::string& cluster_id,
                                                          const json::value& body) {
  if (!p.is_admin()) return admin_only(p, "create bootstrap tokens", "创建引导令牌");
  BootstrapBody b;
  if (!body.is_null()) CP_TRY(from_json(body, b, DecodeContext{"", true}));
  if (b.ttl_s < 0 || b.ttl_s > 30LL * 86400) {
    return errors::invalid("ttl_s", "must be between 1 s and 30 days", "应在 1 秒到 30 天之间");
  }
  std::int64_t ttl = b.ttl_s ? b.ttl_s : config_.bootstrap_ttl_s;
  Millis now = clock_.now_ms();
  std::string secret = new_secret("cpb_");
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto c, tx.get_cluster(cluster_id));
    if (!c) return errors::not_found("cluster", cluster_id);
    CP_TRY(tx.insert_bootstrap_token(sha256_hex(secret), cluster_id, now, now + ttl * 1000));
    CP_ASSIGN(auto eid, tx.append_event(make_event(now, p.user, "cluster", cluster_id, "cluster.bootstrap_token")));
    (void)eid;
    return {};
  }));
  json::object out;
  out["token"] = secret;
  out["cluster_id"] = cluster_id;
  out["expires_at"] = now + ttl * 1000;
  return out;
}

Result<NodePage> ControlPlane::list_nodes_page(const Principal& p, const NodeQuery& q) {
  (void)p;
  NodePage out;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    if (!q.cluster_id.empty()) {
      CP_ASSIGN(auto c, tx.get_cluster(q.cluster_id));
      if (!c) return errors::not_found("cluster", q.cluster_id);
    }
    CP_ASSIGN(out, tx.list_nodes_page(q));
    return {};
  }));
  live_inventory_.overlay(out.items);
  return out;
}

Result<Node> ControlPlane::get_node(const Principal& p, const std::string& cluster_id, const std::string& name) {
  (void)p;
  std::optional<Node> node;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(node, tx.get_node(cluster_id, name));
    return {};
  }));
  if (!node) return errors::not_found("node", cluster_id + "/" + name);
  live_inventory_.overlay(*node);
  return *node;
}

Result<Node> ControlPlane::patch_node(const Principal& p, const std::string& cluster_id, const std::string& name,
                                      const json::value& body) {
  if (!p.is_admin()) return admin_only(p, "change nodes", "修改节点");
  NodePatch patch;
  CP_TRY(from_json(body, patch, DecodeContext{"", true}));
  Millis now = clock_.now_ms();
  Node out;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto n, tx.get_node(cluster_id, name));
    if (!n) return errors::not_found("node", cluster_id + "/" + name);
    Labels overrides = n->label_overrides;
    if (patch.labels) {
      Labels to_check;
      for (const auto& [k, v] : *patch.labels) {
        overrides[k] = v;  // "" removes the label
        if (!v.empty()) to_check[k] = v;
      }
      CP_TRY(validate_labels(to_check, "labels"));
    }
    bool maintenance = patch.maintenance.value_or(n->maintenance);
    CP_TRY(tx.set_node_admin(cluster_id, name, overrides, maintenance));
    json::object data;
    data["maintenance"] = maintenance;
    CP_ASSIGN(auto eid, tx.append_event(make_event(now, p.user, "node", cluster_id + "/" + name, "node.updated", "", "",
                                                  maintenance ? "maintenance on" : "maintenance off", data)));
    (void)eid;
    CP_ASSIGN(auto updated, tx.get_node(cluster_id, name));
    out = *updated;
    return {};
  }));
  fleet_nodes_.changed(cluster_id);
  live_inventory_.overlay(out);
  wake_scheduler();
  return out;
}

// ------------------------------------------------------------- documents

namespace {

bool known_kind(const std::string& kind) {
  return kind == "ResourceGroup" || kind == "ProjectGroup" || kind == "PriorityClass";
}

std::string kind_label(const std::string& kind) {
  if (kind == "ResourceGroup") return "resource group";
  if (kind == "ProjectGroup") return "project group";
  return "priority class";
}

}  // namespace

// Status of a resource group: what it holds now and how much waits.
static Status resource_group_status(Tx& tx, const std::vector<ResourceGroup>& rgs,
                                    std::map<std::string, json::object>& out) {
  CP_ASSIGN(auto live, tx.tasks_in_states({TaskState::Queued, TaskState::Admitted, TaskState::Dispatched,
                                            TaskState::Running, TaskState::Preempting}));
  std::map<std::string, std::string> group_of;
  std::map<std::string, std::int64_t> queued, running;
  std::map<std::string, Millis> oldest;
  for (const auto& t : live) {
    group_of[t.id] = t.resource_group;
    if (t.state == TaskState::Queued) {
      ++queued[t.resource_group];
      Millis& o = oldest[t.resource_group];
      if (o == 0 || t.queued_at < o) o = t.queued_at;
    } else {
      ++running[t.resource_group];
    }
  }
  CP_ASSIGN(auto attempts, tx.active_attempts(""));
  std::map<std::string, Resources> used;
  for (const auto& a : attempts) used[group_of[a.task_id]] += internal::attempt_total(a);
  for (const auto& rg : rgs) {
    json::object st;
    st["used"] = to_json(used[rg.name]);
    st["queued"] = queued[rg.name];
    st["running"] = running[rg.name];
    st["oldest_queued_at"] = oldest[rg.name];
    out[rg.name] = std::move(st);
  }
  return {};
}

Result<std::pair<json::object, bool>> ControlPlane::apply_document(const Principal& p, const std::string& kind,
                                                                   const json::value& doc,
                                                                   const std::optional<std::string>& path_name) {
  CP_CHECK(known_kind(kind), "apply_document with an unknown kind");
  Millis now = clock_.now_ms();
  bool created = false;
  json::object out;
  auto check_name = [&](const std::string& name) -> Status {
    if (path_name && *path_name != name) {
      return errors::invalid("metadata.name", "\"" + name + "\" differs from the name in the URL \"" + *path_name + "\"",
                             "\"" + name + "\" 与 URL 中的名称 \"" + *path_name + "\" 不一致");
    }
    return {};
  };
  auto finish = [&](Tx& tx, const std::string& name, bool existed) -> Status {
    if (existed && !path_name) return errors::already_exists(kind_label(kind), name);
    created = !existed;
    CP_ASSIGN(auto eid, tx.append_event(make_event(now, p.user, kind_label(kind), name,
                                                  existed ? "document.updated" : "document.created", "", "", kind)));
    (void)eid;
    return {};
  };

  if (kind == "ResourceGroup") {
    if (!p.is_admin()) return admin_only(p, "change resource groups", "修改资源组");
    CP_ASSIGN(auto rg, resource_group_from_document(doc));
    CP_TRY(check_name(rg.name));
    CP_TRY(store_.write([&](Tx& tx) -> Status {
      for (std::size_t i = 0; i < rg.clusters.size(); ++i) {
        CP_ASSIGN(auto c, tx.get_cluster(rg.clusters[i]));
        if (!c) return internal::unknown_reference("spec.clusters[" + std::to_string(i) + "]", "cluster", rg.clusters[i]);
      }
      CP_ASSIGN(auto existing, tx.get_resource_group(rg.name));
      rg.created_at = existing ? existing->created_at : now;
      rg.updated_at = now;
      CP_TRY(finish(tx, rg.name, existing.has_value()));
      CP_TRY(tx.upsert_resource_group(rg));
      out = resource_group_to_document(rg);
      return {};
    }));
  } else if (kind == "ProjectGroup") {
    CP_ASSIGN(auto pg, project_group_from_document(doc));
    CP_TRY(check_name(pg.name));
    CP_TRY(store_.write([&](Tx& tx) -> Status {
      CP_ASSIGN(auto existing, tx.get_project_group(pg.name));
      // Platform admins create project groups; a project admin may edit its own.
      if (!(p.is_admin() || (existing && p.can_admin_project(pg.name)))) {
        return admin_only(p, "change project group " + pg.name, "修改项目组 " + pg.name);
      }
      if (!pg.default_resource_group.empty()) {
        CP_ASSIGN(auto rg, tx.get_resource_group(pg.default_resource_group));
        if (!rg) return internal::unknown_reference("spec.default_resource_group", "resource group", pg.default_resource_group);
      }
      for (std::size_t i = 0; i < pg.resource_groups.size(); ++i) {
        CP_ASSIGN(auto rg, tx.get_resource_group(pg.resource_groups[i].name));
        if (!rg) {
          return internal::unknown_reference("spec.resource_groups[" + std::to_string(i) + "].name", "resource group",
                                             pg.resource_groups[i].name);
        }
      }
      for (std::size_t i = 0; i < pg.members.size(); ++i) {
        CP_ASSIGN(auto u, tx.get_user(pg.members[i].user));
        if (!u) return internal::unknown_reference("spec.members[" + std::to_string(i) + "].user", "user", pg.members[i].user);
      }
      pg.created_at = existing ? existing->created_at : now;
      pg.updated_at = now;
      CP_TRY(finish(tx, pg.name, existing.has_value()));
      CP_TRY(tx.upsert_project_group(pg));
      out = project_group_to_document(pg);
      return {};
    }));
  } else {
    if (!p.is_admin()) return admin_only(p, "change priority classes", "修改优先级类");
    CP_ASSIGN(auto pc, priority_class_from_document(doc));
    CP_TRY(check_name(pc.name));
    CP_TRY(store_.write([&](Tx& tx) -> Status {
      CP_ASSIGN(auto existing, tx.get_priority_class(pc.name));
      pc.created_at = existing ? existing->created_at : now;
      CP_TRY(finish(tx, pc.name, existing.has_value()));
      CP_TRY(tx.upsert_priority_class(pc));
      out = priority_class_to_document(pc);
      return {};
    }));
  }
  if (kind == "ProjectGroup") principals_.clear();  // members' roles may have changed
  wake_scheduler();
  return std::make_pair(std::move(out), created);
}

namespace {
bool has_budget(const Budget& b) { return (b.gpu_hours && *b.gpu_hours > 0) || (b.cost_cents && *b.cost_cents > 0); }
}  // namespace

// Project groups with a budget get status.budget: this month's use against
// it (read after the documents, as `usage` reads it).
Status ControlPlane::add_budget_status(const std::map<std::string, Budget>& budgets,
                                       const std::function<json::object*(const std::string&)>& document_of) {
  if (std::none_of(budgets.begin(), budgets.end(), [](const auto& b) { return has_budget(b.second); })) return {};
  const Millis now = clock_.now_ms();
  CP_ASSIGN(auto use, month_to_date(now));
  for (const auto& [name, budget] : budgets) {
    json::object* d = has_budget(budget) ? document_of(name) : nullptr;
    if (d == nullptr) continue;
    json::object status;
    status["budget"] = internal::budget_status(budget, use[name], now);
    (*d)["status"] = std::move(status);
  }
  return {};
}

Result<json::object> ControlPlane::get_document(const Principal& p, const std::string& kind, const std::string& name) {
  if (!known_kind(kind)) return errors::not_found("kind", kind);
  json::object out;
  std::map<std::string, Budget> budgets;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    if (kind == "ResourceGroup") {
      CP_ASSIGN(auto rg, tx.get_resource_group(name));
      if (!rg) return errors::not_found("resource group", name);
      out = resource_group_to_document(*rg);
      std::map<std::string, json::object> status;
      CP_TRY(resource_group_status(tx, {*rg}, status));
      out["status"] = status[name];
    } else if (kind == "ProjectGroup") {
      CP_ASSIGN(auto pg, tx.get_project_group(name));
      if (!pg || !p.can_read_project(name)) return errors::not_found("project group", name);
      out = project_group_to_document(*pg);
      budgets[name] = pg->monthly_budget;
    } else {
      CP_ASSIGN(auto pc, tx.get_priority_class(name));
      if (!pc) return errors::not_found("priority class", name);
      out = priority_class_to_document(*pc);
    }
    return {};
  }));
  CP_TRY(add_budget_status(budgets, [&](const std::string&) { return &out; }));
  return out;
}

Result<json::array> ControlPlane::list_documents(const Principal& p, const std::string& kind) {
  if (!known_kind(kind)) return errors::not_found("kind", kind);
  json::array out;
  std::map<std::string, Budget> budgets;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    if (kind == "ResourceGroup") {
      CP_ASSIGN(auto rgs, tx.list_resource_groups());
      std::map<std::string, json::object> status;
      CP_TRY(resource_group_status(tx, rgs, status));
      for (const auto& rg : rgs) {
        auto d = resource_group_to_document(rg);
        d["status"] = status[rg.name];
        out.push_back(std::move(d));
      }
    } else if (kind == "ProjectGroup") {
      CP_ASSIGN(auto pgs, tx.list_project_groups());
      for (const auto& pg : pgs) {
        if (!p.can_read_project(pg.name)) continue;
        out.push_back(project_group_to_document(pg));
        budgets[pg.name] = pg.monthly_budget;
      }
    } else {
      CP_ASSIGN(auto pcs, tx.list_priority_classes());
      for (const auto& pc : pcs) out.push_back(priority_class_to_document(pc));
    }
    return {};
  }));
  CP_TRY(add_budget_status(budgets, [&](const std::string& name) -> json::object* {
    for (auto& d : out) {
      auto& o = d.as_object();
      const auto* meta = o.if_contains("metadata");
      if (meta && meta->is_object() && meta->as_object().contains("name") &&
          meta->as_object().at("name").as_string() == name) {
        return &o;
      }
    }
    return nullptr;
  }));
  return out;
}

Status ControlPlane::delete_document(const Principal& p, const std::string& kind, const std::string& name) {
  if (!known_kind(kind)) return errors::not_found("kind", kind);
  if (!p.is_admin()) return admin_only(p, "delete a " + kind_label(kind), "删除" + kind_label(kind));
  Millis now = clock_.now_ms();
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    if (kind == "ResourceGroup") {
      CP_ASSIGN(auto rg, tx.get_resource_group(name));
      if (!rg) return errors::not_found("resource group", name);
      TaskQuery q;
      q.resource_group = name;
      q.states = {TaskState::Queued, TaskState::Admitted, TaskState::Dispatched, TaskState::Running,
                  TaskState::Preempting};
      q.limit = 1;
      CP_ASSIGN(auto page, tx.list_tasks(q));
      if (!page.items.empty()) {
        return errors::conflict("resource group " + name + " still has live tasks",
                                "资源组 " + name + " 仍有未结束的任务");
      }
      CP_TRY(tx.delete_resource_group(name));
    } else if (kind == "ProjectGroup") {
      CP_ASSIGN(auto pg, tx.get_project_group(name));
      if (!pg) return errors::not_found("project group", name);
      CP_TRY(tx.delete_project_group(name));
    } else {
      CP_ASSIGN(auto pc, tx.get_priority_class(name));
      if (!pc) return errors::not_found("priority class", name);
      CP_TRY(tx.delete_priority_class(name));
    }
    CP_ASSIGN(auto eid, tx.append_event(make_event(now, p.user, kind_label(kind), name, "document.deleted")));
    (void)eid;
    return {};
  }));
  if (kind == "ProjectGroup") principals_.clear();  // its members lose their roles
  return {};
}

}  // namespace cp
