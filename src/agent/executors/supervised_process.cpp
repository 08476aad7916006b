#include "agent/executors/supervised_process.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "agent/executors/shim.h"

namespace cp {

std::string ExitRecord::text() const {
  return (fenced ? "fenced " : "") + std::string(signaled ? "signal " : "exit ") + std::to_string(number);
}

std::optional<ExitRecord> parse_exit_record(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  ExitRecord r;
  if (text.starts_with("fenced ")) {
    r.fenced = true;
    text.remove_prefix(7);
  }
  std::string_view num;
  if (text.starts_with("exit ")) {
    num = text.substr(5);
  } else if (text.starts_with("signal ")) {
    r.signaled = true;
    num = text.substr(7);
  } else {
    return std::nullopt;
  }
  auto [ptr, ec] = std::from_chars(num.data(), num.data() + num.size(), r.number);
  if (ec != std::errc() || ptr != num.data() + num.size() || r.number < 0) return std::nullopt;
  return r;
}

std::optional<ExitRecord> read_exit_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_exit_record(ss.str());
}

std::optional<ProcStat> read_proc_stat(int pid) {
  if (pid <= 0) return std::nullopt;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  if (!in) return std::nullopt;
  std::string line;
  std::getline(in, line);
  // "pid (comm) state ppid ..."; comm may hold spaces and parentheses.
  auto close = line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(line.substr(close + 1));
  ProcStat st;
  std::string tok;
  bool started = false;
  for (int field = 3; field <= 24 && (fields >> tok); ++field) {
    if (field == 3) st.state = tok.empty() ? '?' : tok[0];
    if (field == 5) std::from_chars(tok.data(), tok.data() + tok.size(), st.pgrp);
    if (field >= 14 && field <= 17) {
      std::int64_t t = 0;
      std::from_chars(tok.data(), tok.data() + tok.size(), t);
      st.cpu_ticks += t;
    }
    if (field == 22) {
      auto [ptr, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), st.start_ticks);
      if (ec != std::errc()) return std::nullopt;
      started = true;
    }
    if (field == 24) std::from_chars(tok.data(), tok.data() + tok.size(), st.rss_pages);
  }
  if (!started) return std::nullopt;
  return st;
}

std::int64_t clock_ticks_per_second() {
  static const std::int64_t tps = [] {
    long v = ::sysconf(_SC_CLK_TCK);
    return v > 0 ? static_cast<std::int64_t>(v) : std::int64_t{100};
  }();
  return tps;
}

namespace {
// Calls `visit` with every process's /proc directory and stat until it
// returns true; whether one did.
bool for_each_process(const std::function<bool(const std::filesystem::path&, const ProcStat&)>& visit) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    int pid = 0;
    auto [ptr, perr] = std::from_chars(name.data(), name.data() + name.size(), pid);
    if (perr != std::errc() || ptr != name.data() + name.size()) continue;
    auto st = read_proc_stat(pid);
    if (st && visit(entry.path(), *st)) return true;
  }
  return false;
}
}  // namespace

std::map<int, GroupUsage> read_group_usage(const std::set<int>& pgids) {
  std::map<int, GroupUsage> out;
  if (pgids.empty()) return out;
  static const std::int64_t page = [] {
    long v = ::sysconf(_SC_PAGESIZE);
    return v > 0 ? static_cast<std::int64_t>(v) : std::int64_t{4096};
  }();
  for_each_process([&](const std::filesystem::path&, const ProcStat& st) {
    if (!pgids.count(st.pgrp)) return false;
    auto& g = out[st.pgrp];
    g.cpu_ticks += st.cpu_ticks;
    if (st.state != 'Z' && st.state != 'X') {
      g.rss_bytes += st.rss_pages * page;
      ++g.processes;
    }
    return false;
  });
  return out;
}

