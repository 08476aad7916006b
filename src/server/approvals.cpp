// Approvals: a project group lists a resource group with `approval:
// required`; a member asks (request_approval), a project-group admin or a
// platform admin decides (decide_approval), optionally until a time. The
// submit path (pipelines.cpp, approval_refusal) lets work through only while
// an approval of the pair holds.
#include "common/ids.h"
#include "server/control_plane.h"
#include "server/internal.h"

namespace cp {

namespace {

bool needs_approval(const ProjectGroup& pg, const std::string& rg) {
  for (const auto& g : pg.resource_groups) {
    if (g.name == rg && g.approval == "required") return true;
  }
  return false;
}

Error invalid_state(const Approval& a, const std::string& want_en, const std::string& want_zh) {
  const std::string st = boost::describe::enum_to_string(a.state, "?");
  Error e{"invalid_state", 409, "approval " + a.id + " is " + st + "; only " + want_en,
          "审批 " + a.id + " 的状态为 " + st + "；只有" + want_zh, {}};
  e.details["state"] = st;
  return e;
}

json::object approval_event_data(const Approval& a) {
  json::object d;
  d["project_group"] = a.project_group;
  d["resource_group"] = a.resource_group;
  d["requested_by"] = a.requested_by;
  if (a.expires_at) d["expires_at"] = a.expires_at;
  return d;
}

}  // namespace

Result<std::optional<Error>> internal::approval_refusal(Tx& tx, const ProjectGroup& pg, const std::string& rg,
                                                       const Principal& p, Millis now) {
  if (!needs_approval(pg, rg) || p.is_admin()) return std::optional<Error>();
  ApprovalQuery q;
  q.project_group = pg.name;
  q.resource_group = rg;
  q.limit = 20;
  CP_ASSIGN(auto page, tx.list_approvals(q));
  std::string en = "resource group " + rg + " needs an approval for project group " + pg.name;
  std::string zh = "项目组 " + pg.name + " 使用资源组 " + rg + " 需要审批";
  for (const auto& a : page.items) {  // newest first: the latest word counts
    if (a.holds_at(now)) return std::optional<Error>();
    if (a.state == ApprovalState::pending) {
      en += ": request " + a.id + " by " + a.requested_by + " is waiting for a decision";
      zh += "：" + a.requested_by + " 的申请 " + a.id + " 正在等待审批";
    } else if (a.state == ApprovalState::approved) {
      en += ": approval " + a.id + " expired at " + format_time(a.expires_at) + "; ask again";
      zh += "：审批 " + a.id + " 已于 " + format_time(a.expires_at) + " 过期，请重新申请";
    } else {
      const std::string verb = a.state == ApprovalState::denied ? "denied" : "revoked";
      en += ": request " + a.id + " was " + verb + " by " + a.decided_by + (a.note.empty() ? "" : " (" + a.note + ")");
      zh += "：申请 " + a.id + " 已被 " + a.decided_by + (a.state == ApprovalState::denied ? " 拒绝" : " 撤销") +
            (a.note.empty() ? "" : "（" + a.note + "）");
    }
    break;
  }
  if (page.items.empty()) {
    en += "; ask with `cubeplane approvals request --project-group " + pg.name + " --resource-group " + rg + "`";
    zh += "；请用 `cubeplane approvals request --project-group " + pg.name + " --resource-group " + rg + "` 申请";
  }
  Error e = errors::forbidden(en, zh);
  e.code = "approval_required";
  e.details["project_group"] = pg.name;
  e.details["resource_group"] = rg;
  return std::optional<Error>(std::move(e));
}

Result<Approval> ControlPlane::request_approval(const Principal& p, const json::value& body) {
  if (!body.is_object()) return errors::invalid("", "a JSON object is required", "需要 JSON 对象");
  const auto& o = body.as_object();
  auto text = [&](const char* k) -> std::string {
    auto* v = o.if_contains(k);
    return v && v->is_string() ? std::string(v->as_string()) : "";
  };
  for (const auto& kv : o) {
    if (kv.key() != "project_group" && kv.key() != "resource_group" && kv.key() != "reason") {
      return errors::invalid(std::string(kv.key()), "unknown field", "未知字段");
    }
  }
  Approval a;
  a.project_group = text("project_group");
  a.resource_group = text("resource_group");
  a.reason = text("reason");
  if (a.project_group.empty()) return errors::invalid("project_group", "is required", "必填");
  if (a.resource_group.empty()) return errors::invalid("resource_group", "is required", "必填");
  if (a.reason.size() > 2000) return errors::invalid("reason", "is longer than 2000 bytes", "超过 2000 字节");
  if (!p.can_submit_to(a.project_group)) {
    return internal::forbidden_for(p, "ask for approvals of project group " + a.project_group,
                                   "为项目组 " + a.project_group + " 申请审批");
  }
  const Millis now = clock_.now_ms();
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto pg, tx.get_project_group(a.project_group));
    if (!pg) return internal::unknown_reference("project_group", "project group", a.project_group);
    if (!needs_approval(*pg, a.resource_group)) {
      Error e = errors::invalid("resource_group",
                                "project group " + pg->name + " does not list resource group " + a.resource_group +
                                    " with approval: required",
                                "项目组 " + pg->name + " 未将资源组 " + a.resource_group + " 列为需要审批");
      e.code = "approval_not_required";
      return e;
    }
    ApprovalQuery q;
    q.project_group = a.project_group;
    q.resource_group = a.resource_group;
    q.states = {ApprovalState::pending, ApprovalState::approved};
    CP_ASSIGN(auto open, tx.list_approvals(q));
    for (const auto& o : open.items) {
      if (o.state == ApprovalState::pending || o.holds_at(now)) {
        Error e = errors::already_exists("approval", o.id);
        e.details["state"] = boost::describe::enum_to_string(o.state, "?");
        return e;
      }
    }
    a.id = new_id("ap", now);
    a.requested_by = p.user;
    a.state = ApprovalState::pending;
    a.created_at = now;
    CP_TRY(tx.upsert_approval(a));
    CP_ASSIGN(auto eid, tx.append_event(internal::make_event(now, p.user, "approval", a.id, "approval.state", "",
                                                             "pending", a.reason, approval_event_data(a))));
    (void)eid;
    return {};
  }));
  return a;
}

