#include "server/fleet_config.h"

#include <fstream>
#include <sstream>

#include "common/smtp_client.h"
#include "model/documents.h"
#include "server/beacon.h"

namespace cp {

namespace {

struct Metadata {
  std::string name;
  Labels labels;
};
BOOST_DESCRIBE_STRUCT(Metadata, (), (name, labels))

struct ServerSpec {
  std::string listen = "127.0.0.1:8080";
  std::string store;
  std::string objects;
  std::string web_root;
  std::string log_level = "info";
  int http_threads = ServerSettings::kDefaultHttpThreads;
  std::int64_t lease_ttl_s = 30;
  std::int64_t lost_after_s = 40;
  std::int64_t beacon_period_ms = 0;
  std::int64_t beacon_deadline_ms = 0;
  std::int64_t credential_ttl_s = 3600;
  bool fair_share = true;
  int reservations_per_group = 1;
  int max_victims = 64;
  std::int64_t reasons_refresh_s = 60;
  std::int64_t reasons_refresh_per_cycle = 10'000;
  std::int64_t tmp_retention_s = 7 * 86400;
  std::int64_t log_retention_s = 30 * 86400;
  std::int64_t event_retention_s = 90 * 86400;
  std::int64_t task_retention_s = 180 * 86400;
  // Monitoring and alerts (ServerConfig documents them).
  std::vector<std::string> alert_webhooks;
  std::vector<std::string> alert_emails;
  std::string smtp_url;  // the login comes from the environment only (main.cpp)
  std::string smtp_from = "cubeplane@localhost";
  std::int64_t queue_wait_alert_s = 1800;
  std::int64_t cluster_offline_for_s = 60;
  std::int64_t node_not_ready_for_s = 300;
  std::string external_url;
};
BOOST_DESCRIBE_STRUCT(ServerSpec, (),
                      (listen, store, objects, web_root, log_level, http_threads, lease_ttl_s, lost_after_s, beacon_period_ms,
                       beacon_deadline_ms, credential_ttl_s,
                       fair_share, reservations_per_group, max_victims, reasons_refresh_s, reasons_refresh_per_cycle, tmp_retention_s, log_retention_s,
                       event_retention_s, task_retention_s, alert_webhooks, alert_emails, smtp_url, smtp_from,
                       queue_wait_alert_s, cluster_offline_for_s, node_not_ready_for_s, external_url))

struct ServerDoc {
  std::string apiVersion;
  std::string kind;
  Metadata metadata;
  ServerSpec spec;
};
BOOST_DESCRIBE_STRUCT(ServerDoc, (), (apiVersion, kind, metadata, spec))

struct ClusterSpec {
  std::string display_name;
  ExecutorKind executor = ExecutorKind::local;
  std::string storage_pool = "default";
  std::string storage_mount;
  bool embedded_agent = true;
  std::vector<FleetNode> nodes;
};
BOOST_DESCRIBE_STRUCT(ClusterSpec, (), (display_name, executor, storage_pool, storage_mount, embedded_agent, nodes))

struct ClusterDoc {
  std::string apiVersion;
  std::string kind;
  Metadata metadata;
  ClusterSpec spec;
};
BOOST_DESCRIBE_STRUCT(ClusterDoc, (), (apiVersion, kind, metadata, spec))

struct UserSpec {
  PlatformRole role = PlatformRole::user;
};
BOOST_DESCRIBE_STRUCT(UserSpec, (), (role))

struct UserDoc {
  std::string apiVersion;
  std::string kind;
  Metadata metadata;
  UserSpec spec;
};
BOOST_DESCRIBE_STRUCT(UserDoc, (), (apiVersion, kind, metadata, spec))

Error in_document(std::size_t index, const Error& e) {
  Error out = e;
  std::string where = "document " + std::to_string(index + 1);
  out.message = where + ": " + e.message;
  out.message_zh = "第 " + std::to_string(index + 1) + " 个文档：" + e.message_zh;
  out.details["document"] = static_cast<std::int64_t>(index + 1);
  return out;
}

}  // namespace

Result<FleetConfig> parse_fleet_config(std::string_view text) {
  CP_ASSIGN(auto docs, parse_documents(text));
  FleetConfig fleet;
  bool have_server = false;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const auto& d = docs[i];
    if (!d.is_object() || !d.as_object().contains("kind") || !d.as_object().at("kind").is_string()) {
      return in_document(i, errors::invalid("kind", "is required", "必填"));
    }
    std::string kind(d.as_object().at("kind").as_string());
    DecodeContext strict{"", true};
    if (kind == "Server") {
      if (have_server) return in_document(i, errors::invalid("kind", "only one Server document", "只能有一个 Server 文档"));
      have_server = true;
      ServerDoc sd;
      if (auto st = from_json(d, sd, strict); !st.ok()) return in_document(i, st.error());
      fleet.server.listen = sd.spec.listen;
      fleet.server.store = sd.spec.store;
      fleet.server.objects = sd.spec.objects;
      fleet.server.web_root = sd.spec.web_root;
      fleet.server.log_level = sd.spec.log_level;
      fleet.server.http_threads = sd.spec.http_threads;
      fleet.server.control.lease_ttl_s = sd.spec.lease_ttl_s;
      fleet.server.control.lost_after_s = sd.spec.lost_after_s;
      fleet.server.control.beacon_period_ms = sd.spec.beacon_period_ms;
      fleet.server.control.beacon_deadline_ms = sd.spec.beacon_deadline_ms;
      fleet.server.control.credential_ttl_s = sd.spec.credential_ttl_s;
      fleet.server.control.fair_share = sd.spec.fair_share;
      fleet.server.control.reservations_per_group = sd.spec.reservations_per_group;
      fleet.server.control.max_victims = sd.spec.max_victims;
      fleet.server.control.reasons_refresh_s = sd.spec.reasons_refresh_s;
      fleet.server.control.reasons_refresh_per_cycle = sd.spec.reasons_refresh_per_cycle;
      fleet.server.control.tmp_retention_s = sd.spec.tmp_retention_s;
      fleet.server.control.log_retention_s = sd.spec.log_retention_s;
      fleet.server.control.event_retention_s = sd.spec.event_retention_s;
      fleet.server.control.task_retention_s = sd.spec.task_retention_s;
      fleet.server.control.alert_webhooks = sd.spec.alert_webhooks;
      fleet.server.control.alert_emails = sd.spec.alert_emails;
      fleet.server.control.smtp_url = sd.spec.smtp_url;
      fleet.server.control.smtp_from = sd.spec.smtp_from;
      fleet.server.control.queue_wait_alert_s = sd.spec.queue_wait_alert_s;
      fleet.server.control.cluster_offline_for_s = sd.spec.cluster_offline_for_s;
      fleet.server.control.node_not_ready_for_s = sd.spec.node_not_ready_for_s;
      fleet.server.control.external_url = sd.spec.external_url;
      for (std::size_t w = 0; w < sd.spec.alert_webhooks.size(); ++w) {
        const auto& url = sd.spec.alert_webhooks[w];
        if (!url.starts_with("http://") && !url.starts_with("https://")) {
          return in_document(i, errors::invalid("spec.alert_webhooks[" + std::to_string(w) + "]",
                                                "must be an http:// or https:// URL", "必须是 http:// 或 https:// 地址"));
        }
      }
      for (std::size_t e = 0; e < sd.spec.alert_emails.size(); ++e) {
        const auto& addr = sd.spec.alert_emails[e];
        if (!is_mail_address(addr)) {
          return in_document(i, errors::invalid("spec.alert_emails[" + std::to_string(e) + "]",
                                                "\"" + addr + "\" is not an email address (name@domain, no spaces)",
                                                "\"" + addr + "\" 不是电子邮件地址（name@domain，不含空格）"));
        }
      }
      if (!sd.spec.smtp_url.empty() && !is_smtp_url(sd.spec.smtp_url)) {
        return in_document(i, errors::invalid("spec.smtp_url",
                                              "must be an smtp:// or smtps:// URL without spaces; the login comes "
                                              "from CUBEPLANE_SMTP_USER / CUBEPLANE_SMTP_PASSWORD, not the URL",
                                              "必须是不含空格的 smtp:// 或 smtps:// 地址；登录信息来自环境变量 "
                                              "CUBEPLANE_SMTP_USER / CUBEPLANE_SMTP_PASSWORD，而非地址"));
      }
      if (!sd.spec.alert_emails.empty() && sd.spec.smtp_url.empty()) {
        return in_document(i, errors::invalid("spec.smtp_url", "is required when spec.alert_emails is set",
                                              "设置了 spec.alert_emails 时必须填写"));
      }
      if (!is_mail_address(sd.spec.smtp_from)) {
        return in_document(i, errors::invalid("spec.smtp_from",
                                              "\"" + sd.spec.smtp_from +
                                                  "\" is not an email address (name@domain, no spaces)",
                                              "\"" + sd.spec.smtp_from + "\" 不是电子邮件地址（name@domain，不含空格）"));
      }
      for (auto [field, value] : {std::pair{"spec.queue_wait_alert_s", sd.spec.queue_wait_alert_s},
                                  std::pair{"spec.cluster_offline_for_s", sd.spec.cluster_offline_for_s},
                                  std::pair{"spec.node_not_ready_for_s", sd.spec.node_not_ready_for_s}}) {
        if (value < 0) {
          return in_document(i, errors::invalid(field, "must not be negative (seconds)", "不能为负数（秒）"));
        }
      }
      if (sd.spec.tmp_retention_s < 60) {
        return in_document(i, errors::invalid("spec.tmp_retention_s", "must be at least 60 (seconds)",
                                              "至少为 60（秒）"));
      }
      for (auto [field, value] : {std::pair{"spec.log_retention_s", sd.spec.log_retention_s},
                                  std::pair{"spec.event_retention_s", sd.spec.event_retention_s},
                                  std::pair{"spec.task_retention_s", sd.spec.task_retention_s}}) {
        if (value != 0 && value < 60) {
          return in_document(i, errors::invalid(field, "must be 0 (keep forever) or at least 60 (seconds)",
                                                "应为 0（永久保留）或至少 60（秒）"));
        }
      }
      if (sd.spec.lease_ttl_s < 5 || sd.spec.lost_after_s < sd.spec.lease_ttl_s) {
        return in_document(i, errors::invalid("spec.lost_after_s", "must be >= lease_ttl_s >= 5",
                                              "必须 >= lease_ttl_s >= 5"));
      }
      for (auto [field, value] : {std::pair{"spec.beacon_period_ms", sd.spec.beacon_period_ms},
                                  std::pair{"spec.beacon_deadline_ms", sd.spec.beacon_deadline_ms}}) {
        if (value != 0 && (value < 50 || value > 60000)) {
          return in_document(i, errors::invalid(field, "must be 0 (derived from lease_ttl_s) or 50..60000 (ms)",
                                                "应为 0（由 lease_ttl_s 推导）或 50..60000（毫秒）"));
        }
      }
      if (auto t = fence_timing(fleet.server.control); !t.ok()) return in_document(i, t.error());
      if (sd.spec.reservations_per_group < 0 || sd.spec.reservations_per_group > 1000) {
        return in_document(i, errors::invalid("spec.reservations_per_group", "must be 0..1000", "应为 0..1000"));
      }
      if (sd.spec.http_threads < 1 || sd.spec.http_threads > ServerSettings::kMaxHttpThreads) {
        const std::string range = "1.." + std::to_string(ServerSettings::kMaxHttpThreads);
        return in_document(i, errors::invalid("spec.http_threads", "must be " + range, "应为 " + range));
      }
      if (sd.spec.max_victims < 1 || sd.spec.max_victims > 10000) {
        return in_document(i, errors::invalid("spec.max_victims", "must be 1..10000", "应为 1..10000"));
      }
      if (sd.spec.reasons_refresh_s < 0 || sd.spec.reasons_refresh_s > 3600) {
        return in_document(i, errors::invalid("spec.reasons_refresh_s", "must be 0..3600", "应为 0..3600"));
      }
      if (sd.spec.reasons_refresh_per_cycle < 0 || sd.spec.reasons_refresh_per_cycle > 1'000'000) {
        return in_document(i, errors::invalid("spec.reasons_refresh_per_cycle", "must be 0..1000000",
                                              "应为 0..1000000"));
      }
    } else if (kind == "Cluster") {
      ClusterDoc cd;
      if (auto st = from_json(d, cd, strict); !st.ok()) return in_document(i, st.error());
      if (auto st = validate_name(cd.metadata.name, "metadata.name"); !st.ok()) return in_document(i, st.error());
      ClusterConfig c;
      c.id = cd.metadata.name;
      c.labels = cd.metadata.labels;
      c.display_name = cd.spec.display_name;
      c.executor = cd.spec.executor;
      c.storage_pool = cd.spec.storage_pool;
      c.storage_mount = cd.spec.storage_mount;
      c.embedded_agent = cd.spec.embedded_agent;
      c.nodes = cd.spec.nodes;
      for (std::size_t n = 0; n < c.nodes.size(); ++n) {
        std::string path = "spec.nodes[" + std::to_string(n) + "]";
        if (auto st = validate_name(c.nodes[n].name, path + ".name"); !st.ok()) return in_document(i, st.error());
        if (!c.nodes[n].cpu.empty()) {
          if (auto q = parse_quantity(kCpu, c.nodes[n].cpu, path + ".cpu"); !q.ok()) return in_document(i, q.error());
        }
        if (!c.nodes[n].memory.empty()) {
          if (auto q = parse_quantity(kMemory, c.nodes[n].memory, path + ".memory"); !q.ok()) {
            return in_document(i, q.error());
          }
        }
        if (c.nodes[n].gpus.count < 0 || c.nodes[n].gpus.count > 64) {
          return in_document(i, errors::invalid(path + ".gpus.count", "must be 0..64", "应为 0..64"));
        }
      }
      fleet.clusters.push_back(std::move(c));
    } else if (kind == "User") {
      UserDoc ud;
      if (auto st = from_json(d, ud, strict); !st.ok()) return in_document(i, st.error());
      if (auto st = validate_name(ud.metadata.name, "metadata.name"); !st.ok()) return in_document(i, st.error());
      fleet.users.push_back(User{ud.metadata.name, ud.spec.role, 0});
    } else if (kind == "PriorityClass" || kind == "ResourceGroup" || kind == "ProjectGroup") {
      // Validated now, so a bad file fails at start rather than half-applied.
      Status st;
      if (kind == "PriorityClass") {
        auto r = priority_class_from_document(d);
        if (!r.ok()) st = r.error();
      } else if (kind == "ResourceGroup") {
        auto r = resource_group_from_document(d);
        if (!r.ok()) st = r.error();
      } else {
        auto r = project_group_from_document(d);
        if (!r.ok()) st = r.error();
      }
      if (!st.ok()) return in_document(i, st.error());
      fleet.documents.push_back(d);
    } else {
      return in_document(i, errors::invalid("kind", "unknown kind \"" + kind +
                                                        "\" (Server, Cluster, User, PriorityClass, ResourceGroup, "
                                                        "ProjectGroup)",
                                            "未知类型 \"" + kind + "\""));
    }
  }
  return fleet;
}

