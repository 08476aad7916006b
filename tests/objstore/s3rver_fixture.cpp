#include "s3rver_fixture.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/http_client.h"

extern char** environ;

namespace cp::testing_objstore {
namespace fs = std::filesystem;
namespace {

using Clock = std::chrono::steady_clock;
constexpr auto kStartDeadline = std::chrono::seconds(30);
constexpr auto kStopDeadline = std::chrono::seconds(5);

Error cannot_start(const std::string& why) {
  return Error{"s3rver_unavailable", 503,
               "cannot start s3rver for the S3 object store tests: " + why +
                   ". Run scripts/install-npm-deps.sh (needs node and npm), or set CUBEPLANE_TEST_S3=off to skip "
                   "the S3 tests on purpose.",
               "无法启动 s3rver：" + why +
                   "。请运行 scripts/install-npm-deps.sh，或设置 CUBEPLANE_TEST_S3=off 跳过 S3 测试。",
               {}};
}

// A child that is gone is reaped; returns true once it has exited.
bool reap(pid_t pid, bool block) {
  int status = 0;
  while (true) {
    pid_t r = ::waitpid(pid, &status, block ? 0 : WNOHANG);
    if (r == pid) return true;
    if (r == 0) return false;
    if (errno == EINTR) continue;
    return true;  // ECHILD: not ours any more
  }
}

}  // namespace

bool s3_tests_off() {
  const char* v = std::getenv("CUBEPLANE_TEST_S3");
  return v != nullptr && std::string(v) == "off";
}

Result<std::unique_ptr<S3rverProcess>> S3rverProcess::start() {
  const fs::path tools = fs::path(CUBEPLANE_SOURCE_DIR) / "tools" / "s3rver";
  const fs::path script = tools / "s3rver-sigv4.js";
  if (!fs::exists(tools / "node_modules" / "s3rver" / "package.json")) {
    return cannot_start("the s3rver package is not installed in " + (tools / "node_modules").string());
  }
  const char* node_env = std::getenv("CUBEPLANE_NODE");
  const std::string node = node_env && *node_env ? node_env : "node";

  std::unique_ptr<S3rverProcess> p(new S3rverProcess());
  std::string pattern = (fs::path(::testing::TempDir()) / "cp-s3rver-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return cannot_start(std::string("mkdtemp: ") + std::strerror(errno));
  p->dir_ = pattern;

  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) return cannot_start(std::string("pipe: ") + std::strerror(errno));
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    return cannot_start(std::string("pipe: ") + std::strerror(errno));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, in[0], 0);
  posix_spawn_file_actions_adddup2(&actions, out[1], 1);
  std::vector<std::string> args{node,          script.string(), "--directory",        (p->dir_ / "data").string(),
                                "--address",   "127.0.0.1",     "--port",             "0",
                                "--configure-bucket", kS3rverBucket, "--service-endpoint", "localhost"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = -1;
  int rc = ::posix_spawnp(&pid, node.c_str(), &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(in[0]);
  ::close(out[1]);
  if (rc != 0) {
    ::close(in[1]);
    ::close(out[0]);
    return cannot_start("cannot run \"" + node + "\": " + std::strerror(rc));
  }
  p->pid_ = pid;
  p->stdin_fd_ = in[1];

  // The front prints "S3rver listening on 127.0.0.1:<port>" once it listens.
  const auto deadline = Clock::now() + kStartDeadline;
  std::string printed;
  while (p->port_ == 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) break;
    pollfd pfd{out[0], POLLIN, 0};
    int n = ::poll(&pfd, 1, static_cast<int>(left));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    char buf[512];
    ssize_t got = ::read(out[0], buf, sizeof buf);
    if (got <= 0) break;  // exited
    printed.append(buf, static_cast<std::size_t>(got));
    auto at = printed.find("listening on ");
    auto eol = printed.find('\n', at == std::string::npos ? 0 : at);
    if (at != std::string::npos && eol != std::string::npos) {
      std::string addr = printed.substr(at + 13, eol - at - 13);
      p->port_ = std::atoi(addr.substr(addr.rfind(':') + 1).c_str());
    }
  }
  ::close(out[0]);  // nothing more is printed
  if (p->port_ == 0) {
    return cannot_start("\"" + node + " " + script.string() + "\" did not report a port within 30 s" +
                        (printed.empty() ? "" : " (printed: " + printed + ")"));
  }

  // Listening is not answering: ask until it does, within the deadline.
  HttpClient http;
  while (true) {
    HttpRequestOptions opts;
    opts.timeout_ms = 2000;
    auto r = http.request("GET", p->endpoint() + "/__cubeplane/requests", "", "text/plain", opts);
    if (r.ok() && r->status == 200) break;
    if (Clock::now() > deadline) return cannot_start("s3rver on " + p->endpoint() + " did not answer within 30 s");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return p;
}

S3rverProcess::~S3rverProcess() { stop(); }

void S3rverProcess::stop() {
  if (stdin_fd_ >= 0) {
    ::close(stdin_fd_);  // the server exits when its stdin closes
    stdin_fd_ = -1;
  }
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    const auto deadline = Clock::now() + kStopDeadline;
    bool gone = reap(pid_, false);
    while (!gone && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      gone = reap(pid_, false);
    }
    if (!gone) {
      ::kill(pid_, SIGKILL);
      reap(pid_, true);
    }
    pid_ = -1;
  }
  if (!dir_.empty()) {
    std::error_code ec;
    fs::remove_all(dir_, ec);
    dir_.clear();
  }
}

void S3rverProcess::fail_next(const std::string& method, const std::string& match, int status, int times) {
  HttpClient http;
  auto r = http.request("POST",
                        endpoint() + "/__cubeplane/fail?method=" + url_encode(method) + "&match=" + url_encode(match) +
                            "&status=" + std::to_string(status) + "&times=" + std::to_string(times),
                        "", "text/plain");
  ASSERT_TRUE(r.ok() && r->status == 204) << "cannot set a fault on the s3rver front";
}

std::string S3rverProcess::requests() const {
  HttpClient http;
  auto r = http.request("GET", endpoint() + "/__cubeplane/requests", "", "text/plain");
  EXPECT_TRUE(r.ok() && r->status == 200) << "cannot read the s3rver front's request log";
  return r.ok() ? r->body : "";
}

namespace {

std::mutex shared_mu;
std::unique_ptr<S3rverProcess> shared_server;
std::optional<Error> shared_error;

// Stops the shared server when the tests are done.
class StopSharedServer : public ::testing::Environment {
 public:
  void TearDown() override {
    std::lock_guard<std::mutex> lock(shared_mu);
    shared_server.reset();
  }
};
[[maybe_unused]] ::testing::Environment* const stop_shared_server =
    ::testing::AddGlobalTestEnvironment(new StopSharedServer);

}  // namespace

Result<S3rverProcess*> shared_s3rver() {
  std::lock_guard<std::mutex> lock(shared_mu);
  if (shared_server) return shared_server.get();
  if (shared_error) return *shared_error;  // tried once already: do not wait 30 s per test
  auto started = S3rverProcess::start();
  if (!started.ok()) {
    shared_error = started.error();
    return started.error();
  }
  shared_server = std::move(started).value();
  return shared_server.get();
}

}  // namespace cp::testing_objstore
