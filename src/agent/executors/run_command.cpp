#include "agent/executors/run_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>

extern char** environ;

namespace cp {

namespace {

std::string last_line(const std::string& text) {
  std::size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  std::size_t begin = text.rfind('\n', end);
  begin = begin == std::string::npos ? 0 : begin + 1;
  return text.substr(begin, end + 1 - begin);
}

struct Pipe {
  int r = -1, w = -1;
  ~Pipe() {
    if (r >= 0) ::close(r);
    if (w >= 0) ::close(w);
  }
};

}  // namespace

std::string CommandOutput::problem() const {
  if (timed_out) return "timed out";
  std::string line = last_line(err);
  if (line.empty()) line = last_line(out);
  if (!line.empty()) return line;
  if (signal != 0) return "killed by signal " + std::to_string(signal);
  return "exit code " + std::to_string(exit_code);
}

Result<CommandOutput> run_command(const CommandSpec& spec) {
  const std::string program = spec.argv.empty() ? std::string() : spec.argv[0];
  if (program.empty()) return errors::internal("run_command: empty argv");

  // Everything the child needs is built here: posix_spawn does the rest.
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq != std::string_view::npos && spec.env.count(std::string(kv.substr(0, eq)))) continue;
    env_strings.emplace_back(kv);
  }
  for (const auto& [k, v] : spec.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> args = spec.argv;
  std::vector<char*> argv;
  for (auto& s : args) argv.push_back(s.data());
  argv.push_back(nullptr);

  Pipe out, err;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errors::internal(std::string("pipe: ") + std::strerror(errno));
  out.r = fds[0], out.w = fds[1];
  if (::pipe2(fds, O_CLOEXEC) != 0) return errors::internal(std::string("pipe: ") + std::strerror(errno));
  err.r = fds[0], err.w = fds[1];

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, out.w, 1);
  posix_spawn_file_actions_adddup2(&actions, err.w, 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Its own process group, so that a timeout kills whatever it started too;
  // default signal handling, whatever the agent ignores or blocks.
  sigset_t none, all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  int rc = program.find('/') == std::string::npos
               ? ::posix_spawnp(&pid, program.c_str(), &actions, &attr, argv.data(), envp.data())
               : ::posix_spawn(&pid, program.c_str(), &actions, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return errors::unavailable("cannot run " + program + ": " + std::strerror(rc),
                               "无法运行 " + program + "：" + std::strerror(rc));
  }
  ::close(out.w);
  out.w = -1;
  ::close(err.w);
  err.w = -1;

  CommandOutput result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(std::max<std::int64_t>(0, spec.timeout_ms));
  char buf[16384];
  while (out.r >= 0 || err.r >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      result.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd pfds[2];
    int n = 0;
    int* which[2];
    for (Pipe* p : {&out, &err}) {
      if (p->r < 0) continue;
      pfds[n] = pollfd{p->r, POLLIN, 0};
      which[n++] = &p->r;
    }
    int ready = ::poll(pfds, static_cast<nfds_t>(n), static_cast<int>(std::min<std::int64_t>(left.count(), 1000)));
    if (ready < 0 && errno != EINTR) break;
    for (int i = 0; i < n && ready > 0; ++i) {
      if (pfds[i].revents == 0) continue;
      ssize_t got = ::read(*which[i], buf, sizeof buf);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        ::close(*which[i]);
        *which[i] = -1;
        continue;
      }
      std::string& dest = which[i] == &out.r ? result.out : result.err;
      std::size_t keep = std::min(static_cast<std::size_t>(got), spec.max_output - std::min(spec.max_output, dest.size()));
      dest.append(buf, keep);
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.signal = WTERMSIG(status);
  }
  return result;
}

}  // namespace cp
