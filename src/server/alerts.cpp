// Alerts: the rules that watch the platform, the pass that runs them, the
// deliveries, and the API's view. The state machine itself is pure and
// lives in alert_rules.cpp; this file gathers what it needs from the store
// and writes what it decides.
//
// Rules (ServerConfig and each resource group's AlertPolicy say when):
//   quota_watermark      a resource group uses >= t % of a guaranteed
//                        resource, for each of its thresholds (70/85/95)
//   cluster_offline      a cluster is offline, with its reason
//   credential_expiring  a silent agent's credential runs out soon
//   node_not_ready       a node of an online cluster is NotReady (not in maintenance)
//   queue_wait           a resource group's oldest queued task waits too long
//   budget               a project group used >= 80 % / 100 % of its monthly GPU hours
//                        or of its monthly cost (with a price table)
//
// Receivers (each with its own retries, alert_rules.h):
//   webhook:<url>        an HTTP POST of Alertmanager's payload (version 4)
//   email:<address>      a plain-text mail through smtp_url (common/smtp_client.h)
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <set>

#include "common/http_client.h"
#include "common/ids.h"
#include "common/smtp_client.h"
#include "server/alert_rules.h"
#include "server/control_plane.h"
#include "server/internal.h"
#include "server/unknown_attempts.h"

