#include "server/advice.h"

#include <algorithm>
#include <map>

#include "server/control_plane.h"
#include "server/internal.h"

namespace cp {

namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::int64_t kGiB = std::int64_t{1} << 30;

std::int64_t round_up(std::int64_t v, std::int64_t step) { return (v + step - 1) / step * step; }

std::int64_t suggest_cpu(std::int64_t p95_milli) {
  const std::int64_t want = p95_milli + p95_milli / 5;
  return want > 1000 ? round_up(want, 1000) : std::max<std::int64_t>(250, round_up(want, 250));
}

std::int64_t suggest_memory(std::int64_t peak_bytes) {
  const std::int64_t want = peak_bytes + peak_bytes / 4;
  return want > kGiB ? round_up(want, kGiB) : std::max<std::int64_t>(256 * kMiB, round_up(want, 256 * kMiB));
}

}  // namespace

std::vector<Advice> advise(const Resources& request, const ResourceUse& use) {
  std::vector<Advice> out;
  if (use.samples() < kMinSamples) {
    out.push_back({"samples", "few_samples", 0,
                   "too few samples (" + std::to_string(use.samples()) + " of " + std::to_string(kMinSamples) +
                       ") to advise",
                   "样本太少（" + std::to_string(use.samples()) + "/" + std::to_string(kMinSamples) + "），暂无建议"});
    return out;
  }

  const std::int64_t cpu_req = request.cpu_milli();
  const std::int64_t cpu_p95 = use.cpu_milli.quantile(0.95);
  const std::int64_t cpu_suggest = suggest_cpu(cpu_p95);
  if (cpu_req > 0 && cpu_suggest * 2 <= cpu_req && cpu_req - cpu_suggest >= 1000) {
    out.push_back({"cpu", "lower", cpu_suggest,
                   "requests " + cores_text(cpu_req) + " CPUs, uses " + cores_text(cpu_p95) + " at p95: " +
                       cores_text(cpu_suggest) + " would do",
                   "申请 " + cores_text(cpu_req) + " 个 CPU，p95 实际使用 " + cores_text(cpu_p95) + " 个：" +
                       cores_text(cpu_suggest) + " 个即可"});
  } else if (cpu_p95 > cpu_req) {
    out.push_back({"cpu", "raise", cpu_suggest,
                   "requests " + cores_text(cpu_req) + " CPUs but uses " + cores_text(cpu_p95) +
                       " at p95, competing with its neighbours for the rest: request " + cores_text(cpu_suggest),
                   "申请 " + cores_text(cpu_req) + " 个 CPU，p95 实际使用 " + cores_text(cpu_p95) +
                       " 个，超出部分与同节点任务争抢：建议申请 " + cores_text(cpu_suggest) + " 个"});
  }

  const std::int64_t mem_req = request.memory_bytes();
  const std::int64_t mem_peak = use.memory_mib.max * kMiB;
  const std::int64_t mem_suggest = suggest_memory(mem_peak);
  if (mem_req > 0 && mem_suggest * 2 <= mem_req && mem_req - mem_suggest >= kGiB) {
    out.push_back({"memory", "lower", mem_suggest,
                   "requests " + bytes_text(mem_req) + " of memory, peaks at " + bytes_text(mem_peak) + ": " +
                       bytes_text(mem_suggest) + " would do",
                   "申请内存 " + bytes_text(mem_req) + "，峰值 " + bytes_text(mem_peak) + "：" +
                       bytes_text(mem_suggest) + " 即可"});
  } else if (mem_peak > mem_req) {
    out.push_back({"memory", "raise", mem_suggest,
                   "peaks at " + bytes_text(mem_peak) + " of memory over its " + bytes_text(mem_req) +
                       " request, and may be killed when the node runs short: request " + bytes_text(mem_suggest),
                   "内存峰值 " + bytes_text(mem_peak) + "，超过申请的 " + bytes_text(mem_req) +
                       "，节点内存紧张时可能被终止：建议申请 " + bytes_text(mem_suggest)});
  }

  if (request.gpus() > 0 && !use.gpu_util_pct.empty()) {
    const std::int64_t util_p95 = use.gpu_util_pct.quantile(0.95);
    if (util_p95 < 10) {
      out.push_back({"gpu", "idle", 0,
                     "its " + std::to_string(request.gpus()) + " GPU(s) are " + std::to_string(util_p95) +
                         " % busy at p95: check that it uses them (data loading, CUDA_VISIBLE_DEVICES), or run it "
                         "without",
                     "其 " + std::to_string(request.gpus()) + " 块 GPU 的 p95 利用率仅 " + std::to_string(util_p95) +
                         "%：请检查是否真的用到了 GPU（数据加载、CUDA_VISIBLE_DEVICES），或改用 CPU 运行"});
    }
  }
  return out;
}