Result<FleetConfig> load_fleet_config(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return errors::invalid("--config", "cannot read " + path, "无法读取 " + path);
  }
  std::stringstream ss;
  ss << in.rdbuf();
  auto r = parse_fleet_config(ss.str());
  if (!r.ok()) {
    Error e = r.error();
    e.message = path + ": " + e.message;
    e.message_zh = path + "：" + e.message_zh;
    return e;
  }
  return r;
}

Status apply_fleet(ControlPlane& cp, const FleetConfig& fleet) {
  Principal admin;
  admin.kind = Principal::Kind::user;
  admin.user = "admin";
  admin.role = PlatformRole::admin;
  for (const auto& c : fleet.clusters) {
    auto existing = cp.get_cluster(admin, c.id);
    if (existing.ok()) continue;
    json::object body;
    body["id"] = c.id;
    body["display_name"] = c.display_name;
    body["executor"] = boost::describe::enum_to_string(c.executor, "local");
    body["storage_pool"] = c.storage_pool;
    body["storage_mount"] = c.storage_mount;
    body["labels"] = to_json(c.labels);
    CP_ASSIGN(auto created, cp.create_cluster(admin, body));
    (void)created;
  }
  CP_ASSIGN(auto users, cp.list_users(admin));
  for (const auto& u : fleet.users) {
    bool exists = false;
    for (const auto& e : users) exists = exists || e.name == u.name;
    if (exists) continue;
    json::object body;
    body["name"] = u.name;
    body["role"] = boost::describe::enum_to_string(u.role, "user");
    CP_ASSIGN(auto created, cp.create_user(admin, body));
    (void)created;
  }
  // Classes first, then resource groups, then project groups (which refer to them).
  for (const char* kind : {"PriorityClass", "ResourceGroup", "ProjectGroup"}) {
    for (const auto& d : fleet.documents) {
      if (d.as_object().at("kind").as_string() != kind) continue;
      std::string name(d.as_object().at("metadata").as_object().at("name").as_string());
      CP_ASSIGN(auto applied, cp.apply_document(admin, kind, d, name));
      (void)applied;
    }
  }
  return {};
}

}  // namespace cp
