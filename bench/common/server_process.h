// A real `cubeplane server` process for the benchmarks that drive one
// (bench/agents, bench/failover): started with its stdout on a pipe, its
// banner read for the URL and the admin token, the rest drained. It never
// outlives the benchmark (PR_SET_PDEATHSIG, and an atexit stop of every
// one still running). Header only, as server_bench.h.
#pragma once

#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace cp::bench {

class ServerProcess {
 public:
  // `args`: the binary and its arguments. `name` names it in messages.
  // `want_token`: the first server on a fresh store prints the admin
  // token, the others do not.
  ServerProcess(std::string name, std::vector<std::string> args, bool want_token) : name_(std::move(name)) {
    int out[2];
    if (::pipe(out) != 0) fail("pipe: " + std::string(std::strerror(errno)));
    pid_ = ::fork();
    if (pid_ < 0) fail("fork: " + std::string(std::strerror(errno)));
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive a benchmark that crashed or was killed
      ::dup2(out[1], STDOUT_FILENO);
      ::close(out[0]);
      ::close(out[1]);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      std::fprintf(stderr, "ERROR cannot run %s: %s\n", argv[0], std::strerror(errno));
      ::_exit(127);
    }
    ::close(out[1]);
    out_ = out[0];
    if (running().empty()) {
      std::atexit([] {
        for (auto* s : running()) s->stop();
      });
    }
    running().push_back(this);
    read_banner(want_token);
    drain_ = std::thread([fd = out_] {
      char buf[4096];
      while (::read(fd, buf, sizeof buf) > 0) {
      }
    });
  }
  ~ServerProcess() {
    stop();
    auto& all = running();
    all.erase(std::remove(all.begin(), all.end(), this), all.end());
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // SIGTERM (a clean stop; a leader resigns), SIGKILL after 60 s.
  void stop() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
      int status = 0;
      while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
          ::kill(pid_, SIGKILL);
          ::waitpid(pid_, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      pid_ = -1;
    }
    close_pipe();
  }
  void kill_hard() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      ::waitpid(pid_, &status, 0);
      pid_ = -1;
    }
    close_pipe();
  }

  pid_t pid() const { return pid_; }
  const std::string& url() const { return url_; }
  const std::string& admin_token() const { return admin_token_; }
  const std::string& name() const { return name_; }

  // utime + stime of the process (all its threads), in seconds.
  double cpu_seconds() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/stat");
    std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    // Fields after the command name, which is in parentheses and may hold spaces.
    auto close = s.rfind(')');
    if (close == std::string::npos) fail("cannot read /proc/" + std::to_string(pid_) + "/stat");
    std::istringstream in(s.substr(close + 2));
    std::vector<std::string> fields;
    for (std::string x; in >> x;) fields.push_back(x);
    // Field 3 (state) is fields[0]; utime and stime are fields 14 and 15.
    if (fields.size() < 13) fail("short /proc/<pid>/stat");
    const double ticks = static_cast<double>(std::stoll(fields[11]) + std::stoll(fields[12]));
    return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
  }

  long rss_kib() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    for (std::string line; std::getline(f, line);) {
      if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
    }
    return 0;
  }

 private:
  [[noreturn]] static void fail(const std::string& what) {
    std::fprintf(stderr, "ERROR %s\n", what.c_str());
    std::fflush(stderr);
    std::exit(1);
  }
  static std::vector<ServerProcess*>& running() {
    static std::vector<ServerProcess*> all;
    return all;
  }
  void close_pipe() {
    if (drain_.joinable()) drain_.join();
    if (out_ >= 0) ::close(out_);
    out_ = -1;
  }
  // "  UI and API:  http://127.0.0.1:PORT/" and, at a first start,
  // "  admin token: cp_...   (shown once; ...)"; the banner ends with "Press Ctrl-C".
  void read_banner(bool want_token) {
    std::string text;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (text.find("Press Ctrl-C") == std::string::npos) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
      if (left <= 0) fail("server " + name_ + " did not start within 60 s; its output so far:\n" + text);
      pollfd p{out_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left)) <= 0) continue;
      char buf[4096];
      const auto n = ::read(out_, buf, sizeof buf);
      if (n <= 0) fail("server " + name_ + " exited at start; its output:\n" + text);
      text.append(buf, static_cast<std::size_t>(n));
    }
    auto value_after = [&](std::string_view key) -> std::string {
      auto at = text.find(key);
      if (at == std::string::npos) return "";
      at += key.size();
      while (at < text.size() && text[at] == ' ') ++at;
      auto end = text.find_first_of(" \n", at);
      return text.substr(at, end - at);
    };
    url_ = value_after("UI and API:");
    if (!url_.empty() && url_.back() == '/') url_.pop_back();
    if (url_.empty()) fail("no URL in server " + name_ + "'s banner:\n" + text);
    admin_token_ = value_after("admin token:");
    if (want_token && admin_token_.rfind("cp_", 0) != 0) {
      fail("server " + name_ + " printed no admin token (it does so only on a fresh store; use a new database)");
    }
  }

  std::string name_;
  pid_t pid_ = -1;
  int out_ = -1;
  std::thread drain_;
  std::string url_;
  std::string admin_token_;
};

}  // namespace cp::bench