bool supervised_alive(int pid, std::int64_t start_ticks) {
  auto st = read_proc_stat(pid);
  if (!st || st->start_ticks != start_ticks) return false;  // gone, or the pid now belongs to another process
  if (st->state == 'Z' || st->state == 'X') {
    int status = 0;
    ::waitpid(pid, &status, WNOHANG);  // reap it if it is our child (ECHILD otherwise)
    return false;
  }
  return true;
}

bool signal_group(int pgid, int sig) {
  if (pgid <= 1) return false;
  return ::kill(-pgid, sig) == 0;
}

namespace {
bool environ_has(const std::filesystem::path& dir, std::string_view marker) {
  std::ifstream in(dir / "environ", std::ios::binary);
  std::string var;
  while (std::getline(in, var, '\0')) {
    if (var == marker) return true;
  }
  return false;
}
}  // namespace

bool group_has_marker(int pgid, std::string_view marker) {
  if (pgid <= 1) return false;
  return for_each_process([&](const std::filesystem::path& dir, const ProcStat& st) {
    if (st.pgrp != pgid || st.state == 'Z' || st.state == 'X') return false;
    return environ_has(dir, marker);
  });
}

std::set<int> groups_with_marker(std::string_view marker) {
  std::set<int> found;
  for_each_process([&](const std::filesystem::path& dir, const ProcStat& st) {
    if (st.state != 'Z' && st.state != 'X' && st.pgrp > 1 && environ_has(dir, marker)) found.insert(st.pgrp);
    return false;
  });
  return found;
}

namespace {

void close_all(std::initializer_list<int> fds) {
  for (int fd : fds) {
    if (fd >= 0) ::close(fd);
  }
}

// The shim as the agent's own fork: the whole process is copied (page tables
// included), then the shim forks the command from that copy.
// `agent_ends` are closed in the shim: the gate must read EOF should the agent die.
Result<int> fork_shim(const shim::ShimPlan& plan, int report_fd, int gate_fd, std::initializer_list<int> agent_ends) {
  pid_t pid = ::fork();
  if (pid < 0) return errors::internal(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    for (int fd : agent_ends) ::close(fd);
    shim::enter_shim();
    char go = 0;
    ssize_t got = 0;
    while ((got = ::read(gate_fd, &go, 1)) < 0 && errno == EINTR) {
    }
    ::close(gate_fd);
    if (got != 1) ::_exit(0);  // the agent died first: never started, nothing to record
    shim::supervise(plan, report_fd);
  }
  return static_cast<int>(pid);
}

// The shim as the small cubeplane-shim program, started with posix_spawn
// (vfork semantics: nothing of this process is copied). Its pipe ends go to
// the fds it expects; everything else here is close-on-exec or closed by it.
Result<int> exec_shim(const std::string& program, int report_fd, int gate_fd) {
  // Out of the way of 3 and 4 first, so that neither dup2 below lands on the other's source.
  int report_high = ::fcntl(report_fd, F_DUPFD_CLOEXEC, 10);
  int gate_high = ::fcntl(gate_fd, F_DUPFD_CLOEXEC, 10);
  if (report_high < 0 || gate_high < 0) {
    int err = errno;
    close_all({report_high, gate_high});
    return errors::internal(std::string("fcntl failed: ") + std::strerror(err));
  }
  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawnattr_init(&attr);
  ::posix_spawn_file_actions_adddup2(&actions, report_high, shim::kReportFd);
  ::posix_spawn_file_actions_adddup2(&actions, gate_high, shim::kGateFd);
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  ::posix_spawnattr_setsigmask(&attr, &none);
  ::posix_spawnattr_setsigdefault(&attr, &all);
  ::posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  std::string arg0 = "cubeplane-shim";
  char* argv[] = {arg0.data(), nullptr};
  char* envp[] = {nullptr};
  pid_t pid = 0;
  int rc = ::posix_spawn(&pid, program.c_str(), &actions, &attr, argv, envp);
  ::posix_spawn_file_actions_destroy(&actions);
  ::posix_spawnattr_destroy(&attr);
  close_all({report_high, gate_high});
  if (rc != 0) return errors::internal("cannot start the shim " + program + ": " + std::strerror(rc));
  return static_cast<int>(pid);
}

}  // namespace

