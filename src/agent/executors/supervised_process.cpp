#include "agent/executors/supervised_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

namespace cp {
namespace {

// ---- async-signal-safe helpers (used between fork and exec / in the shim)

void safe_write(int fd, const char* s, std::size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, s, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    s += w;
    n -= static_cast<std::size_t>(w);
  }
}

void safe_write_str(int fd, const char* s) { safe_write(fd, s, std::strlen(s)); }  // strlen is async-signal-safe

// Decimal text of a non-negative int into buf (at least 12 chars); returns the length.
std::size_t format_uint(int v, char* buf) {
  char tmp[12];
  std::size_t n = 0;
  unsigned u = v < 0 ? 0u : static_cast<unsigned>(v);
  do {
    tmp[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u > 0 && n < sizeof(tmp));
  for (std::size_t i = 0; i < n; ++i) buf[i] = tmp[n - 1 - i];
  return n;
}

const char* errno_text(int err) {
  switch (err) {
    case ENOENT: return "no such file or directory";
    case EACCES: return "permission denied";
    case ENOEXEC: return "exec format error";
    case ENOTDIR: return "not a directory";
    case ENOMEM: return "out of memory";
    case E2BIG: return "argument list too long";
    case EAGAIN: return "resource temporarily unavailable";
    default: return "error";
  }
}

void close_fds_from(int first, int max_fd) {
  if (::close_range(static_cast<unsigned>(first), ~0u, 0) == 0) return;
  for (int fd = first; fd < max_fd; ++fd) ::close(fd);
}

// Everything the shim and the command need, prepared before fork().
struct Prepared {
  std::vector<std::string> candidates;  // paths to try for argv[0]
  std::vector<char*> argv;
  std::vector<char*> envp;
  std::string exit_tmp;
  std::string exec_error_prefix;  // "cubeplane: cannot execute sh: "
  int max_fd = 1024;
};

[[noreturn]] void run_command(const SpawnSpec& spec, const Prepared& p, pid_t shim) {
  ::setpgid(0, 0);
  // Fresh signal state: the agent may block or handle signals (a server in
  // the same process does); the command starts with defaults.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int s = 1; s < NSIG; ++s) {
    if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &dfl, nullptr);
  }
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  // Should the shim itself be killed, take the command down too: no orphan.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != shim) ::_exit(127);

  int log = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log >= 0) {
    ::dup2(log, 1);
    ::dup2(log, 2);
  }
  int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) ::dup2(null, 0);
  close_fds_from(3, p.max_fd);

  if (::chdir(spec.work_dir.c_str()) != 0) {
    int err = errno;
    safe_write_str(2, "cubeplane: cannot enter the work directory ");
    safe_write_str(2, spec.work_dir.c_str());
    safe_write_str(2, ": ");
    safe_write_str(2, errno_text(err));
    safe_write_str(2, "\n");
    ::_exit(127);
  }
  // execvp's search, by hand, so that the PATH is the command's and nothing allocates.
  int saved = ENOENT;
  bool denied = false;
  for (const auto& path : p.candidates) {
    ::execve(path.c_str(), p.argv.data(), p.envp.data());
    int err = errno;
    if (err == EACCES) {
      denied = true;
    } else if (err != ENOENT && err != ENOTDIR) {
      saved = err;
      break;
    }
  }
  if (denied && saved == ENOENT) saved = EACCES;
  safe_write(2, p.exec_error_prefix.data(), p.exec_error_prefix.size());
  safe_write_str(2, errno_text(saved));
  safe_write_str(2, "\n");
  ::_exit(saved == EACCES ? 126 : 127);
}

void write_exit_file(const SpawnSpec& spec, const Prepared& p, bool signaled, int number) {
  char buf[32];
  std::size_t n = 0;
  const char* word = signaled ? "signal " : "exit ";
  for (const char* c = word; *c; ++c) buf[n++] = *c;
  n += format_uint(number, buf + n);
  buf[n++] = '\n';
  int fd = ::open(p.exit_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  safe_write(fd, buf, n);
  ::fsync(fd);
  ::close(fd);
  ::rename(p.exit_tmp.c_str(), spec.exit_path.c_str());
}

[[noreturn]] void run_shim(const SpawnSpec& spec, const Prepared& p, int report_fd, int go_fd) {
  ::setsid();  // out of the agent's session: a Ctrl-C at the agent's terminal does not reach the work
  struct sigaction act {};
  sigemptyset(&act.sa_mask);
  for (int s = 1; s < NSIG; ++s) {
    if (s == SIGKILL || s == SIGSTOP) continue;
    bool ignore = s == SIGTERM || s == SIGINT || s == SIGHUP || s == SIGQUIT || s == SIGPIPE || s == SIGUSR1 ||
                  s == SIGUSR2 || s == SIGALRM;
    act.sa_handler = ignore ? SIG_IGN : SIG_DFL;  // SIGCHLD stays SIG_DFL so that waitpid works
    ::sigaction(s, &act, nullptr);
  }
  // The gate: run nothing until the agent has journaled this shim.
  char go = 0;
  ssize_t got_go = 0;
  while ((got_go = ::read(go_fd, &go, 1)) < 0 && errno == EINTR) {
  }
  ::close(go_fd);
  if (got_go != 1) ::_exit(0);  // the agent died first: never started, nothing to record
  pid_t self = ::getpid();
  pid_t child = ::fork();
  if (child == 0) run_command(spec, p, self);
  if (child < 0) {
    int err = errno;
    int zero = 0;
    safe_write(report_fd, reinterpret_cast<const char*>(&zero), sizeof(zero));
    ::close(report_fd);
    int log = ::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log >= 0) {
      safe_write_str(log, "cubeplane: cannot fork: ");
      safe_write_str(log, errno_text(err));
      safe_write_str(log, "\n");
      ::close(log);
    }
    write_exit_file(spec, p, false, 127);
    ::_exit(0);
  }
  ::setpgid(child, child);  // also done by the child; whoever runs first wins the race with kill(-pgid)
  int pgid = static_cast<int>(child);
  safe_write(report_fd, reinterpret_cast<const char*>(&pgid), sizeof(pgid));
  ::close(report_fd);
  close_fds_from(3, p.max_fd);
  ::chdir("/");

  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  ::kill(-child, SIGKILL);  // the leader is a zombie, so the group id is still ours
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    write_exit_file(spec, p, true, WTERMSIG(status));
  } else {
    write_exit_file(spec, p, false, WEXITSTATUS(status));
  }
  ::_exit(0);
}

