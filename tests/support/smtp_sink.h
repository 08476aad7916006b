// A real SMTP server for the tests: tests/support/smtp_sink.py (Debian's
// python3-aiosmtpd) as a child process on 127.0.0.1, on a port the OS picks
// (it prints it; we wait for that line with a deadline, no fixed sleeps).
// Each message it takes is a file in its directory, with Python's own email
// parser's reading beside it, so what we sent is checked by a parser that is
// not ours. It can refuse the first N messages (451) to test retries.
//
// Missing python3 or aiosmtpd is a test failure naming the package, not a
// skip: CI installs it (scripts/install-deps.sh). The interpreter is
// $CUBEPLANE_TEST_PYTHON, else /usr/bin/python3 (where Debian's package
// lives, even when a pyenv or venv python3 comes first on PATH), else python3.
//
// Header-only: tests of several layers (common, http) use it.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/json.h"
#include "common/result.h"

extern char** environ;

namespace cp::testing_smtp {

struct SmtpSinkOptions {
  int fail_first = 0;                                 // refuse the first N messages ...
  std::string fail_reply = "451 4.3.0 try again later";  // ... with this reply
  std::string auth;                                   // "user:password": require AUTH with exactly that
};

// One message the server got to the end of DATA.
struct ReceivedMail {
  std::string name;       // "msg-0001", "rejected-0002"
  std::string raw;        // "envelope-from: ...", "envelope-to: ..." lines, a blank line, the message as sent
  json::object parsed;    // Python's reading: headers (decoded), body (decoded), charset, defects, ...

  std::string mail_from() const { return str(parsed, "mail_from"); }
  std::vector<std::string> rcpt_tos() const {
    std::vector<std::string> out;
    if (const auto* a = parsed.if_contains("rcpt_tos")) {
      for (const auto& v : a->as_array()) out.emplace_back(v.as_string());
    }
    return out;
  }
  // A header, decoded (RFC 2047 undone, folding removed); by lower-case name.
  std::string header(const std::string& name) const {
    const auto* h = parsed.if_contains("headers");
    return h ? str(h->as_object(), name) : "";
  }
  // The message as it came over the wire, envelope lines cut off.
  std::string message() const {
    auto at = raw.find("\r\n\r\n");
    return at == std::string::npos ? raw : raw.substr(at + 4);
  }
  std::string body() const { return str(parsed, "body"); }
  std::string defects() const { return parsed.contains("defects") ? json::serialize(parsed.at("defects")) : ""; }