namespace cp {

namespace {

std::string percent(double v) { return std::to_string(static_cast<std::int64_t>(std::floor(v))) + "%"; }

std::string duration_text(std::int64_t s) {
  if (s >= 3600) return std::to_string(s / 3600) + "h" + (s % 3600 >= 60 ? std::to_string(s % 3600 / 60) + "m" : "");
  if (s >= 60) return std::to_string(s / 60) + "m";
  return std::to_string(s) + "s";
}

std::string severity_of_level(std::size_t i, std::size_t levels) {
  if (i + 1 == levels) return "critical";
  if (i + 2 == levels) return "warning";
  return "info";
}

// `extra`: the resource group's own webhook (AlertPolicy), "" for none.
std::vector<std::string> receivers(const ServerConfig& config, const std::string& extra) {
  std::vector<std::string> out;
  auto add = [&](const std::string& r) {
    if (std::find(out.begin(), out.end(), r) == out.end()) out.push_back(r);
  };
  if (!extra.empty()) add("webhook:" + extra);
  for (const auto& w : config.alert_webhooks) {
    if (!w.empty()) add("webhook:" + w);
  }
  for (const auto& e : config.alert_emails) {
    if (!e.empty()) add("email:" + e);
  }
  return out;
}

// The Alertmanager webhook payload (version 4) for one alert's transition,
// so that receivers written for Alertmanager work unchanged.
std::string alertmanager_payload(const Alert& a, const std::string& notify, const std::string& external_url) {
  json::object labels;
  labels["alertname"] = a.rule;
  labels["severity"] = a.severity;
  for (const auto& [k, v] : a.labels) labels[k] = v;
  json::object annotations;
  annotations["summary"] = a.summary;
  annotations["summary_zh"] = a.summary_zh;
  annotations["value"] = a.value;
  json::object alert;
  alert["status"] = notify;
  alert["labels"] = labels;
  alert["annotations"] = annotations;
  alert["startsAt"] = format_time(a.firing_at ? a.firing_at : a.started_at);
  alert["endsAt"] = a.resolved_at ? format_time(a.resolved_at) : "0001-01-01T00:00:00Z";
  alert["generatorURL"] = external_url.empty() ? "" : external_url + "/alerts";
  alert["fingerprint"] = a.id;
  json::object body;
  body["version"] = "4";
  body["groupKey"] = "{}:{alertname=\"" + a.rule + "\"}";
  body["truncatedAlerts"] = 0;
  body["status"] = notify;
  body["receiver"] = "cubeplane";
  body["groupLabels"] = json::object{{"alertname", a.rule}};
  body["commonLabels"] = labels;
  body["commonAnnotations"] = annotations;
  body["externalURL"] = external_url;
  body["alerts"] = json::array{alert};
  return dump(body);
}

// The email about one alert's transition: the subject says what and how
// bad, the body both languages and what a mail client shows nowhere else.
// The Message-ID is the same on every try of one transition (a server that
// took a message whose answer got lost may drop the copy), and "resolved"
// replies to "firing", so mail clients thread the two.
MailMessage alert_mail(const Alert& a, const std::string& notify, const ServerConfig& config, const std::string& to,
                       Millis now) {
  std::string upper = notify;
  for (char& ch : upper) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  std::string summary = a.summary;
  if (summary.size() > 200) {  // the body has it whole
    std::size_t cut = 200;
    while (cut > 0 && (static_cast<unsigned char>(summary[cut]) & 0xC0) == 0x80) --cut;
    summary = summary.substr(0, cut) + "...";
  }
  std::string labels;
  for (const auto& [k, v] : a.labels) labels += (labels.empty() ? "" : ", ") + k + "=" + v;
  char value[48];
  if (a.value == std::floor(a.value) && std::fabs(a.value) < 1e15) {
    std::snprintf(value, sizeof value, "%lld", static_cast<long long>(a.value));
  } else {
    std::snprintf(value, sizeof value, "%.2f", a.value);
  }
  const std::string domain = config.smtp_from.substr(config.smtp_from.find('@') + 1);
  MailMessage m;
  m.from = config.smtp_from;
  m.to = {to};
  m.subject = "[" + upper + "] " + a.rule + " " + a.severity + ": " + summary;
  m.date = now;
  m.message_id = a.id + "." + notify + "@" + domain;
  if (notify == "resolved") m.in_reply_to = a.id + ".firing@" + domain;
  std::string& b = m.body;
  b += "[" + upper + "] " + a.rule + " (" + a.severity + ")\n";
  b += std::string(notify == "resolved" ? "[已恢复] " : "[告警中] ") + a.rule + "（" + a.severity + "）\n\n";
  b += a.summary + "\n";
  if (!a.summary_zh.empty()) b += a.summary_zh + "\n";
  b += "\n";
  b += "Value / 值:          " + std::string(value) + "\n";
  b += "Labels / 标签:       " + labels + "\n";
  b += "Started / 开始:      " + format_time(a.started_at) + "\n";
  if (a.firing_at) b += "Firing / 触发:       " + format_time(a.firing_at) + "\n";
  if (a.resolved_at) b += "Resolved / 恢复:     " + format_time(a.resolved_at) + "\n";
  b += "Alert / 告警:        " + a.id + "\n";
  if (!config.external_url.empty()) b += "\n" + config.external_url + "/alerts\n";
  return m;
}

std::string send_alert_mail(const ServerConfig& config, const MailMessage& m) {
  if (config.smtp_url.empty()) return "no smtp_url is configured";
  SmtpSettings smtp;
  smtp.url = config.smtp_url;
  smtp.user = config.smtp_user;
  smtp.password = config.smtp_password;
  auto st = send_mail(smtp, m);
  return st.ok() ? "" : st.error().message;
}

std::string http_post(const std::string& url, const std::string& body) {
  HttpClient client;
  HttpRequestOptions opts;
  opts.timeout_ms = 10000;
  auto r = client.request("POST", url, body, "application/json", opts);
  if (!r.ok()) return r.error().message;
  if (r->status < 200 || r->status >= 300) {
    return "HTTP " + std::to_string(r->status) + (r->body.empty() ? "" : ": " + r->body.substr(0, 200));
  }
  return "";
}

bool may_see(const Principal& p, const Alert& a) {
  if (p.kind != Principal::Kind::user) return false;
  auto pg = a.labels.find("project_group");
  return pg == a.labels.end() || p.can_read_project(pg->second);
}

}  // namespace

// ------------------------------------------------------------ conditions

static Result<std::vector<AlertCondition>> gather_conditions(Tx& tx, const ServerConfig& config, Millis now,
                                                             const std::map<std::string, MonthUse>& month_use,
                                                             FleetNodes& fleet_nodes,
                                                             const FleetNodes::Marks& nodes_written) {
  std::vector<AlertCondition> out;

  // Quota watermarks: what attempts hold, against each guaranteed amount.
  CP_ASSIGN(auto rgs, tx.list_resource_groups());
  CP_ASSIGN(auto used, internal::used_by_resource_group(tx));
  for (const auto& rg : rgs) {
    auto thresholds = rg.alerts.thresholds;
    std::sort(thresholds.begin(), thresholds.end());
    thresholds.erase(std::unique(thresholds.begin(), thresholds.end()), thresholds.end());
    for (const auto& [res, q] : rg.quota) {
      if (q.guaranteed <= 0) continue;
      const std::int64_t u = used[rg.name].get(res);
      const double pct = 100.0 * static_cast<double>(u) / static_cast<double>(q.guaranteed);
      for (std::size_t i = 0; i < thresholds.size(); ++i) {
        if (thresholds[i] <= 0 || pct < thresholds[i]) continue;
        AlertCondition c;
        c.rule = "quota_watermark";
        c.severity = severity_of_level(i, thresholds.size());
        c.labels = {{"resource_group", rg.name}, {"resource", res}, {"threshold", std::to_string(thresholds[i])}};
        c.value = pct;
        c.for_s = rg.alerts.sustained_s;
        const std::string amounts = format_quantity(res, u) + " / " + format_quantity(res, q.guaranteed);
        c.summary = "resource group " + rg.name + " uses " + percent(pct) + " of its guaranteed " + res + " (" +
                    amounts + "), above the " + std::to_string(thresholds[i]) + "% watermark";
        c.summary_zh = "资源组 " + rg.name + " 已使用保障配额 " + res + " 的 " + percent(pct) + "（" + amounts +
                       "），超过 " + std::to_string(thresholds[i]) + "% 水位线";
        c.receivers = receivers(config, rg.alerts.webhook);
        out.push_back(std::move(c));
      }
    }
  }

  // Queue wait: the oldest queued task of each group.
  if (config.queue_wait_alert_s > 0) {
    CP_ASSIGN(auto queued, tx.tasks_in_states({TaskState::Queued}));
    std::map<std::string, Millis> oldest;
    for (const auto& t : queued) {
      const Millis since = t.queued_at ? t.queued_at : t.created_at;
      auto [it, fresh] = oldest.emplace(t.resource_group, since);
      if (!fresh) it->second = std::min(it->second, since);
    }
    std::map<std::string, std::string> webhook_of;
    for (const auto& rg : rgs) webhook_of[rg.name] = rg.alerts.webhook;
    for (const auto& [rg, since] : oldest) {
      const std::int64_t wait_s = (now - since) / 1000;
      if (wait_s < config.queue_wait_alert_s) continue;
      AlertCondition c;
      c.rule = "queue_wait";
      c.severity = "warning";
      c.labels = {{"resource_group", rg}};
      c.value = static_cast<double>(wait_s);
      c.summary = "the oldest queued task of resource group " + rg + " has waited " + duration_text(wait_s) +
                  " (alert above " + duration_text(config.queue_wait_alert_s) + ")";
      c.summary_zh = "资源组 " + rg + " 中最早排队的任务已等待 " + duration_text(wait_s) + "（告警阈值 " +
                     duration_text(config.queue_wait_alert_s) + "）";
      c.receivers = receivers(config, webhook_of[rg]);
      out.push_back(std::move(c));
    }
  }

  // Clusters and their nodes.
  CP_ASSIGN(auto clusters, tx.list_clusters());
  // The Unknown attempts of offline clusters wait for an operator
  // (unknown_attempts.h): the alert says how many, and what to do.
  std::vector<std::string> offline;
  for (const auto& cl : clusters) {
    if (cl.state == ClusterState::offline) offline.push_back(cl.id);
  }
  CP_ASSIGN(auto unknown, tx.attempts_in_state(AttemptState::Unknown, offline));
  std::map<std::string, std::int64_t> unknown_on;
  for (const auto& a : unknown) ++unknown_on[a.cluster_id];
  std::set<std::string> online;
  for (const auto& cl : clusters) {
    if (cl.state == ClusterState::online || cl.state == ClusterState::degraded) online.insert(cl.id);
    if (cl.state == ClusterState::offline) {
      AlertCondition c;
      c.rule = "cluster_offline";
      c.severity = "critical";
      c.labels = {{"cluster", cl.id}};
      c.value = cl.last_contact ? static_cast<double>((now - cl.last_contact) / 1000) : 0;
      c.for_s = config.cluster_offline_for_s;
      const std::string why = cl.state_reason + (cl.state_message.empty() ? "" : ": " + cl.state_message);
      c.summary = "cluster " + cl.id + " is offline (" + why + ")" +
                  (cl.last_contact ? ", last contact " + format_time(cl.last_contact) : "");
      c.summary_zh = "集群 " + cl.id + " 离线（" + why + "）" +
                     (cl.last_contact ? "，最后联系时间 " + format_time(cl.last_contact) : "");
      if (const std::int64_t n = unknown_on[cl.id]; n > 0) {
        const std::string count = std::to_string(n), check = internal::job_check(cl.executor);
        const std::string confirm = "cubeplane clusters confirm-lost " + cl.id;
        c.summary += "; " + count + " attempt(s) Unknown, their jobs may still run: check with " + check +
                     " that they are gone, then run " + confirm;
        c.summary_zh += "；" + count + " 个尝试状态未知，其作业可能仍在运行：请用 " + check + " 确认作业已不存在，然后运行 " +
                        confirm;
      }
      c.receivers = receivers(config, "");
      out.push_back(std::move(c));
    }
    // An online agent renews its credential well before it runs out; a
    // silent one cannot, and after expiry needs a new bootstrap token.
    const Millis left = cl.credential_expires_at - now;
    if (cl.credential_expires_at > 0 && cl.state != ClusterState::online && left > 0 &&
        left <= config.credential_warning_s * 1000) {
      AlertCondition c;
      c.rule = "credential_expiring";
      c.severity = "warning";
      c.labels = {{"cluster", cl.id}};
      c.value = static_cast<double>(left / 1000);
      c.summary = "the agent credential of cluster " + cl.id + " expires in " + duration_text(left / 1000) +
                  " and its agent is not renewing it; after " + format_time(cl.credential_expires_at) +
                  " the agent needs a new bootstrap token";
      c.summary_zh = "集群 " + cl.id + " 的 agent 凭据将在 " + duration_text(left / 1000) +
                     " 后过期，且 agent 未在续期；" + format_time(cl.credential_expires_at) +
                     " 之后需要新的引导令牌";
      c.receivers = receivers(config, "");
      out.push_back(std::move(c));
    }
  }
  std::vector<NodeSummary> not_ready;  // copies: few, and the cache is another pass's once the visit ends
  CP_TRY(fleet_nodes.visit(tx, nodes_written, clusters, [&](const NodeSummary& n) {
    if (!n.ready && !n.in_maintenance && online.count(n.cluster_id)) not_ready.push_back(n);
  }));
  for (const auto& n : not_ready) {
    AlertCondition c;
    c.rule = "node_not_ready";
    c.severity = "warning";
    c.labels = {{"cluster", n.cluster_id}, {"node", n.name}};
    c.for_s = config.node_not_ready_for_s;
    const std::string why = n.not_ready_reason.empty() ? "no reason given" : n.not_ready_reason;
    c.summary = "node " + n.cluster_id + "/" + n.name + " is NotReady (" + why + ")";
    c.summary_zh = "节点 " + n.cluster_id + "/" + n.name + " 未就绪（" + why + "）";
    c.receivers = receivers(config, "");
    out.push_back(std::move(c));
  }

  // Budgets: this month's GPU hours and cost against each project group's.
  CP_ASSIGN(auto pgs, tx.list_project_groups());
  for (const auto& pg : pgs) {
    auto it = month_use.find(pg.name);
    const MonthUse use = it == month_use.end() ? MonthUse{} : it->second;
    struct Measure {
      std::string name;  // the label "budget"
      double used, limit;
      std::string unit, unit_zh;
    };
    std::vector<Measure> measures;
    if (pg.monthly_budget.gpu_hours && *pg.monthly_budget.gpu_hours > 0) {
      measures.push_back({"gpu_hours", use.gpu_hours, static_cast<double>(*pg.monthly_budget.gpu_hours),
                          "GPU hours", "GPU 小时"});
    }
    if (pg.monthly_budget.cost_cents && *pg.monthly_budget.cost_cents > 0 && !use.currency.empty()) {
      measures.push_back({"cost", static_cast<double>(use.cost_cents) / 100.0,
                          static_cast<double>(*pg.monthly_budget.cost_cents) / 100.0, use.currency, use.currency});
    }
    for (const auto& m : measures) {
      const double pct = 100.0 * m.used / m.limit;
      for (int level : {80, 100}) {
        if (pct < level) continue;
        AlertCondition c;
        c.rule = "budget";
        c.severity = level >= 100 ? "critical" : "warning";
        c.labels = {{"project_group", pg.name}, {"budget", m.name}, {"threshold", std::to_string(level)}};
        c.value = pct;
        char amounts[96];
        std::snprintf(amounts, sizeof amounts, "%.2f of %.2f", m.used, m.limit);
        char amounts_zh[96];
        std::snprintf(amounts_zh, sizeof amounts_zh, "%.2f / %.2f", m.used, m.limit);
        c.summary = "project group " + pg.name + " has used " + percent(pct) + " of its monthly budget (" + amounts +
                    " " + m.unit + ")";
        c.summary_zh = "项目组 " + pg.name + " 已用本月预算的 " + percent(pct) + "（" + amounts_zh + " " + m.unit_zh + "）";
        c.receivers = receivers(config, "");
        out.push_back(std::move(c));
      }
    }
  }
  return out;
}

Status ControlPlane::evaluate_alerts() {
  std::lock_guard lock(alert_mu_);
  const Millis now = clock_.now_ms();
  // This month's GPU hours and cost per project group (ledger plus running work).
  CP_ASSIGN(auto month_use, month_to_date(now));
  // The rules read in a read transaction (a write one would hold up every
  // submit for as long as they read); only changes are written. Nothing
  // else writes alerts between the two: deliveries hold alert_mu_ too.
  std::vector<AlertCondition> conditions;
  std::vector<Alert> open;
  const auto nodes_written = fleet_nodes_.marks();  // before the read opens (fleet_nodes.h)
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(conditions, gather_conditions(tx, config_, now, month_use, fleet_nodes_, nodes_written));
    CP_ASSIGN(open, tx.open_alerts());
    return {};
  }));
  const auto step = step_alerts(open, conditions, now, [&] { return new_id("alert", now); });
  if (step.changed.empty() && step.dropped.empty()) return {};
  return store_.write([&](Tx& tx) -> Status {
    for (const auto& id : step.dropped) CP_TRY(tx.delete_alert(id));
    for (const auto& a : step.changed) {
      auto before = std::find_if(open.begin(), open.end(), [&](const Alert& o) { return o.id == a.id; });
      const bool moved = before == open.end() || before->state != a.state;
      CP_TRY(tx.upsert_alert(a));
      if (!moved) continue;
      const std::string from = before == open.end() ? "" : boost::describe::enum_to_string(before->state, "?");
      const std::string to = boost::describe::enum_to_string(a.state, "?");
      json::object data;
      data["rule"] = a.rule;
      data["severity"] = a.severity;
      for (const auto& [k, v] : a.labels) data[k] = v;
      CP_ASSIGN(auto eid, tx.append_event(internal::make_event(now, "system", "alert", a.id, "alert.state", from, to,
                                                               a.summary, std::move(data))));
      (void)eid;
      if (a.state != AlertState::pending) spdlog::info("alert {} {}: {}", a.rule, to, a.summary);
    }
    return {};
  });
}

