// Helpers for the HTTP tests: a server on 127.0.0.1:0 that stops with the
// test, a raw socket client for what libcurl hides (headers, keep-alive,
// half-sent requests), and polling with a deadline instead of sleeps.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "http/server.h"

namespace cp::http::testing {

// Polls `pred` until it holds or `timeout` passes (then returns false).
inline bool eventually(const std::function<bool()>& pred,
                       std::chrono::milliseconds timeout = std::chrono::seconds(10)) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  return pred();
}

// A started server; stopped and joined when destroyed.
struct TestServer {
  explicit TestServer(Router& router, HttpLimits limits = {}, Metrics* metrics = nullptr, int threads = 2)
      : server(std::make_unique<HttpServer>(router, limits, metrics)) {
    auto port_or = server->listen("127.0.0.1:0");
    if (!port_or.ok()) throw std::runtime_error(port_or.error().to_string());
    port = *port_or;
    server->run(threads);
  }
  ~TestServer() { server->stop(); }
  std::string url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port) + path; }

  std::unique_ptr<HttpServer> server;
  unsigned short port = 0;
};

// A blocking TCP client with a receive timeout, for raw HTTP.
class RawClient {
 public:
  explicit RawClient(unsigned short port, int recv_timeout_ms = 10000) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    timeval tv{recv_timeout_ms / 1000, (recv_timeout_ms % 1000) * 1000};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  }
  ~RawClient() {
    if (fd_ >= 0) ::close(fd_);
  }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  bool send(const std::string& data) {
    std::size_t off = 0;
    while (off < data.size()) {
      auto n = ::send(fd_, data.data() + off, data.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<std::size_t>(n);
    }
    return true;
  }
  // Reads until the peer closes (or the timeout); returns everything read.
  std::string read_all() {
    std::string out;
    char buf[4096];
    for (;;) {
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) break;
      out.append(buf, static_cast<std::size_t>(n));
    }
    return out;
  }
  // True when the peer closed the connection (recv returned 0) within the timeout.
  bool closed_by_peer() {
    char buf[4096];
    for (;;) {
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n == 0) return true;
      if (n < 0) return errno == ECONNRESET;
    }
  }
  // Reads one response with a Content-Length body (no chunked support).
  std::string read_response() {
    std::string out = std::move(rest_);
    rest_.clear();
    char buf[4096];
    std::size_t need = std::string::npos;
    for (;;) {
      auto hdr_end = out.find("\r\n\r\n");
      if (hdr_end != std::string::npos && need == std::string::npos) {
        auto headers = out.substr(0, hdr_end);
        std::size_t len = 0;
        auto p = find_header(headers, "content-length");
        if (p != std::string::npos) len = std::stoul(headers.substr(p));
        need = hdr_end + 4 + len;
      }
      if (need != std::string::npos && out.size() >= need) {
        rest_ = out.substr(need);
        out.resize(need);
        return out;
      }
      auto n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return out;
      out.append(buf, static_cast<std::size_t>(n));
    }
  }

  // Position of the value of header `name` (lower case) in `headers`, or npos.
  static std::size_t find_header(const std::string& headers, const std::string& name) {
    std::string lower;
    for (char c : headers) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto p = lower.find("\r\n" + name + ":");
    if (p == std::string::npos) return p;
    p += name.size() + 3;
    while (p < headers.size() && headers[p] == ' ') ++p;
    return p;
  }
  static std::string header_value(const std::string& response, const std::string& name) {
    auto end = response.find("\r\n\r\n");
    auto headers = response.substr(0, end);
    auto p = find_header(headers, name);
    if (p == std::string::npos) return "";
    auto e = headers.find("\r\n", p);
    return headers.substr(p, e == std::string::npos ? std::string::npos : e - p);
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  std::string rest_;
};

}  // namespace cp::http::testing
