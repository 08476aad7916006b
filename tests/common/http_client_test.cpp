#include "common/http_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <thread>

namespace cp {
namespace {

// A server that takes connections (the kernel's backlog) and never answers.
class SilentServer {
 public:
  SilentServer() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    EXPECT_EQ(::listen(fd_, 8), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
  }
  ~SilentServer() { ::close(fd_); }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/"; }

 private:
  int fd_ = -1;
  int port_ = 0;
};

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1;
}

// A wake descriptor that becomes ready has should_abort asked at once, not
// at the next abort_check_ms (a minute here): the agent's pidfds make an
// exit cut a long-poll short.
TEST(HttpClient, AReadyWakeDescriptorAsksShouldAbortAtOnce) {
  SilentServer server;
  int pipe_fds[2];
  ASSERT_EQ(::pipe(pipe_fds), 0);
  HttpClient http;
  HttpRequestOptions opts;
  opts.timeout_ms = 120'000;
  opts.abort_check_ms = 60'000;
  opts.wake_fds = {pipe_fds[0]};
  int asked = 0;
  opts.should_abort = [&] {
    ++asked;
    return readable(pipe_fds[0]);
  };
  std::thread poke([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    char c = 1;
    EXPECT_EQ(::write(pipe_fds[1], &c, 1), 1);
  });
  const auto start = std::chrono::steady_clock::now();
  auto r = http.request("POST", server.url(), "{}", "application/json", opts);
  const auto took = std::chrono::steady_clock::now() - start;
  poke.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "aborted");
  EXPECT_LT(took, std::chrono::seconds(30)) << "woken by the descriptor, not by abort_check_ms";
  EXPECT_GE(asked, 1);
  ::close(pipe_fds[0]);
  ::close(pipe_fds[1]);
}

// A transport failure says whether the request may have left: not when no
// connection was made (a POST may then go to another server), yes when it
// was sent and the answer timed out (the server may have done it).
TEST(HttpClient, AFailureSaysWhetherTheRequestMayHaveBeenSent) {
  HttpClient http;
  HttpRequestOptions opts;
  opts.timeout_ms = 300;
  {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);  // bound, not listening: refused
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    auto r = http.request("POST", "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)) + "/x", "{}",
                          "application/json", opts);
    ::close(fd);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, "unreachable");
    EXPECT_EQ(r.error().details.at("request_sent"), false);
  }
  {
    auto r = http.request("POST", "http://no-such-host.invalid/x", "{}", "application/json", opts);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().details.at("request_sent"), false) << r.error().message;
  }
  {
    SilentServer server;
    auto r = http.request("POST", server.url(), "{}", "application/json", opts);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, "unreachable");
    EXPECT_EQ(r.error().details.at("request_sent"), true) << r.error().message;
  }
}

}  // namespace
}  // namespace cp
