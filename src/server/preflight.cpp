#include "server/preflight.h"

#include <cstdlib>

namespace cp {
namespace {

struct Fact {
  const char* kind;
  const char* zh;
  std::string HostFacts::*field;
};
constexpr Fact kFacts[] = {{"kernel", "内核", &HostFacts::kernel},
                           {"runtime", "容器运行时", &HostFacts::runtime},
                           {"driver", "驱动", &HostFacts::driver},
                           {"cuda", "CUDA", &HostFacts::cuda}};

// The value most nodes report (ties: the greatest), and how many do.
std::pair<std::string, int> majority(const std::vector<Node>& nodes, std::string HostFacts::*field) {
  std::map<std::string, int> counts;
  for (const auto& n : nodes) {
    const std::string& v = n.facts.*field;
    if (!v.empty()) counts[v]++;
  }
  std::pair<std::string, int> best;
  for (const auto& [value, count] : counts) {
    if (count >= best.second) best = {value, count};
  }
  return best;
}

bool has_mount(const HostFacts& f, const std::string& path) {
  for (const auto& m : f.mounts) {
    if (m == "/" || m.empty()) continue;
    if (path == m || (path.size() > m.size() && path.compare(0, m.size(), m) == 0 &&
                      (m.back() == '/' || path[m.size()] == '/'))) {
      return true;
    }
  }
  return false;
}

}  // namespace

std::map<std::string, std::vector<NodeDrift>> find_drift(const std::vector<Node>& nodes,
                                                         const std::string& storage_mount) {
  std::map<std::string, std::vector<NodeDrift>> out;
  for (const auto& n : nodes) out[n.name];
  const int total = static_cast<int>(nodes.size());
  for (const auto& fact : kFacts) {
    auto [usual, count] = majority(nodes, fact.field);
    if (count == 0) continue;
    for (const auto& n : nodes) {
      const std::string& v = n.facts.*fact.field;
      if (v.empty() || v == usual) continue;
      const std::string of = std::to_string(count) + "/" + std::to_string(total);
      out[n.name].push_back({fact.kind,
                             std::string(fact.kind) + " \"" + v + "\" differs from \"" + usual + "\" on " + of +
                                 " nodes of the cluster",
                             std::string(fact.zh) + " \"" + v + "\" 与集群中 " + of + " 个节点的 \"" + usual +
                                 "\" 不同"});
    }
  }
  for (const auto& n : nodes) {
    auto& drift = out[n.name];
    if (!storage_mount.empty() && !has_mount(n.facts, storage_mount)) {
      drift.push_back({"storage_mount", "storage mount " + storage_mount + " is missing",
                       "存储挂载点 " + storage_mount + " 不存在"});
    }
    if (std::llabs(n.facts.clock_offset_ms) > kMaxClockOffsetMs) {
      const std::string ms = std::to_string(n.facts.clock_offset_ms);
      drift.push_back({"clock_offset", "clock is " + ms + " ms off the server's (limit 1000 ms)",
                       "时钟与服务器相差 " + ms + " 毫秒（上限 1000 毫秒）"});
    }
    const auto seen = static_cast<std::int64_t>(n.gpus.size());
    std::int64_t expected = n.capacity.gpus();
    std::string what = "declares";
    std::string what_zh = "声明";
    if (auto it = n.labels.find("nvidia.com/gpu.count"); it != n.labels.end()) {
      char* end = nullptr;
      const long long labelled = std::strtoll(it->second.c_str(), &end, 10);
      if (end != it->second.c_str() && *end == '\0' && labelled > expected) {
        expected = labelled;
        what = "is labelled with";
        what_zh = "标签标明";
      }
    }
    if (seen < expected) {
      drift.push_back({"gpus",
                       "sees " + std::to_string(seen) + " GPU(s), fewer than the " + std::to_string(expected) +
                           " it " + what,
                       "只识别到 " + std::to_string(seen) + " 块 GPU，少于" + what_zh + "的 " +
                           std::to_string(expected) + " 块"});
    }
  }
  return out;
}

}  // namespace cp
