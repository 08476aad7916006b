#include "agent/executors/shim.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>

namespace cp::shim {
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

std::string env_value(const std::vector<std::string>& env, std::string_view name) {
  for (const auto& e : env) {
    if (e.size() > name.size() && e.compare(0, name.size(), name) == 0 && e[name.size()] == '=') {
      return e.substr(name.size() + 1);
    }
  }
  return {};
}

[[noreturn]] void run_command(const ShimPlan& p, pid_t shim) {
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

  int log = ::open(p.spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log >= 0) {
    ::dup2(log, 1);
    ::dup2(log, 2);
  }
  int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) ::dup2(null, 0);
  close_fds_from(3, p.max_fd);

  if (::chdir(p.spec.work_dir.c_str()) != 0) {
    int err = errno;
    safe_write_str(2, "cubeplane: cannot enter the work directory ");
    safe_write_str(2, p.spec.work_dir.c_str());
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

// Without fsync, like the local executor's journal: the file outlives the
// agent (page cache), and a crash of the machine takes the command along
// anyway; a missing or empty file then reads as "lost", and the server runs
// the task again. An fsync here held every finished replica's report back by
// a disk flush (milliseconds on a VM).
void write_exit_file(const ShimPlan& p, bool signaled, int number, bool fenced = false) {
  char buf[48];
  std::size_t n = 0;
  if (fenced) {
    for (const char* c = "fenced "; *c; ++c) buf[n++] = *c;
  }
  const char* word = signaled ? "signal " : "exit ";
  for (const char* c = word; *c; ++c) buf[n++] = *c;
  n += format_uint(number, buf + n);
  buf[n++] = '\n';
  int fd = ::open(p.exit_tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  safe_write(fd, buf, n);
  ::close(fd);
  ::rename(p.exit_tmp.c_str(), p.spec.exit_path.c_str());
}

void put_u32(std::string& out, std::size_t v) {
  const auto n = static_cast<std::uint32_t>(v);
  out.append(reinterpret_cast<const char*>(&n), sizeof n);
}

bool take_u32(std::string_view& in, std::size_t& v) {
  std::uint32_t n = 0;
  if (in.size() < sizeof n) return false;
  std::memcpy(&n, in.data(), sizeof n);
  in.remove_prefix(sizeof n);
  v = n;
  return true;
}

void put(std::string& out, std::string_view field) {
  put_u32(out, field.size());
  out.append(field);
}

bool take(std::string_view& in, std::string& field) {
  std::size_t n = 0;
  if (!take_u32(in, n) || in.size() < n) return false;
  field.assign(in.substr(0, n));
  in.remove_prefix(n);
  return true;
}

void put_list(std::string& out, const std::vector<std::string>& list) {
  put_u32(out, list.size());
  for (const auto& s : list) put(out, s);
}

bool take_list(std::string_view& in, std::vector<std::string>& list) {
  std::size_t n = 0;
  if (!take_u32(in, n) || n > in.size() / 4) return false;  // each entry takes at least its 4-byte length
  list.resize(n);
  for (auto& s : list) {
    if (!take(in, s)) return false;
  }
  return true;
}

constexpr std::string_view kMagic = "cubeplane-shim/2";

// ---- the lease record (async-signal-safe: no allocation, no locale)

std::uint64_t fnv1a(const char* s, std::size_t n) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(s[i]);
    h *= 1099511628211ull;
  }
  return h;
}

// The position of `key` in text[0, n), or n.
std::size_t find(const char* text, std::size_t n, const char* key) {
  const std::size_t k = std::strlen(key);
  for (std::size_t i = 0; i + k <= n; ++i) {
    if (std::memcmp(text + i, key, k) == 0) return i;
  }
  return n;
}

// The fixed-size string after `key` (which ends with its opening quote), then its closing quote.
bool take_fixed(const char* text, std::size_t n, const char* key, std::size_t size, char* out) {
  std::size_t at = find(text, n, key);
  if (at == n) return false;
  at += std::strlen(key);
  if (at + size >= n || text[at + size] != '"') return false;
  std::memcpy(out, text + at, size);
  out[size] = '\0';
  return true;
}

// The number after `key`, space-padded on the left.
bool take_number(const char* text, std::size_t n, const char* key, std::int64_t& out) {
  std::size_t at = find(text, n, key);
  if (at == n) return false;
  at += std::strlen(key);
  while (at < n && text[at] == ' ') ++at;
  bool negative = at < n && text[at] == '-';
  if (negative) ++at;
  std::int64_t v = 0;
  std::size_t digits = 0;
  for (; at < n && text[at] >= '0' && text[at] <= '9' && digits < 18; ++at, ++digits) v = v * 10 + (text[at] - '0');
  if (digits == 0 || (at < n && text[at] >= '0' && text[at] <= '9')) return false;
  out = negative ? -v : v;
  return true;
}

bool hex_value(char c, unsigned& v) {
  if (c >= '0' && c <= '9') {
    v = static_cast<unsigned>(c - '0');
  } else if (c >= 'a' && c <= 'f') {
    v = static_cast<unsigned>(c - 'a' + 10);
  } else {
    return false;
  }
  return true;
}

void sleep_ms(long ms) {
  timespec ts{ms / 1000, (ms % 1000) * 1'000'000};
  while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

constexpr const char* kCheckKey = ",\"check\":\"";

// The deadline of the lease `p` runs under: 0 (passed) when the record is
// missing, unreadable, of another boot or of another chain. Its grace into `grace_ms`.
std::int64_t lease_deadline(const ShimPlan& p, std::int64_t& grace_ms) {
  LeaseRecord lease;
  if (p.boot_id[0] == '\0' || !read_lease(p.spec.lease_path.c_str(), lease)) return 0;
  if (std::strcmp(lease.boot_id, p.boot_id) != 0 || p.spec.lease_chain != lease.chain) return 0;
  grace_ms = lease.grace_ms < 0 ? 0 : lease.grace_ms;
  return lease.deadline_ms;
}

void log_line(const ShimPlan& p, const char* line) {
  int log = ::open(p.spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log < 0) return;
  safe_write_str(log, line);
  ::close(log);
}

// Whether the command has ended (not reaped), waiting up to wait_ms for it.
// With a pidfd the end wakes the wait at once; without one (a kernel before
// 5.3, no descriptor left) the wait looks every 100 ms.
bool ended_within(int pidfd, pid_t child, std::int64_t wait_ms) {
  if (wait_ms < 0) wait_ms = 0;
  if (wait_ms > 1000) wait_ms = 1000;  // callers loop; a grace read from the record may be anything
  if (pidfd >= 0) {
    pollfd pfd{pidfd, POLLIN, 0};
    int r = ::poll(&pfd, 1, static_cast<int>(wait_ms));
    return r > 0;  // EINTR counts as "not yet": the caller looks again
  }
  siginfo_t info{};
  info.si_pid = 0;
  if (::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0) {
    return true;
  }
  if (wait_ms > 0) sleep_ms(static_cast<long>(wait_ms < 100 ? wait_ms : 100));
  return false;
}

// Holds the deadline of the agent's lease while the command runs: the
// record is read again only when the deadline it last gave has passed (the
// agent extends it on every answered sync), so a shim wakes about once a
// lease, and at least every second for a suspend the wait did not count.
// Returns true when it stopped the command because the lease ran out.
bool hold_lease(const ShimPlan& p, pid_t child) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, child, 0));
  std::int64_t grace_ms = 0;
  std::int64_t deadline = lease_deadline(p, grace_ms);
  bool fenced = false;
  for (;;) {
    std::int64_t now = boottime_ms();
    if (now >= deadline) {
      deadline = lease_deadline(p, grace_ms);
      now = boottime_ms();
      if (now >= deadline) {
        fenced = !ended_within(pidfd, child, 0);  // one that ended on its own first is not fenced
        break;
      }
    }
    const std::int64_t left = deadline - now;
    if (ended_within(pidfd, child, left < 1000 ? left : 1000)) break;
  }
  if (fenced) {
    log_line(p,
             "cubeplane: the agent's lease ran out (the agent is dead, hung or cut off from the control plane): "
             "this replica is stopped so that it never runs twice\n"
             "cubeplane: agent 租约已过期（agent 已退出、挂起或与控制面失联）：停止此副本，以免任务同时运行两次\n");
    ::kill(-child, SIGTERM);
    const std::int64_t until = boottime_ms() + grace_ms;
    for (std::int64_t now = boottime_ms(); now < until; now = boottime_ms()) {
      if (ended_within(pidfd, child, until - now)) break;
    }
    ::kill(-child, SIGKILL);
  }
  if (pidfd >= 0) ::close(pidfd);
  return fenced;
}

}  // namespace