std::string env_value(const std::vector<std::string>& env, std::string_view name) {
  for (const auto& e : env) {
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') {
      return e.substr(name.size() + 1);
    }
  }
  return {};
}

}  // namespace

std::string ExitRecord::text() const { return (signaled ? "signal " : "exit ") + std::to_string(number); }

std::optional<ExitRecord> parse_exit_record(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
  ExitRecord r;
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

bool group_has_marker(int pgid, std::string_view marker) {
  if (pgid <= 1) return false;
  return for_each_process([&](const std::filesystem::path& dir, const ProcStat& st) {
    if (st.pgrp != pgid || st.state == 'Z' || st.state == 'X') return false;
    std::ifstream in(dir / "environ", std::ios::binary);
    std::string var;
    while (std::getline(in, var, '\0')) {
      if (var == marker) return true;
    }
    return false;
  });
}

Result<SpawnedProcess> spawn_supervised(const SpawnSpec& spec) {
  if (spec.argv.empty() || spec.argv[0].empty()) return errors::invalid("command", "empty command", "命令为空");
  Prepared p;
  const std::string& cmd = spec.argv[0];
  if (cmd.find('/') != std::string::npos) {
    p.candidates.push_back(cmd);
  } else {
    std::string path = env_value(spec.env, "PATH");
    if (path.empty()) path = "/usr/local/bin:/usr/bin:/bin";
    std::size_t start = 0;
    while (start <= path.size()) {
      auto end = path.find(':', start);
      if (end == std::string::npos) end = path.size();
      std::string dir = path.substr(start, end - start);
      p.candidates.push_back(dir.empty() ? cmd : dir + "/" + cmd);
      start = end + 1;
    }
  }
  std::vector<std::string> argv_copy = spec.argv;  // c_str() pointers below stay valid until we return
  for (auto& a : argv_copy) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  std::vector<std::string> env_copy = spec.env;
  for (auto& e : env_copy) p.envp.push_back(e.data());
  p.envp.push_back(nullptr);
  p.exit_tmp = spec.exit_path + ".tmp";
  p.exec_error_prefix = "cubeplane: cannot execute " + cmd + ": ";
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 1'000'000) {
    p.max_fd = static_cast<int>(rl.rlim_cur);
  }

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errors::internal(std::string("pipe2 failed: ") + std::strerror(errno));
  int gate[2];
  if (::pipe2(gate, O_CLOEXEC) != 0) {
    int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return errors::internal(std::string("pipe2 failed: ") + std::strerror(err));
  }
  pid_t shim = ::fork();
  if (shim < 0) {
    int err = errno;
    for (int fd : {fds[0], fds[1], gate[0], gate[1]}) ::close(fd);
    return errors::internal(std::string("fork failed: ") + std::strerror(err));
  }
  if (shim == 0) {
    ::close(fds[0]);
    ::close(gate[1]);
    run_shim(spec, p, fds[1], gate[0]);
  }
  ::close(fds[1]);
  ::close(gate[0]);
  SpawnedProcess out;
  out.shim_pid = static_cast<int>(shim);
  out.go_fd = gate[1];
  out.report_fd = fds[0];
  // The shim is our child and not yet reaped, so /proc still has it even if it has already exited.
  if (auto st = read_proc_stat(out.shim_pid)) out.shim_start_ticks = st->start_ticks;
  return out;
}

void open_supervised_gate(SpawnedProcess& process) {
  if (process.go_fd < 0) return;
  char go = 1;
  safe_write(process.go_fd, &go, 1);
  ::close(process.go_fd);
  process.go_fd = -1;
}

void await_supervised_pgid(SpawnedProcess& process) {
  if (process.report_fd < 0) return;
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
}

int supervised_child(int shim_pid) {
  if (shim_pid <= 1) return 0;
  std::ifstream in("/proc/" + std::to_string(shim_pid) + "/task/" + std::to_string(shim_pid) + "/children");
  int child = 0;
  if (in >> child) return child;
  return 0;
}

}  // namespace cp