 private:
  static std::string str(const json::object& o, const std::string& key) {
    const auto* v = o.if_contains(key);
    return v && v->is_string() ? std::string(v->as_string()) : "";
  }
};

class SmtpSink {
 public:
  static Result<std::unique_ptr<SmtpSink>> start(const SmtpSinkOptions& opts = {}) {
    namespace fs = std::filesystem;
    using Clock = std::chrono::steady_clock;
    const fs::path script = fs::path(CUBEPLANE_SOURCE_DIR) / "tests" / "support" / "smtp_sink.py";
    std::string python = "python3";
    if (const char* p = std::getenv("CUBEPLANE_TEST_PYTHON"); p && *p) {
      python = p;
    } else if (::access("/usr/bin/python3", X_OK) == 0) {
      python = "/usr/bin/python3";
    }
    std::unique_ptr<SmtpSink> s(new SmtpSink());
    std::string pattern = (fs::path(::testing::TempDir()) / "cp-smtp-sink-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) {
      return cannot_start(python, std::string("mkdtemp: ") + std::strerror(errno));
    }
    s->dir_ = pattern;

    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return cannot_start(python, std::string("pipe: ") + std::strerror(errno));
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]);
      ::close(in[1]);
      return cannot_start(python, std::string("pipe: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, in[0], 0);
    posix_spawn_file_actions_adddup2(&actions, out[1], 1);
    std::vector<std::string> args{python, script.string(), "--directory", (s->dir_ / "mail").string(),
                                  "--fail-first", std::to_string(opts.fail_first), "--fail-reply", opts.fail_reply};
    if (!opts.auth.empty()) {
      args.push_back("--auth");
      args.push_back(opts.auth);
    }
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = -1;
    const int rc = ::posix_spawnp(&pid, python.c_str(), &actions, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&actions);
    ::close(in[0]);
    ::close(out[1]);
    if (rc != 0) {
      ::close(in[1]);
      ::close(out[0]);
      return cannot_start(python, "cannot run it: " + std::string(std::strerror(rc)));
    }
    s->pid_ = pid;
    s->stdin_fd_ = in[1];

    // "smtp sink listening on 127.0.0.1:<port>" once it accepts connections.
    const auto deadline = Clock::now() + std::chrono::seconds(30);
    std::string printed;
    bool exited = false;
    while (s->port_ == 0) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) break;
      pollfd pfd{out[0], POLLIN, 0};
      const int n = ::poll(&pfd, 1, static_cast<int>(left));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      char buf[512];
      const ssize_t got = ::read(out[0], buf, sizeof buf);
      if (got <= 0) {
        exited = true;
        break;
      }
      printed.append(buf, static_cast<std::size_t>(got));
      const auto at = printed.find("listening on ");
      const auto eol = printed.find('\n', at == std::string::npos ? 0 : at);
      if (at != std::string::npos && eol != std::string::npos) {
        const std::string addr = printed.substr(at + 13, eol - at - 13);
        s->port_ = std::atoi(addr.substr(addr.rfind(':') + 1).c_str());
      }
    }
    ::close(out[0]);  // it prints nothing more
    if (s->port_ == 0) {
      while (!printed.empty() && (printed.back() == '\n' || printed.back() == '\r')) printed.pop_back();
      return cannot_start(python, std::string(exited ? "it exited without reporting a port"
                                                     : "it did not report a port within 30 s") +
                                      (printed.empty() ? " (see its stderr above)" : " (it said: " + printed + ")"));
    }
    return s;
  }

  ~SmtpSink() {
    stop();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  SmtpSink(const SmtpSink&) = delete;
  SmtpSink& operator=(const SmtpSink&) = delete;

  // Ends the server (closing its stdin, then SIGTERM, SIGKILL after 5 s); what it received stays readable.
  void stop() {
    using Clock = std::chrono::steady_clock;
    if (stdin_fd_ >= 0) {
      ::close(stdin_fd_);
      stdin_fd_ = -1;
    }
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::seconds(5);
    bool gone = reap(false);
    while (!gone && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      gone = reap(false);
    }
    if (!gone) {
      ::kill(pid_, SIGKILL);
      reap(true);
    }
    pid_ = -1;
  }

  int port() const { return port_; }
  std::string url() const { return "smtp://127.0.0.1:" + std::to_string(port_); }

  // The messages taken (250) and refused (--fail-first), in arrival order.
  // Each file is whole once its .json exists: the server writes that last.
  std::vector<ReceivedMail> accepted() const { return read("msg-"); }
  std::vector<ReceivedMail> rejected() const { return read("rejected-"); }

 private:
  SmtpSink() = default;

  static Error cannot_start(const std::string& python, const std::string& why) {
    return Error{"smtp_sink_unavailable", 503,
                 "cannot start the SMTP test server (\"" + python + " tests/support/smtp_sink.py\"): " + why +
                     ". It needs python3 with aiosmtpd: install Debian's python3-aiosmtpd (scripts/install-deps.sh "
                     "does), or point CUBEPLANE_TEST_PYTHON at an interpreter that has it.",
                 "无法启动 SMTP 测试服务器：" + why + "。需要带 aiosmtpd 的 python3：请安装 python3-aiosmtpd"
                     "（scripts/install-deps.sh），或用 CUBEPLANE_TEST_PYTHON 指定解释器。",
                 {}};
  }

  bool reap(bool block) {
    int status = 0;
    while (true) {
      const pid_t r = ::waitpid(pid_, &status, block ? 0 : WNOHANG);
      if (r == pid_) return true;
      if (r == 0) return false;
      if (errno == EINTR) continue;
      return true;  // ECHILD
    }
  }

  std::vector<ReceivedMail> read(const std::string& prefix) const {
    namespace fs = std::filesystem;
    std::vector<ReceivedMail> out;
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(dir_ / "mail", ec)) {
      const std::string file = entry.path().filename().string();
      if (!file.starts_with(prefix) || !file.ends_with(".json")) continue;
      ReceivedMail m;
      m.name = file.substr(0, file.size() - 5);
      m.raw = slurp(dir_ / "mail" / (m.name + ".eml"));
      auto parsed = parse_json(slurp(entry.path()));
      EXPECT_TRUE(parsed.ok() && parsed->is_object()) << "unreadable " << entry.path();
      if (parsed.ok() && parsed->is_object()) m.parsed = parsed->as_object();
      out.push_back(std::move(m));
    }
    std::sort(out.begin(), out.end(), [](const ReceivedMail& a, const ReceivedMail& b) {
      return a.name.substr(a.name.find('-')) < b.name.substr(b.name.find('-'));
    });
    return out;
  }

  static std::string slurp(const std::filesystem::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }

  pid_t pid_ = -1;
  int stdin_fd_ = -1;  // closing it ends the server
  int port_ = 0;
  std::filesystem::path dir_;
};

}  // namespace cp::testing_smtp