std::string encode_spec(const ShimSpec& spec) {
  std::string out;
  put_u32(out, 0);  // the length of the rest, filled in below
  put(out, kMagic);
  put(out, spec.work_dir);
  put(out, spec.log_path);
  put(out, spec.exit_path);
  put_list(out, spec.argv);
  put_list(out, spec.env);
  put_list(out, spec.dirs);
  put(out, spec.lease_path);
  put(out, spec.lease_chain);
  const auto rest = static_cast<std::uint32_t>(out.size() - sizeof(std::uint32_t));
  std::memcpy(out.data(), &rest, sizeof rest);
  return out;
}

std::size_t spec_size(std::string_view head) {
  std::size_t n = 0;
  return take_u32(head, n) ? sizeof(std::uint32_t) + n : 0;
}

bool decode_spec(std::string_view bytes, ShimSpec& out) {
  if (bytes.size() < sizeof(std::uint32_t) || spec_size(bytes) != bytes.size()) return false;
  bytes.remove_prefix(sizeof(std::uint32_t));
  std::string magic;
  if (!take(bytes, magic) || magic != kMagic) return false;
  if (!take(bytes, out.work_dir) || !take(bytes, out.log_path) || !take(bytes, out.exit_path)) return false;
  if (!take_list(bytes, out.argv) || !take_list(bytes, out.env) || !take_list(bytes, out.dirs)) return false;
  if (!take(bytes, out.lease_path) || !take(bytes, out.lease_chain)) return false;
  return bytes.empty() && !out.argv.empty() && !out.argv[0].empty() && !out.exit_path.empty();
}

