#include "cli/views.h"

#include <algorithm>
#include <array>
#include <set>

#include "cli/format.h"
#include "model/resource_use.h"

namespace cp::cli {
namespace {

constexpr std::size_t kReasonWidth = 60;
constexpr std::size_t kLabelsWidth = 60;
constexpr std::size_t kMessageWidth = 80;

std::string or_dash(std::string s) { return s.empty() ? "-" : s; }

// The first of several paths that holds something (not null, not ""):
// documents carry fields under metadata/spec, plain objects at the top, and
// a task's assigned_cluster is "" until it is placed.
const json::value* first_of(const json::value& v, std::initializer_list<std::string_view> paths) {
  for (auto p : paths) {
    const json::value* m = member_path(v, p);
    if (m == nullptr || m->is_null() || (m->is_string() && m->get_string().empty())) continue;
    return m;
  }
  return nullptr;
}
std::string text_of(const json::value& v, std::initializer_list<std::string_view> paths) {
  return scalar_text(first_of(v, paths));
}
Millis millis_of(const json::value& v, std::initializer_list<std::string_view> paths) {
  for (auto p : paths) {
    if (Millis m = millis_at(v, p); m != 0) return m;
  }
  return 0;
}

std::string yes_no(const json::value* v) {
  if (v == nullptr || !v->is_bool()) return "-";
  return v->get_bool() ? "yes" : "no";
}

std::string age_ago(Millis now, Millis t) {
  if (t == 0) return "-";
  return format_time_short(t) + " (" + format_age(now, t) + " ago)";
}

// "cpu=8, memory=32Gi" from a Resources map.
std::string resources_text(const json::value* r) {
  if (r == nullptr || !r->is_object()) return "-";
  std::string out;
  for (const auto& kv : r->get_object()) {
    if (!out.empty()) out += ", ";
    out += std::string(kv.key()) + "=" + scalar_text(&kv.value());
  }
  return or_dash(out);
}

// Names of the nodes an attempt was placed on, without repeats.
std::string attempt_nodes(const json::value& attempt) {
  const json::value* placements = member(attempt, "placements");
  if (placements == nullptr || !placements->is_array()) return "";
  std::vector<std::string> nodes;
  for (const auto& p : placements->get_array()) {
    std::string n = str_at(p, "node");
    if (!n.empty() && std::find(nodes.begin(), nodes.end(), n) == nodes.end()) nodes.push_back(n);
  }
  std::string out;
  for (const auto& n : nodes) out += (out.empty() ? "" : ",") + n;
  return out;
}

// What an attempt used per replica, as its agent measured: p95 CPU, peak
// memory and (when measured) p95 GPU utilization; "-" when not measured.
std::string used_text(const json::value& attempt) {
  const json::value* u = member(attempt, "use");
  ResourceUse use;
  if (u == nullptr || !from_json(*u, use).ok() || use.samples() == 0) return "-";
  std::string s = cores_text(use.cpu_milli.quantile(0.95)) + " cpu, " + bytes_text(use.memory_mib.max << 20);
  if (!use.gpu_util_pct.empty()) s += ", gpu " + std::to_string(use.gpu_util_pct.quantile(0.95)) + "%";
  return s;
}

std::string attempts_table(const json::array& attempts, Millis now) {
  Table t({"#", "CLUSTER", "NODES", "STATE", "EXIT CODE", "STARTED", "FINISHED", "USED (P95/PEAK)", "MESSAGE"});
  for (const auto& a : attempts) {
    Millis finished = millis_at(a, "finished_at");
    t.add_row({str_at(a, "number"), or_dash(str_at(a, "cluster_id")), or_dash(attempt_nodes(a)), str_at(a, "state"),
               or_dash(str_at(a, "exit_code")), format_age(now, millis_at(a, "started_at")),
               finished == 0 ? "-" : format_age(now, finished), used_text(a),
               truncate(str_at(a, "message"), kMessageWidth)});
  }
  return t.render();
}

// One attempt as a sentence for explain.
std::string attempt_sentence(const json::value& a, Millis now, bool zh) {
  std::string cluster = or_dash(str_at(a, "cluster_id"));
  std::string nodes = attempt_nodes(a);
  std::string exit_code = str_at(a, "exit_code");
  std::string stop = str_at(a, "stop_reason");
  std::string message = str_at(a, "message");
  std::string s = "#" + str_at(a, "number");
  if (zh) {
    s += " 集群 " + cluster;
    if (!nodes.empty()) s += "（节点 " + nodes + "）";
    s += "：" + str_at(a, "state");
    if (!exit_code.empty()) s += "，退出码 " + exit_code;
    if (!stop.empty()) s += "，停止原因 " + stop;
  } else {
    s += " on cluster " + cluster;
    if (!nodes.empty()) s += " (node " + nodes + ")";
    s += ": " + str_at(a, "state");
    if (!exit_code.empty()) s += ", exit code " + exit_code;
    if (!stop.empty()) s += ", stopped by " + stop;
  }
  Millis started = millis_at(a, "started_at");
  if (started != 0) {
    s += zh ? "，" + format_age(now, started) + "前开始" : ", started " + format_age(now, started) + " ago";
  }
  if (!message.empty()) s += (zh ? "；" : "; ") + message;
  return s;
}

std::string upper_header(std::string_view key) {
  std::string h(key);
  for (auto& ch : h) ch = ch == '_' ? ' ' : static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return h;
}

std::int64_t int_at(const json::value& v, std::string_view key) {
  const json::value* m = member(v, key);
  if (m == nullptr) return 0;
  if (m->is_int64()) return m->get_int64();
  if (m->is_uint64()) return static_cast<std::int64_t>(m->get_uint64());
  if (m->is_double()) return static_cast<std::int64_t>(m->get_double());
  return 0;
}

}  // namespace

std::string tasks_table(const json::array& tasks, Millis now, std::string_view lang) {
  Table t({"ID", "NAME", "STATE", "PROJECT GROUP", "RESOURCE GROUP", "CLUSTER", "AGE", "REASON"});
  for (const auto& task : tasks) {
    std::string cluster = text_of(task, {"assigned_cluster", "cluster"});
    std::string reason;
    const json::value* reasons = member(task, "reasons");
    if (reasons != nullptr && reasons->is_array() && !reasons->get_array().empty()) {
      reason = truncate(localized_message(reasons->get_array()[0], lang), kReasonWidth);
    }
    t.add_row({str_at(task, "id"), str_at(task, "name"), str_at(task, "state"), or_dash(str_at(task, "project_group")),
               or_dash(str_at(task, "resource_group")), or_dash(cluster),
               format_age(now, millis_at(task, "created_at")), reason});
  }
  return t.render();
}

std::string task_details(const json::value& task, Millis now, std::string_view lang) {
  Details d;
  d.add("ID", str_at(task, "id"));
  d.add("Name", str_at(task, "name"));
  d.add("Pipeline", or_dash(str_at(task, "pipeline_id")));
  d.add("State", str_at(task, "state") + (task.is_object() && str_at(task, "cancel_requested") == "true"
                                              ? " (cancel requested)"
                                              : ""));
  d.add("Project group", or_dash(str_at(task, "project_group")));
  d.add("Resource group", or_dash(str_at(task, "resource_group")));
  std::string priority = str_at(task, "priority_class");
  if (!str_at(task, "priority").empty()) priority += " (" + str_at(task, "priority") + ")";
  d.add("Priority", or_dash(priority));
  d.add("User", or_dash(str_at(task, "user")));
  d.add("Cluster", or_dash(text_of(task, {"assigned_cluster", "cluster"})));
  d.add("Resources", resources_text(member_path(task, "step.resources")));
  d.add("Replicas", or_dash(str_at(task, "step.replicas")));
  d.add("Created", age_ago(now, millis_at(task, "created_at")));
  d.add("Started", age_ago(now, millis_at(task, "started_at")));
  d.add("Finished", age_ago(now, millis_at(task, "finished_at")));
  d.add("Exit code", or_dash(str_at(task, "exit_code")));
  std::string out = d.render();

  const json::value* reasons = member(task, "reasons");
  if (reasons != nullptr && reasons->is_array() && !reasons->get_array().empty()) {
    out += "Reasons:\n";
    for (const auto& r : reasons->get_array()) out += "  - " + localized_message(r, lang) + "\n";
  }
  const json::value* attempts = member(task, "attempts");
  if (attempts != nullptr && attempts->is_array() && !attempts->get_array().empty()) {
    out += "Attempts:\n";
    std::string table = attempts_table(attempts->get_array(), now);
    std::size_t pos = 0;
    while (pos < table.size()) {
      std::size_t nl = table.find('\n', pos);
      out += "  " + table.substr(pos, nl - pos + 1);
      pos = nl + 1;
    }
  }
  return out;
}

std::string explain_text(const json::value& explain, Millis now, std::string_view lang) {
  bool zh = is_chinese(lang);
  std::string id = text_of(explain, {"task_id", "id"});
  std::string state = str_at(explain, "state");
  std::string out = zh ? "任务 " + id + " 当前状态：" + state + "。\n" : "Task " + id + " is " + state + ".\n";
  std::string summary = zh ? text_of(explain, {"summary_zh", "summary"}) : text_of(explain, {"summary", "summary_zh"});
  if (!summary.empty()) out += summary + "\n";

  const json::value* reasons = member(explain, "reasons");
  bool queued = state == "Queued";
  if (reasons != nullptr && reasons->is_array() && !reasons->get_array().empty()) {
    out += zh ? (queued ? "等待原因：\n" : "原因：\n") : (queued ? "Why it waits:\n" : "Reasons:\n");
    for (const auto& r : reasons->get_array()) out += "  - " + localized_message(r, lang) + "\n";
  } else if (queued) {
    out += zh ? "没有记录等待原因（可能尚未经过一轮调度）。\n"
              : "No reasons recorded yet (the scheduler may not have looked at it).\n";
  }

  const json::value* attempts = member(explain, "attempts");
  if (attempts != nullptr && attempts->is_array() && !attempts->get_array().empty()) {
    out += zh ? "运行记录：\n" : "Attempts:\n";
    for (const auto& a : attempts->get_array()) out += "  " + attempt_sentence(a, now, zh) + "\n";
  } else {
    out += zh ? "尚未运行过。\n" : "It has not run yet.\n";
  }
  return out;
}

std::string submit_summary(const json::value& answer, std::string_view lang) {
  std::string id = str_at(answer, "pipeline.id");
  std::string name = str_at(answer, "pipeline.name");
  std::string out = is_chinese(lang) ? "已提交流水线 " + id + (name.empty() ? "" : "（" + name + "）") + "\n"
                                     : "pipeline " + id + (name.empty() ? "" : " (" + name + ")") + " submitted\n";
  Table t({"TASK ID", "NAME", "STATE"});
  const json::value* tasks = member(answer, "tasks");
  if (tasks != nullptr && tasks->is_array()) {
    for (const auto& task : tasks->get_array()) {
      t.add_row({str_at(task, "id"), str_at(task, "name"), or_dash(str_at(task, "state"))});
    }
  }
  return out + t.render();
}

std::string clusters_table(const json::array& clusters, Millis now) {
  Table t({"ID", "EXECUTOR", "STATE", "REASON", "POOL", "LAST CONTACT", "CREDENTIAL EXPIRES"});
  for (const auto& c : clusters) {
    Millis contact = millis_at(c, "last_contact");
    Millis expires = millis_at(c, "credential_expires_at");
    std::string expiry = format_time_short(expires);
    if (expires != 0 && expires <= now) expiry += " (expired)";
    std::string state = or_dash(str_at(c, "state"));
    if (std::int64_t unknown = int_at(c, "unknown_attempts"); unknown > 0) {
      state += " (" + std::to_string(unknown) + " unknown)";
    }
    t.add_row({str_at(c, "id"), or_dash(str_at(c, "executor")), state,
               or_dash(str_at(c, "state_reason")), or_dash(str_at(c, "storage_pool")),
               contact == 0 ? "never" : format_age(now, contact) + " ago", expiry});
  }
  return t.render();
}

std::string cluster_details(const json::value& c, Millis now) {
  Details d;
  d.add("ID", str_at(c, "id"));
  d.add("Display name", or_dash(str_at(c, "display_name")));
  d.add("Executor", or_dash(str_at(c, "executor")));
  d.add("State", or_dash(str_at(c, "state")));
  d.add("Reason", or_dash(str_at(c, "state_reason")));
  d.add("Message", or_dash(str_at(c, "state_message")));
  d.add("Storage pool", or_dash(str_at(c, "storage_pool")));
  if (!str_at(c, "storage_mount").empty()) d.add("Storage mount", str_at(c, "storage_mount"));
  d.add("Labels", or_dash(join_labels(member(c, "labels"))));
  Millis contact = millis_at(c, "last_contact");
  d.add("Last contact", contact == 0 ? "never" : age_ago(now, contact));
  Millis expires = millis_at(c, "credential_expires_at");
  d.add("Credential expires",
        format_time_short(expires) + (expires != 0 && expires <= now ? " (expired)" : ""));
  std::string agent = str_at(c, "agent_instance");
  if (!str_at(c, "agent_version").empty()) agent += (agent.empty() ? "" : " ") + ("v" + str_at(c, "agent_version"));
  d.add("Agent", or_dash(agent));
  d.add("Created", age_ago(now, millis_at(c, "created_at")));
  if (std::int64_t unknown = int_at(c, "unknown_attempts"); unknown > 0) {
    d.add("Unknown attempts", std::to_string(unknown) +
                                  " (their jobs may still run: once they are gone, cubeplane clusters confirm-lost " +
                                  str_at(c, "id") + ")");
  }
  return d.render();
}

// "-" or the kinds of a node's preflight drift, e.g. "kernel, gpus".
std::string drift_summary(const json::value* drift) {
  if (drift == nullptr || !drift->is_array() || drift->get_array().empty()) return "-";
  std::string out;
  for (const auto& d : drift->get_array()) out += (out.empty() ? "" : ", ") + str_at(d, "kind");
  return out;
}

std::string nodes_table(const json::array& nodes) {
  Table t({"CLUSTER", "NAME", "READY", "MAINT", "GPUS", "CPU", "MEMORY", "DRIFT", "LABELS"});
  for (const auto& n : nodes) {
    const json::value* labels = first_of(n, {"effective_labels", "labels"});
    bool maint = str_at(n, "maintenance") == "true" ||
                 (labels != nullptr && str_at(*labels, "maintenance") == "true");
    std::string ready = yes_no(member(n, "ready"));
    std::string why = str_at(n, "not_ready_reason");
    if (ready == "no" && !why.empty()) ready += " (" + truncate(why, 30) + ")";
    t.add_row({str_at(n, "cluster_id"), str_at(n, "name"), ready, maint ? "yes" : "no",
               gpu_summary(member(n, "capacity")), or_dash(str_at(n, "capacity.cpu")),
               or_dash(str_at(n, "capacity.memory")), drift_summary(member(n, "drift")),
               truncate(join_labels(labels), kLabelsWidth)});
  }
  return t.render();
}

std::string resource_groups_table(const json::array& documents, Millis now) {
  Table t({"NAME", "CLUSTERS", "QUOTA", "COHORT", "QUEUED", "RUNNING", "AGE"});
  for (const auto& doc : documents) {
    t.add_row({text_of(doc, {"metadata.name", "name"}),
               or_dash(join_strings(first_of(doc, {"spec.clusters", "clusters"}))), or_dash(quota_summary(doc)),
               or_dash(text_of(doc, {"spec.cohort", "cohort"})), or_dash(str_at(doc, "status.queued")),
               or_dash(str_at(doc, "status.running")),
               format_age(now, millis_of(doc, {"metadata.created_at", "created_at"}))});
  }
  return t.render();
}

std::string project_groups_table(const json::array& documents, Millis now) {
  Table t({"NAME", "DEFAULT RESOURCE GROUP", "RESOURCE GROUPS", "MEMBERS", "BUDGET", "AGE"});
  for (const auto& doc : documents) {
    std::string groups;
    if (const json::value* rgs = first_of(doc, {"spec.resource_groups", "resource_groups"});
        rgs != nullptr && rgs->is_array()) {
      for (const auto& g : rgs->get_array()) {
        if (!groups.empty()) groups += ",";
        groups += str_at(g, "name");
        if (str_at(g, "approval") == "required") groups += "(approval)";
      }
    }
    std::string members;
    if (const json::value* ms = first_of(doc, {"spec.members", "members"}); ms != nullptr && ms->is_array()) {
      for (const auto& m : ms->get_array()) {
        if (!members.empty()) members += ",";
        members += str_at(m, "user");
        if (std::string role = str_at(m, "role"); role == "admin" || role == "viewer") members += "(" + role + ")";
      }
    }
    std::string budget = text_of(doc, {"spec.monthly_budget.gpu_hours", "monthly_budget.gpu_hours"});
    if (!budget.empty()) budget += " GPU-h/month";
    // With this month's status: "6.0/50 GPU-h (12%), runs out 01-26".
    if (const json::value* status = member_path(doc, "status.budget"); status != nullptr) {
      std::string burn;
      for (const auto& [key, unit] : {std::pair{"gpu_hours", std::string(" GPU-h")}, std::pair{"cost", std::string()}}) {
        const json::value* m = member(*status, key);
        if (m == nullptr || !m->is_object()) continue;
        auto num = [&](const char* k) {
          const json::value* v = member(*m, k);
          return v && v->is_number() ? v->to_number<double>() : 0.0;
        };
        char text[128];
        std::snprintf(text, sizeof text, "%.1f/%.0f%s (%.0f%%)", num("used"), num("budget"),
                      unit.empty() ? (" " + str_at(*m, "currency")).c_str() : unit.c_str(), num("percent"));
        std::string one = text;
        if (member(*m, "exhausted") != nullptr) one += ", exhausted";
        else if (std::string out = str_at(*m, "runs_out_at"); out.size() >= 10) one += ", runs out " + out.substr(5, 5);
        burn += (burn.empty() ? "" : "; ") + one;
      }
      if (!burn.empty()) budget = burn;
    }
    t.add_row({text_of(doc, {"metadata.name", "name"}),
               or_dash(text_of(doc, {"spec.default_resource_group", "default_resource_group"})), or_dash(groups),
               or_dash(truncate(members, 40)), or_dash(budget),
               format_age(now, millis_of(doc, {"metadata.created_at", "created_at"}))});
  }
  return t.render();
}

std::string priority_classes_table(const json::array& documents) {
  Table t({"NAME", "VALUE", "PREEMPTIBLE", "MAY PREEMPT", "PREEMPT AFTER", "GRACE", "DESCRIPTION"});
  for (const auto& doc : documents) {
    std::string after = text_of(doc, {"spec.preempt_after_s", "preempt_after_s"});
    std::string grace = text_of(doc, {"spec.grace_s", "grace_s"});
    t.add_row({text_of(doc, {"metadata.name", "name"}), or_dash(text_of(doc, {"spec.value", "value"})),
               yes_no(first_of(doc, {"spec.preemptible", "preemptible"})),
               yes_no(first_of(doc, {"spec.may_preempt", "may_preempt"})), after.empty() ? "-" : after + "s",
               grace.empty() ? "-" : grace + "s",
               truncate(text_of(doc, {"spec.description", "description"}), kMessageWidth)});
  }
  return t.render();
}

std::string users_table(const json::array& users, Millis now) {
  Table t({"NAME", "ROLE", "AGE"});
  for (const auto& u : users) {
    t.add_row({str_at(u, "name"), or_dash(str_at(u, "role")), format_age(now, millis_at(u, "created_at"))});
  }
  return t.render();
}

std::string events_table(const json::array& events) {
  Table t({"TIME", "ACTOR", "OBJECT", "TYPE", "CHANGE", "MESSAGE"});
  for (const auto& e : events) {
    std::string from = str_at(e, "from");
    std::string to = str_at(e, "to");
    std::string change = from.empty() && to.empty() ? "-" : (from.empty() ? "" : from + " -> ") + to;
    t.add_row({format_time_short(millis_at(e, "at")), or_dash(str_at(e, "actor")),
               str_at(e, "object_kind") + "/" + str_at(e, "object_id"), or_dash(str_at(e, "type")), change,
               truncate(str_at(e, "message"), kMessageWidth)});
  }
  return t.render();
}

std::string advice_table(const json::array& steps, std::string_view lang) {
  Table t({"PROJECT GROUP", "STEP", "ATTEMPTS", "CPU REQ", "CPU P95", "MEM REQ", "MEM MAX", "GPU P95", "ADVICE"});
  for (const auto& s : steps) {
    auto number = [&](std::string_view path) -> std::int64_t {
      const json::value* v = member_path(s, path);
      return v && v->is_int64() ? v->as_int64() : 0;
    };
    std::string advice;
    if (const json::value* list = member(s, "advice"); list && list->is_array()) {
      for (const auto& a : list->get_array()) {
        advice += (advice.empty() ? "" : "; ") + localized_message(a, lang);
      }
    }
    const json::value* gpu = member(s, "gpu");
    const bool gpu_measured = gpu && gpu->is_object();
    t.add_row({str_at(s, "project_group"), str_at(s, "step"), std::to_string(number("attempts")),
               cores_text(number("request.cpu_milli")), cores_text(number("cpu.p95_milli")),
               bytes_text(number("request.memory_bytes")), bytes_text(number("memory.max_bytes")),
               gpu_measured ? std::to_string(number("gpu.utilization_p95")) + "%" : "-", or_dash(advice)});
  }
  return t.render();
}

std::string usage_table(const json::array& rows) {
  static constexpr std::array<std::string_view, 8> kMetrics = {
      "gpu_seconds", "gpu_hours", "cpu_core_seconds", "memory_gib_seconds", "attempts", "cost_cents", "cost",
      "currency"};
  static constexpr std::array<std::string_view, 4> kKnownKeys = {"project_group", "resource_group", "cluster",
                                                                 "gpu_type"};
  // Group keys in the order of --by's documentation, then any others by name.
  std::vector<std::string> keys;
  std::set<std::string> others;
  for (const auto& row : rows) {
    if (!row.is_object()) continue;
    for (const auto& kv : row.get_object()) {
      std::string_view k = kv.key();
      if (std::find(kMetrics.begin(), kMetrics.end(), k) != kMetrics.end()) continue;
      if (std::find(kKnownKeys.begin(), kKnownKeys.end(), k) == kKnownKeys.end()) others.insert(std::string(k));
    }
  }
  for (auto k : kKnownKeys) {
    bool present = std::any_of(rows.begin(), rows.end(), [&](const json::value& r) { return member(r, k) != nullptr; });
    if (present) keys.emplace_back(k);
  }
  keys.insert(keys.end(), others.begin(), others.end());

  std::vector<std::string> headers;
  for (const auto& k : keys) headers.push_back(upper_header(k));
  for (auto h : {"GPU HOURS", "CPU CORE HOURS", "MEMORY GIB HOURS", "ATTEMPTS"}) headers.emplace_back(h);
  const bool priced =
      std::any_of(rows.begin(), rows.end(), [](const json::value& r) { return member(r, "cost_cents") != nullptr; });
  if (priced) headers.emplace_back("COST");
  Table t(std::move(headers));
  for (const auto& row : rows) {
    std::vector<std::string> cells;
    for (const auto& k : keys) cells.push_back(or_dash(str_at(row, k)));
    cells.push_back(seconds_as_hours(int_at(row, "gpu_seconds")));
    cells.push_back(seconds_as_hours(int_at(row, "cpu_core_seconds")));
    cells.push_back(seconds_as_hours(int_at(row, "memory_gib_seconds")));
    cells.push_back(std::to_string(int_at(row, "attempts")));
    if (priced) {
      const std::int64_t c = int_at(row, "cost_cents");
      char amount[48];
      std::snprintf(amount, sizeof amount, "%lld.%02lld %s", static_cast<long long>(c / 100),
                    static_cast<long long>(c % 100), str_at(row, "currency").c_str());
      cells.emplace_back(amount);
    }
    t.add_row(std::move(cells));
  }
  return t.render();
}

std::string alerts_table(const json::array& alerts, Millis now) {
  Table t({"STATE", "SEVERITY", "RULE", "ABOUT", "SINCE", "SUMMARY", "DELIVERY"});
  for (const auto& a : alerts) {
    std::string about;
    if (const json::value* labels = member(a, "labels"); labels != nullptr && labels->is_object()) {
      for (const auto& kv : labels->get_object()) {
        if (!kv.value().is_string()) continue;
        about += (about.empty() ? "" : ",") + std::string(kv.key()) + "=" + std::string(kv.value().get_string());
      }
    }
    const std::string state = str_at(a, "state");
    Millis since = millis_at(a, state == "resolved" ? "resolved_at" : state == "firing" ? "firing_at" : "started_at");
    // The worst delivery: failed, then pending, then ok.
    std::string delivery = "-";
    int worst = -1;
    if (const json::value* ds = member(a, "deliveries"); ds != nullptr && ds->is_array()) {
      for (const auto& d : ds->get_array()) {
        const std::string st = str_at(d, "state");
        const int rank = st == "failed" ? 2 : st == "pending" ? 1 : 0;
        if (rank <= worst) continue;
        worst = rank;
        delivery = st + " " + str_at(d, "notify");
        if (std::string err = str_at(d, "last_error"); !err.empty() && st != "ok") {
          delivery += " (" + std::to_string(int_at(d, "attempts")) + " tries: " + err + ")";
        }
      }
    }
    t.add_row({or_dash(state), or_dash(str_at(a, "severity")), or_dash(str_at(a, "rule")), or_dash(about),
               format_age(now, since), truncate(str_at(a, "summary"), kMessageWidth), truncate(delivery, 48)});
  }
  return t.render();
}

std::string approvals_table(const json::array& approvals, Millis now) {
  Table t({"ID", "PROJECT GROUP", "RESOURCE GROUP", "STATE", "REQUESTED BY", "DECIDED BY", "UNTIL", "AGE", "REASON"});
  for (const auto& a : approvals) {
    std::string state = str_at(a, "state");
    const Millis until = millis_at(a, "expires_at");
    if (state == "approved" && until != 0 && until <= now) state = "expired";
    t.add_row({str_at(a, "id"), str_at(a, "project_group"), str_at(a, "resource_group"), or_dash(state),
               or_dash(str_at(a, "requested_by")), or_dash(str_at(a, "decided_by")),
               until == 0 ? "-" : format_time_short(until), format_age(now, millis_at(a, "created_at")),
               or_dash(truncate(str_at(a, "reason"), kMessageWidth))});
  }
  return t.render();
}

std::string audit_table(const json::array& entries) {
  Table t({"TIME", "USER", "FROM", "REQUEST", "STATUS", "ERROR"});
  for (const auto& e : entries) {
    t.add_row({format_time_short(millis_at(e, "at")), or_dash(str_at(e, "user")), or_dash(str_at(e, "remote_addr")),
               truncate(str_at(e, "method") + " " + str_at(e, "path"), kMessageWidth), std::to_string(int_at(e, "status")),
               or_dash(truncate(str_at(e, "error"), kMessageWidth))});
  }
  return t.render();
}

std::string prices_table(const json::value& document) {
  const std::string currency = str_at(document, "spec.currency");
  Table t({"RESOURCE", "PER HOUR (" + (currency.empty() ? std::string("-") : currency) + ")", "UNIT", "FROM"});
  if (const json::value* prices = member_path(document, "spec.prices"); prices != nullptr && prices->is_array()) {
    for (const auto& p : prices->get_array()) {
      const std::string r = str_at(p, "resource");
      const char* unit = r == "cpu" ? "core-hour" : r == "memory" ? "GiB-hour" : "GPU-hour";
      t.add_row({r, str_at(p, "per_hour"), unit, str_at(p, "from")});
    }
  }
  if (t.rows() == 0) return "no prices: usage reports carry no cost (cubeplane apply -f prices.yaml)\n";
  return t.render();
}

std::string secret_text(const json::value& answer, std::string_view lang) {
  bool zh = is_chinese(lang);
  Details d;
  d.add(zh ? "令牌" : "Token", str_at(answer, "token"));
  if (std::string id = str_at(answer, "id"); !id.empty()) d.add("ID", id);
  if (std::string user = str_at(answer, "user"); !user.empty()) d.add(zh ? "用户" : "User", user);
  if (std::string cluster = str_at(answer, "cluster_id"); !cluster.empty()) d.add(zh ? "集群" : "Cluster", cluster);
  Millis expires = millis_at(answer, "expires_at");
  d.add(zh ? "过期时间" : "Expires", expires == 0 ? (zh ? "永不" : "never") : format_time_short(expires));
  return d.render() + (zh ? "该令牌只显示这一次，请妥善保存。\n" : "The token is shown only once; keep it safe.\n");
}

std::string confirm_lost_text(const json::value& answer, std::string_view lang) {
  bool zh = is_chinese(lang);
  std::string out = localized_message(answer, lang) + "\n";
  const json::value* confirmed = member(answer, "confirmed");
  if (confirmed == nullptr || !confirmed->is_array()) return out;
  for (const auto& c : confirmed->get_array()) {
    const bool requeued = str_at(c, "requeued") == "true";
    out += "  " + str_at(c, "attempt") + (zh ? "（任务 " : " (task ") + str_at(c, "task") + (zh ? "）：" : "): ") +
           (requeued ? (zh ? "已重新排队" : "requeued") : (zh ? "未重新排队" : "not requeued")) + "\n";
  }
  return out;
}

std::string kind_slug(std::string_view kind) {
  std::string s(kind);
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

std::string collection_for_kind(std::string_view kind) {
  if (kind == "ResourceGroup") return "resource-groups";
  if (kind == "ProjectGroup") return "project-groups";
  if (kind == "PriorityClass") return "priority-classes";
  return "";
}

}  // namespace cp::cli
