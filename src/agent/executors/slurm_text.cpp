#include "agent/executors/slurm_text.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <set>

namespace cp::slurm {

namespace {

constexpr std::int64_t kMiB = 1024 * 1024;

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  while (true) {
    auto pos = s.find(sep);
    out.push_back(s.substr(0, pos));
    if (pos == std::string_view::npos) return out;
    s.remove_prefix(pos + 1);
  }
}

std::optional<std::int64_t> to_int(std::string_view s) {
  s = trim(s);
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

// Keys of scontrol's oneliners: CPUTot, AllocNode:Sid, CPUs/Task, NtasksPerN:B:S:C.
bool key_like(std::string_view k) {
  if (k.empty() || !std::isalpha(static_cast<unsigned char>(k.front()))) return false;
  return std::all_of(k.begin(), k.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return std::isalnum(c) || c == '_' || c == ':' || c == '/';
  });
}

std::string upper(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::map<std::string, std::string> parse_scontrol_line(std::string_view line) {
  std::map<std::string, std::string> out;
  std::string* current = nullptr;
  for (auto word : split(trim(line), ' ')) {
    if (word.empty()) {
      if (current) *current += ' ';
      continue;
    }
    auto eq = word.find('=');
    if (eq != std::string_view::npos && key_like(word.substr(0, eq))) {
      current = &out[std::string(word.substr(0, eq))];
      *current = std::string(word.substr(eq + 1));
    } else if (current) {
      *current += ' ';
      *current += word;
    }
  }
  for (auto& [k, v] : out) v = std::string(trim(v));
  return out;
}

std::vector<GpuGres> parse_gpu_gres(std::string_view gres) {
  // Drop "(S:0-1)" and the like first: they may hold commas.
  std::string flat;
  int depth = 0;
  for (char c : gres) {
    if (c == '(') {
      ++depth;
    } else if (c == ')') {
      depth = std::max(0, depth - 1);
    } else if (depth == 0) {
      flat += c;
    }
  }
  std::vector<GpuGres> out;
  for (auto item : split(flat, ',')) {
    auto parts = split(trim(item), ':');
    if (parts.empty() || parts[0] != "gpu") continue;
    GpuGres g;
    g.count = 1;
    // gpu[:type][:no_consume][:count]
    std::size_t last = parts.size();
    if (parts.size() > 1) {
      if (auto n = to_int(parts.back())) {
        g.count = *n;
        last = parts.size() - 1;
      }
    }
    for (std::size_t i = 1; i < last; ++i) {
      if (parts[i] != "no_consume" && g.type.empty()) g.type = std::string(parts[i]);
    }
    if (g.count <= 0) continue;
    auto same = std::find_if(out.begin(), out.end(), [&](const GpuGres& o) { return o.type == g.type; });
    if (same != out.end()) {
      same->count += g.count;
    } else {
      out.push_back(std::move(g));
    }
  }
  return out;
}

std::vector<NodeInfo> parse_nodes(std::string_view text) {
  std::vector<NodeInfo> out;
  for (auto line : split(text, '\n')) {
    auto kv = parse_scontrol_line(line);
    auto name = kv.find("NodeName");
    if (name == kv.end() || name->second.empty()) continue;
    NodeInfo n;
    n.name = name->second;
    n.cpus = to_int(kv["CPUTot"]).value_or(0);
    n.cpus_usable = kv.count("CPUEfctv") ? to_int(kv["CPUEfctv"]).value_or(n.cpus) : n.cpus;
    n.real_memory_mb = to_int(kv["RealMemory"]).value_or(0);
    n.gpus = parse_gpu_gres(kv["Gres"]);
    n.state = kv["State"];
    std::string reason = kv["Reason"];
    // "Not responding [slurm@2026-12-01T04:00:00]": who and when is Slurm's bookkeeping.
    if (auto at = reason.rfind(" ["); at != std::string::npos && reason.back() == ']') reason.resize(at);
    if (reason == "(null)") reason.clear();
    n.reason = reason;
    for (auto p : split(kv["Partitions"], ',')) {
      if (!trim(p).empty() && p != "(null)") n.partitions.emplace_back(trim(p));
    }
    // OS=Linux 6.1.0-18-amd64 #1 SMP PREEMPT_DYNAMIC ...: sysname and release, as host_probe reports them.
    auto os = split(kv["OS"], ' ');
    if (os.size() >= 2) n.kernel = std::string(os[0]) + " " + std::string(os[1]);
    n.version = kv["Version"];
    out.push_back(std::move(n));
  }
  return out;
}

bool node_ready(std::string_view state) {
  std::string s = upper(trim(state));
  if (s.empty() || s.find('*') != std::string::npos) return false;  // '*': not responding
  static const std::set<std::string, std::less<>> kBusyOrFree = {"IDLE", "MIXED", "ALLOCATED", "ALLOC", "MIX",
                                                                  "COMPLETING"};
  static const std::set<std::string, std::less<>> kBlocking = {
      "DRAIN",         "DRAINED",        "DRAINING",  "DOWN",         "FAIL",          "FAILING",
      "NOT_RESPONDING", "NO_RESPOND",    "POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "POWERING_UP",
      "MAINTENANCE",   "MAINT",          "REBOOT_REQUESTED", "REBOOT_ISSUED", "REBOOT",   "INVALID_REG",
      "INVALID",       "FUTURE",         "UNKNOWN",   "PLANNED_DOWN"};
  auto parts = split(s, '+');
  if (!kBusyOrFree.count(parts[0])) return false;
  for (std::size_t i = 1; i < parts.size(); ++i) {
    if (kBlocking.count(parts[i])) return false;
  }
  return true;
}

NodeReport node_report(const NodeInfo& node, const std::string& partition) {
  NodeReport r;
  r.name = node.name;
  r.capacity.set(kCpu, node.cpus * 1000);
  r.capacity.set(kMemory, node.real_memory_mb * kMiB);
  for (const auto& g : node.gpus) {
    const std::string type = g.type.empty() ? std::string(kUntypedGpu) : g.type;
    r.capacity.set(std::string(kGpuPrefix) + type, r.capacity.get(std::string(kGpuPrefix) + type) + g.count);
  }
  r.allocatable = r.capacity;
  r.allocatable.set(kCpu, node.cpus_usable * 1000);
  r.ready = node_ready(node.state);
  if (!r.ready) r.reason = node.reason.empty() ? "slurm state " + node.state : node.reason + " (" + node.state + ")";
  if (!node.gpus.empty()) {
    r.labels[std::string(kLabelGpuType)] = node.gpus.front().type.empty() ? std::string(kUntypedGpu) : node.gpus.front().type;
  }
  std::string parts = partition;
  if (parts.empty()) {
    for (const auto& p : node.partitions) parts += (parts.empty() ? "" : ",") + p;
  }
  if (!parts.empty()) r.labels[std::string(kLabelPartition)] = parts;
  r.facts.kernel = node.kernel;
  if (!node.version.empty()) r.facts.runtime = "slurm " + node.version;
  int index = 0;
  for (const auto& g : node.gpus) {
    for (std::int64_t i = 0; i < g.count; ++i, ++index) {
      GpuDevice d;
      d.index = index;
      d.uuid = "slurm-" + node.name + "-" + std::to_string(index);
      d.model = g.type.empty() ? std::string(kUntypedGpu) : g.type;
      d.utilization = -1;  // what Slurm declares, not measured
      r.gpus.push_back(std::move(d));
    }
  }
  return r;
}

std::optional<JobExit> parse_job_exit(std::string_view text) {
  auto parts = split(trim(text), ':');
  if (parts.size() != 2) return std::nullopt;
  auto e = to_int(parts[0]);
  auto s = to_int(parts[1]);
  if (!e || !s) return std::nullopt;
  return JobExit{static_cast<int>(*e), static_cast<int>(*s)};
}

std::vector<JobRow> parse_squeue(std::string_view text) {
  std::vector<JobRow> out;
  for (auto line : split(text, '\n')) {
    line = trim(line);
    if (line.empty()) continue;
    auto f = split(line, '|');
    if (f.size() < 4 || f[0].empty()) continue;
    JobRow r;
    r.job_id = std::string(f[0]);
    r.state = std::string(f[1]);
    r.reason = std::string(f[2]);
    // The name may itself hold '|': everything after the third separator.
    std::size_t name_at = f[0].size() + f[1].size() + f[2].size() + 3;
    r.name = std::string(line.substr(std::min(name_at, line.size())));
    out.push_back(std::move(r));
  }
  return out;
}

JobPhase job_phase(std::string_view state) {
  static const std::set<std::string, std::less<>> kPending = {
      "PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "POWER_UP_NODE"};
  static const std::set<std::string, std::less<>> kEnded = {
      "COMPLETED", "FAILED",   "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL",
      "PREEMPTED", "BOOT_FAIL", "DEADLINE",  "REVOKED", "SPECIAL_EXIT"};
  std::string s = upper(trim(state));
  // "CANCELLED by 0" in some outputs.
  if (auto sp = s.find(' '); sp != std::string::npos) s.resize(sp);
  if (kPending.count(s)) return JobPhase::Pending;
  if (kEnded.count(s)) return JobPhase::Ended;
  return JobPhase::Running;
}

std::optional<std::string> parse_sbatch_job_id(std::string_view out) {
  std::string_view s = trim(out);
  // Warnings may precede the answer: the id is the last line.
  if (auto nl = s.rfind('\n'); nl != std::string_view::npos) s = trim(s.substr(nl + 1));
  s = s.substr(0, s.find(';'));
  if (s.empty() || !std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return std::nullopt;
  }
  return std::string(s);
}

Result<std::vector<std::string>> resource_args(const Resources& r) {
  std::vector<std::string> out;
  std::string gres;
  for (const auto& [name, amount] : r.amounts()) {
    if (amount <= 0) continue;
    if (name == kCpu) {
      out.push_back("--cpus-per-task=" + std::to_string((amount + 999) / 1000));
    } else if (name == kMemory) {
      out.push_back("--mem=" + std::to_string((amount + kMiB - 1) / kMiB) + "M");
    } else if (name.rfind(kGpuPrefix, 0) == 0 && name.size() > kGpuPrefix.size()) {
      const std::string type = name.substr(kGpuPrefix.size());
      if (type.find_first_of(":,() \t\n") != std::string::npos) {
        return errors::invalid("resources", "GPU type \"" + type + "\" cannot be asked of Slurm",
                               "GPU 类型 \"" + type + "\" 无法向 Slurm 申请");
      }
      if (!gres.empty()) gres += ',';
      gres += type == kUntypedGpu ? "gpu:" + std::to_string(amount) : "gpu:" + type + ":" + std::to_string(amount);
    } else {
      return errors::invalid("resources", "resource \"" + name + "\" has no Slurm equivalent",
                             "资源 \"" + name + "\" 在 Slurm 中没有对应项");
    }
  }
  if (!gres.empty()) out.push_back("--gres=" + gres);
  return out;
}

std::string shell_quote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  out += '\'';
  return out;
}

std::string escape_filename_pattern(std::string_view path) {
  std::string out;
  for (char c : path) {
    out += c;
    if (c == '%') out += '%';
  }
  return out;
}

std::string batch_script(const BatchScript& b) {
  std::string s;
  s += "#!/bin/sh\n";
  s += "# Cubeplane attempt " + b.attempt_id + ", replica " + std::to_string(b.replica) +
       ": written by the agent's Slurm executor.\n";
  s += "# The command runs as a child so that its exit status reaches the agent through\n";
  s += "# the exit file; TERM reaches the command directly (scancel --full), the shell\n";
  s += "# only notes it and keeps waiting.\n";
  s += "trap 'cp_signaled=1' TERM INT HUP\n";
  s += "/usr/bin/env --";
  for (const auto& [k, v] : b.env) s += " \\\n  " + shell_quote(k + "=" + v);
  for (const auto& a : b.command) s += " \\\n  " + shell_quote(a);
  s += "\ncp_rc=$?\n";
  const std::string tmp = shell_quote(b.exit_path + ".tmp");
  s += "printf 'exit %d\\n' \"$cp_rc\" >" + tmp + " && /bin/mv -f " + tmp + " " + shell_quote(b.exit_path) + "\n";
  s += "exit \"$cp_rc\"\n";
  return s;
}

}  // namespace cp::slurm