std::string encode_lease(const LeaseRecord& lease) {
  if (std::strlen(lease.boot_id) != kBootIdSize || std::strlen(lease.chain) != kChainSize) return {};
  char body[kLeaseRecordSize + 1];
  int n = std::snprintf(body, sizeof body,
                        "{\"version\":1,\"boot_id\":\"%s\",\"chain\":\"%s\",\"deadline_ms\":%20lld,\"grace_ms\":%10lld,"
                        "\"ttl_s\":%10lld",
                        lease.boot_id, lease.chain, static_cast<long long>(lease.deadline_ms),
                        static_cast<long long>(lease.grace_ms), static_cast<long long>(lease.ttl_s));
  if (n < 0 || static_cast<std::size_t>(n) >= sizeof body) return {};
  std::string out(body, static_cast<std::size_t>(n));
  char check[64];
  std::snprintf(check, sizeof check, "%s%016llx\"}\n", kCheckKey,
                static_cast<unsigned long long>(fnv1a(out.data(), out.size())));
  out += check;
  return out.size() == kLeaseRecordSize ? out : std::string();
}

bool parse_lease(const char* text, std::size_t n, LeaseRecord& out) {
  if (n != kLeaseRecordSize) return false;
  const std::size_t at = find(text, n, kCheckKey);
  if (at == n) return false;
  const std::size_t hex = at + std::strlen(kCheckKey);
  if (hex + 16 + 3 != n || text[hex + 16] != '"' || text[hex + 17] != '}' || text[hex + 18] != '\n') return false;
  std::uint64_t check = 0;
  for (std::size_t i = 0; i < 16; ++i) {
    unsigned v = 0;
    if (!hex_value(text[hex + i], v)) return false;
    check = (check << 4) | v;
  }
  if (check != fnv1a(text, at)) return false;
  LeaseRecord r;
  std::int64_t version = 0;
  if (!take_number(text, at, "\"version\":", version) || version != 1) return false;
  if (!take_fixed(text, at, "\"boot_id\":\"", kBootIdSize, r.boot_id)) return false;
  if (!take_fixed(text, at, "\"chain\":\"", kChainSize, r.chain)) return false;
  if (!take_number(text, at, "\"deadline_ms\":", r.deadline_ms)) return false;
  if (!take_number(text, at, "\"grace_ms\":", r.grace_ms)) return false;
  if (!take_number(text, at, "\"ttl_s\":", r.ttl_s)) return false;
  out = r;
  return true;
}