std::string default_shim_program() {
  static const std::string path = [] {
    std::error_code ec;
    auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
    if (ec) return std::string();
    auto candidate = (self.parent_path() / "cubeplane-shim").string();
    return ::access(candidate.c_str(), X_OK) == 0 ? candidate : std::string();
  }();
  return path;
}

Result<SpawnedProcess> spawn_supervised(const SpawnSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return errors::invalid("command", "empty command", "命令为空");
  const bool exec = !spec.shim_program.empty();
  // cubeplane-shim gets the spec through its gate and prepares its plan
  // itself; for a forked shim the plan is built here, before the fork, as it
  // makes only async-signal-safe calls (shim.h).
  auto plan = std::make_unique<shim::ShimPlan>();
  plan->spec = shim::ShimSpec{spec.argv,      spec.env,        spec.work_dir,   spec.log_path,
                              spec.exit_path, spec.dirs, spec.lease_path, spec.lease_chain};
  if (!exec) shim::prepare(*plan);

  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0) return errors::internal(std::string("pipe2 failed: ") + std::strerror(errno));
  // The gate is a socket so that a write to a shim that died cannot raise SIGPIPE (MSG_NOSIGNAL).
  int gate[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, gate) != 0) {
    int err = errno;
    close_all({report[0], report[1]});
    return errors::internal(std::string("socketpair failed: ") + std::strerror(err));
  }
  auto shim = exec ? exec_shim(spec.shim_program, report[1], gate[1]) : fork_shim(*plan, report[1], gate[1], {report[0], gate[0]});
  close_all({report[1], gate[1]});
  if (!shim.ok()) {
    close_all({report[0], gate[0]});
    return shim.error();
  }
  SpawnedProcess out;
  out.shim_pid = *shim;
  out.go_fd = gate[0];
  out.report_fd = report[0];
  if (exec) out.gate_message = shim::encode_spec(plan->spec);
  // The shim is our child and not yet reaped, so /proc still has it even if it has already exited.
  if (auto st = read_proc_stat(out.shim_pid)) out.shim_start_ticks = st->start_ticks;
  return out;
}

void open_supervised_gate(SpawnedProcess& process) {
  if (process.go_fd < 0) return;
  // A forked shim waits for one byte, cubeplane-shim for its whole spec.
  const std::string_view go = process.gate_message.empty() ? std::string_view("\1", 1) : process.gate_message;
  std::size_t sent = 0;
  while (sent < go.size()) {
    ssize_t n = ::send(process.go_fd, go.data() + sent, go.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;  // the shim is gone: it runs nothing, and the replica reads as lost
    sent += static_cast<std::size_t>(n);
  }
  ::close(process.go_fd);
  process.go_fd = -1;
  process.gate_message.clear();
}

bool await_supervised_pgid(SpawnedProcess& process, int timeout_ms) {
  if (process.report_fd < 0) return true;
  pollfd pfd{process.report_fd, POLLIN, 0};
  int ready = 0;
  while ((ready = ::poll(&pfd, 1, timeout_ms)) < 0 && errno == EINTR) {
  }
  if (ready == 0) return false;
  // Four bytes written at once (under PIPE_BUF), or EOF when the shim ended first.
  int pgid = 0;
  std::size_t got = 0;
  auto* dst = reinterpret_cast<char*>(&pgid);
  while (got < sizeof(pgid)) {
    ssize_t n = ::read(process.report_fd, dst + got, sizeof(pgid) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<std::size_t>(n);
  }
  ::close(process.report_fd);
  process.report_fd = -1;
  process.pgid = got == sizeof(pgid) ? pgid : 0;
  return true;
}

int supervised_child(int shim_pid) {
  if (shim_pid <= 1) return 0;
  std::ifstream in("/proc/" + std::to_string(shim_pid) + "/task/" + std::to_string(shim_pid) + "/children");
  int child = 0;
  if (in >> child) return child;
  return 0;
}

}  // namespace cp