// ------------------------------------------------------------ deliveries

void ControlPlane::set_alert_sender(AlertSend send) {
  std::lock_guard lock(alert_mu_);
  alert_send_ = std::move(send);
}

Status ControlPlane::deliver_alerts() {
  std::lock_guard lock(alert_mu_);
  const Millis now = clock_.now_ms();
  std::vector<Alert> due;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    due.clear();
    CP_ASSIGN(auto open, tx.open_alerts());
    for (auto& a : open) {
      if (!due_deliveries(a, now).empty()) due.push_back(std::move(a));
    }
    return {};
  }));
  const AlertSend send = alert_send_ ? alert_send_ : AlertSend(http_post);
  for (auto& a : due) {
    // Network first, outside any transaction; then the outcome is written
    // onto the alert as it is now (a pass may have moved it meanwhile: a
    // delivery of a transition that is no longer the latest is dropped).
    std::vector<std::pair<AlertDelivery, std::string>> results;
    for (auto i : due_deliveries(a, now)) {
      const auto& d = a.deliveries[i];
      std::string error;
      if (d.receiver.starts_with("webhook:")) {
        error = send(d.receiver.substr(8), alertmanager_payload(a, d.notify, config_.external_url));
      } else if (d.receiver.starts_with("email:")) {
        error = send_alert_mail(config_, alert_mail(a, d.notify, config_, d.receiver.substr(6), now));
      } else {
        error = "unknown receiver kind";
      }
      if (!error.empty()) spdlog::warn("alert {} ({}) to {}: {}", a.id, d.notify, d.receiver, error);
      results.emplace_back(d, error);
    }
    CP_TRY(store_.write([&](Tx& tx) -> Status {
      CP_ASSIGN(auto open, tx.open_alerts());
      auto cur = std::find_if(open.begin(), open.end(), [&](const Alert& o) { return o.id == a.id; });
      if (cur == open.end()) return {};
      for (const auto& [d, error] : results) {
        for (std::size_t i = 0; i < cur->deliveries.size(); ++i) {
          const auto& c = cur->deliveries[i];
          if (c.receiver == d.receiver && c.notify == d.notify && c.attempts == d.attempts && c.state == "pending") {
            record_delivery(*cur, i, now, error);
          }
        }
      }
      return tx.upsert_alert(*cur);
    }));
  }
  return {};
}

// ------------------------------------------------------------- audit log

Status ControlPlane::record_audit(AuditEntry e) {
  e.at = clock_.now_ms();
  e.id = new_id("audit", e.at);
  return audit_batch_.append(std::move(e));
}

Result<AuditPage> ControlPlane::list_audit(const Principal& p, AuditQuery q) {
  if (!p.is_admin()) return internal::forbidden_for(p, "read the audit log", "查看审计日志");
  AuditPage page;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(page, tx.list_audit(q));
    return {};
  }));
  return page;
}

// --------------------------------------------------------------- reading

Result<AlertPage> ControlPlane::list_alerts(const Principal& p, AlertQuery q) {
  if (p.kind != Principal::Kind::user) return internal::forbidden_for(p, "read alerts", "查看告警");
  AlertPage page;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(page, tx.list_alerts(q));
    return {};
  }));
  std::erase_if(page.items, [&](const Alert& a) { return !may_see(p, a); });
  return page;
}

}  // namespace cp