Result<Approval> ControlPlane::decide_approval(const Principal& p, const std::string& id, const std::string& verb,
                                               const json::value& body) {
  std::string note;
  std::int64_t ttl_s = 0;
  if (body.is_object()) {
    for (const auto& kv : body.as_object()) {
      if (kv.key() == "note" && kv.value().is_string()) {
        note = std::string(kv.value().as_string());
      } else if (kv.key() == "ttl_s" && kv.value().is_int64() && verb == "approve") {
        ttl_s = kv.value().as_int64();
        if (ttl_s < 60 || ttl_s > 5 * 366 * 86400) {
          return errors::invalid("ttl_s", "must be between 60 s and 5 years", "必须在 60 秒到 5 年之间");
        }
      } else {
        return errors::invalid(std::string(kv.key()), "unknown or mistyped field", "未知字段或类型错误");
      }
    }
  } else if (!body.is_null()) {
    return errors::invalid("", "a JSON object is required", "需要 JSON 对象");
  }
  if (note.size() > 2000) return errors::invalid("note", "is longer than 2000 bytes", "超过 2000 字节");
  const Millis now = clock_.now_ms();
  Approval a;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto got, tx.get_approval(id));
    if (!got || !p.can_read_project(got->project_group)) return errors::not_found("approval", id);
    a = *got;
    if (!p.can_admin_project(a.project_group)) {
      return internal::forbidden_for(p, "decide approvals of project group " + a.project_group,
                                     "审批项目组 " + a.project_group + " 的申请");
    }
    const std::string from = boost::describe::enum_to_string(a.state, "?");
    if (verb == "revoke") {
      if (a.state != ApprovalState::approved) return invalid_state(a, "an approved one can be revoked", "已批准的审批可以撤销");
      a.state = ApprovalState::revoked;
    } else {
      if (a.state != ApprovalState::pending) return invalid_state(a, "a pending one can be decided", "待审批的申请可以决定");
      a.state = verb == "approve" ? ApprovalState::approved : ApprovalState::denied;
      if (ttl_s > 0) a.expires_at = now + ttl_s * 1000;
    }
    a.decided_by = p.user;
    a.decided_at = now;
    a.note = note;
    CP_TRY(tx.upsert_approval(a));
    CP_ASSIGN(auto eid, tx.append_event(internal::make_event(now, p.user, "approval", a.id, "approval.state", from,
                                                             boost::describe::enum_to_string(a.state, "?"), note,
                                                             approval_event_data(a))));
    (void)eid;
    return {};
  }));
  return a;
}

Result<ApprovalPage> ControlPlane::list_approvals(const Principal& p, ApprovalQuery q) {
  if (p.kind != Principal::Kind::user) return internal::forbidden_for(p, "read approvals", "查看审批");
  if (!p.can_read_all()) {
    std::set<std::string> mine;
    for (const auto& [pg, role] : p.project_roles) mine.insert(pg);
    q.project_groups = std::move(mine);
  }
  ApprovalPage page;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(page, tx.list_approvals(q));
    return {};
  }));
  return page;
}

}  // namespace cp