bool read_lease(const char* path, LeaseRecord& out) {
  for (int tries = 0; tries < 5; ++tries) {
    if (tries > 0) sleep_ms(1);
    int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[kLeaseRecordSize + 8];
    std::size_t got = 0;
    for (;;) {
      ssize_t r = ::read(fd, buf + got, sizeof buf - got);
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      got += static_cast<std::size_t>(r);
      if (got == sizeof buf) break;
    }
    ::close(fd);
    if (parse_lease(buf, got, out)) return true;
  }
  return false;
}

std::int64_t boottime_ms() {
  timespec ts{};
  ::clock_gettime(CLOCK_BOOTTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

bool read_boot_id(char* out) {
  out[0] = '\0';
  int fd = ::open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[64];
  ssize_t n = 0;
  while ((n = ::read(fd, buf, sizeof buf)) < 0 && errno == EINTR) {
  }
  ::close(fd);
  if (n < static_cast<ssize_t>(kBootIdSize)) return false;
  std::memcpy(out, buf, kBootIdSize);
  out[kBootIdSize] = '\0';
  return true;
}

void prepare(ShimPlan& p) {
  const std::string& cmd = p.spec.argv.at(0);
  p.candidates.clear();
  if (cmd.find('/') != std::string::npos) {
    p.candidates.push_back(cmd);
  } else {
    std::string path = env_value(p.spec.env, "PATH");
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
  p.argv.clear();
  for (auto& a : p.spec.argv) p.argv.push_back(a.data());
  p.argv.push_back(nullptr);
  p.envp.clear();
  for (auto& e : p.spec.env) p.envp.push_back(e.data());
  p.envp.push_back(nullptr);
  p.exit_tmp = p.spec.exit_path + ".tmp";
  p.exec_error_prefix = "cubeplane: cannot execute " + cmd + ": ";
  p.leased = !p.spec.lease_path.empty();
  if (p.leased && !read_boot_id(p.boot_id)) p.boot_id[0] = '\0';
  rlimit rl{};
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 1'000'000) {
    p.max_fd = static_cast<int>(rl.rlim_cur);
  }
}

void enter_shim() {
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
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

[[noreturn]] void supervise(const ShimPlan& p, int report_fd) {
  pid_t self = ::getpid();
  for (const auto& dir : p.spec.dirs) ::mkdir(dir.c_str(), 0755);  // a failure shows when the command cannot enter it
  // Signals blocked across the fork: the command inherits the shim's ignored
  // TERM and INT until run_command resets them, and a stop sent to its group
  // in that moment (the pgid is reported at once) would be lost. Blocked, it
  // waits, and arrives once the defaults are back (Linux keeps a blocked
  // signal pending even while its action is to ignore it).
  if (p.leased) {
    std::int64_t grace_ms = 0;
    if (boottime_ms() >= lease_deadline(p, grace_ms)) {
      int zero = 0;
      safe_write(report_fd, reinterpret_cast<const char*>(&zero), sizeof(zero));
      ::close(report_fd);
      log_line(p,
               "cubeplane: not started: the agent's lease had run out when this replica was released\n"
               "cubeplane: 未启动：释放此副本时 agent 租约已过期\n");
      write_exit_file(p, false, 127, true);
      ::_exit(0);
    }
  }
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  pid_t child = ::fork();
  if (child == 0) run_command(p, self);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (child < 0) {
    int err = errno;
    int zero = 0;
    safe_write(report_fd, reinterpret_cast<const char*>(&zero), sizeof(zero));
    ::close(report_fd);
    int log = ::open(p.spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log >= 0) {
      safe_write_str(log, "cubeplane: cannot fork: ");
      safe_write_str(log, errno_text(err));
      safe_write_str(log, "\n");
      ::close(log);
    }
    write_exit_file(p, false, 127);
    ::_exit(0);
  }
  ::setpgid(child, child);  // also done by the child; whoever runs first wins the race with kill(-pgid)
  int pgid = static_cast<int>(child);
  safe_write(report_fd, reinterpret_cast<const char*>(&pgid), sizeof(pgid));
  ::close(report_fd);
  close_fds_from(3, p.max_fd);
  ::chdir("/");

  const bool fenced = p.leased && hold_lease(p, child);
  siginfo_t info{};
  while (::waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  ::kill(-child, SIGKILL);  // the leader is a zombie, so the group id is still ours
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    write_exit_file(p, true, WTERMSIG(status), fenced);
  } else {
    write_exit_file(p, false, WEXITSTATUS(status), fenced);
  }
  ::_exit(0);
}

}  // namespace cp::shim