// ---------------------------------------------------------------- the API

Result<json::array> ControlPlane::usage_advice(const Principal& p, int days, const std::string& project_group) {
  if (p.kind != Principal::Kind::user) return internal::forbidden_for(p, "read usage", "查看用量");
  if (days < 1 || days > 90) return errors::invalid("days", "must be 1..90", "须在 1 到 90 之间");
  if (!project_group.empty() && !p.can_read_project(project_group)) {
    return internal::forbidden_for(p, "read project group \"" + project_group + "\"",
                                   "查看项目组 \"" + project_group + "\"");
  }
  const Millis to_day = internal::day_start(clock_.now_ms()) + internal::kDayMs;
  const Millis from_day = to_day - days * internal::kDayMs;
  std::vector<ResourceUseRow> rows;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(rows, tx.resource_use(from_day, to_day, project_group));
    return {};
  }));
  // Rows come by project group, step, day: merge each step's days.
  std::map<std::pair<std::string, std::string>, ResourceUseRow> steps;
  for (auto& r : rows) {
    if (!p.can_read_project(r.project_group)) continue;
    auto [it, fresh] = steps.try_emplace({r.project_group, r.step}, r);
    if (!fresh) merge_use_row(it->second, r);
  }
  json::array out;
  for (const auto& [key, r] : steps) {
    const auto& u = r.use;
    json::object o;
    o["project_group"] = r.project_group;
    o["step"] = r.step;
    o["attempts"] = r.attempts;
    o["samples"] = u.samples();
    o["last_at"] = format_time(r.request_at);
    json::object request;
    request["cpu_milli"] = r.request.cpu_milli();
    request["memory_bytes"] = r.request.memory_bytes();
    request["gpus"] = r.request.gpus();
    request["gpu_type"] = r.request.gpus() > 0 ? r.request.gpu_type() : "";
    o["request"] = std::move(request);
    o["cpu"] = json::object{{"p50_milli", u.cpu_milli.quantile(0.5)},
                            {"p95_milli", u.cpu_milli.quantile(0.95)},
                            {"max_milli", u.cpu_milli.max}};
    o["memory"] = json::object{{"p95_bytes", u.memory_mib.quantile(0.95) * kMiB},
                               {"max_bytes", u.memory_mib.max * kMiB}};
    if (u.gpu_util_pct.empty()) {
      o["gpu"] = nullptr;  // not measured (no NVML, or no GPUs)
    } else {
      o["gpu"] = json::object{{"utilization_p50", u.gpu_util_pct.quantile(0.5)},
                              {"utilization_p95", u.gpu_util_pct.quantile(0.95)},
                              {"memory_max_bytes", u.gpu_memory_mib.max * kMiB}};
    }
    json::array advice;
    for (const auto& a : advise(r.request, u)) {
      json::object x{{"resource", a.resource}, {"kind", a.kind}, {"message", a.message}, {"message_zh", a.message_zh}};
      if (a.suggest > 0) x["suggest"] = a.suggest;
      advice.push_back(std::move(x));
    }
    o["advice"] = std::move(advice);
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace cp
