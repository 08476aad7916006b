// Usage by group over a period, from attempts' start and end times.
//
// First version: scans tasks and their attempts. The ledger of the usage
// issue (derived from events, with prices and budgets) replaces the scan.
#include <set>

#include "server/control_plane.h"
#include "server/internal.h"

namespace cp {

namespace {

const std::set<std::string> kDimensions = {"project_group", "resource_group", "cluster", "gpu_type",
                                           "user",          "day",            "month"};

std::string day_of(Millis t) { return format_time(t).substr(0, 10); }
std::string month_of(Millis t) { return format_time(t).substr(0, 7); }

}  // namespace

Result<json::array> ControlPlane::usage(const Principal& p, Millis from, Millis to,
                                        const std::vector<std::string>& group_by) {
  if (p.kind != Principal::Kind::user) return internal::forbidden_for(p, "read usage", "查看用量");
  for (const auto& g : group_by) {
    if (!kDimensions.count(g)) {
      return errors::invalid("group_by", "unknown dimension \"" + g +
                                             "\" (one of project_group, resource_group, cluster, gpu_type, user, "
                                             "day, month)",
                             "未知的分组维度 \"" + g + "\"");
    }
  }
  if (to <= from) return errors::invalid("to", "must be after from", "必须晚于 from");
  Millis now = clock_.now_ms();
  struct Row {
    double gpu_seconds = 0, cpu_core_seconds = 0, memory_gib_seconds = 0;
    std::int64_t attempts = 0;
  };
  std::map<std::vector<std::string>, Row> rows;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(auto tasks, tx.tasks_in_states({TaskState::Dispatched, TaskState::Running, TaskState::Preempting,
                                              TaskState::Succeeded, TaskState::Failed, TaskState::Cancelled,
                                              TaskState::Queued, TaskState::Lost}));
    for (const auto& t : tasks) {
      if (t.attempts == 0 || !p.can_read_project(t.project_group)) continue;
      CP_ASSIGN(auto attempts, tx.attempts_of_task(t.id));
      for (const auto& a : attempts) {
        if (a.started_at == 0) continue;
        Millis end = a.finished_at ? a.finished_at : now;
        // Split at day boundaries so that day/month grouping is exact.
        Millis s = std::max(a.started_at, from), e = std::min(end, to);
        while (s < e) {
          Millis day_end = (s / 86400000 + 1) * 86400000;
          Millis piece_end = std::min(e, day_end);
          std::vector<std::string> key;
          Resources total = internal::attempt_total(a);
          for (const auto& g : group_by) {
            if (g == "project_group") key.push_back(t.project_group);
            else if (g == "resource_group") key.push_back(t.resource_group);
            else if (g == "cluster") key.push_back(a.cluster_id);
            else if (g == "gpu_type") key.push_back(total.gpu_type());
            else if (g == "user") key.push_back(t.user);
            else if (g == "day") key.push_back(day_of(s));
            else key.push_back(month_of(s));
          }
          double secs = static_cast<double>(piece_end - s) / 1000.0;
          Row& r = rows[key];
          r.gpu_seconds += secs * static_cast<double>(total.gpus());
          r.cpu_core_seconds += secs * static_cast<double>(total.cpu_milli()) / 1000.0;
          r.memory_gib_seconds += secs * static_cast<double>(total.memory_bytes()) / (1024.0 * 1024 * 1024);
          if (s == std::max(a.started_at, from)) ++r.attempts;
          s = piece_end;
        }
      }
    }
    return {};
  }));
  json::array out;
  for (const auto& [key, r] : rows) {
    json::object o;
    for (std::size_t i = 0; i < group_by.size(); ++i) o[group_by[i]] = key[i];
    o["gpu_seconds"] = r.gpu_seconds;
    o["gpu_hours"] = r.gpu_seconds / 3600.0;
    o["cpu_core_seconds"] = r.cpu_core_seconds;
    o["memory_gib_seconds"] = r.memory_gib_seconds;
    o["attempts"] = r.attempts;
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace cp
