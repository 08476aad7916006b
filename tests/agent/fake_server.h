// A tiny HTTP/1.1 server on 127.0.0.1, port 0, over plain POSIX sockets (the
// agent layer must not see Beast), answering with a handler per test. Enough
// HTTP for libcurl: keep-alive, Content-Length bodies. It can also play dead:
// in blackhole mode it reads requests and never answers them.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace cp::testing {

struct FakeRequest {
  std::string method;
  std::string path;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

struct FakeResponse {
  int status = 200;
  std::string body = "{}";
};

class FakeServer {
 public:
  using Handler = std::function<FakeResponse(const FakeRequest&)>;

  explicit FakeServer(Handler handler) : handler_(std::move(handler)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = 0;
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 64);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }

  ~FakeServer() {
    stopping_ = true;
    acceptor_.join();
    std::vector<std::thread> conns;
    {
      std::lock_guard lock(mu_);
      conns.swap(connections_);
    }
    for (auto& t : conns) t.join();
    ::close(listen_fd_);
  }
  FakeServer(const FakeServer&) = delete;
  FakeServer& operator=(const FakeServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  void set_blackhole(bool on) { blackhole_ = on; }
  bool stopping() const { return stopping_; }

 private:
  void accept_loop() {
    while (!stopping_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard lock(mu_);
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  }

  // Reads into buf until `pred(buf)` or the peer closes / we stop; false on either.
  bool read_more(int fd, std::string& buf) {
    char chunk[8192];
    while (!stopping_) {
      pollfd p{fd, POLLIN, 0};
      int rc = ::poll(&p, 1, 20);
      if (rc == 0) continue;
      if (rc < 0) return false;
      ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) return false;
      buf.append(chunk, static_cast<std::size_t>(n));
      return true;
    }
    return false;
  }

  void serve(int fd) {
    std::string buf;
    while (!stopping_) {
      std::size_t head_end;
      while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
        if (!read_more(fd, buf)) {
          ::close(fd);
          return;
        }
      }
      FakeRequest req;
      std::string head = buf.substr(0, head_end);
      std::size_t line_end = head.find("\r\n");
      std::string first = head.substr(0, line_end);
      auto sp1 = first.find(' ');
      auto sp2 = first.find(' ', sp1 + 1);
      req.method = first.substr(0, sp1);
      req.path = first.substr(sp1 + 1, sp2 - sp1 - 1);
      std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
      while (pos < head.size()) {
        auto e = head.find("\r\n", pos);
        if (e == std::string::npos) e = head.size();
        std::string line = head.substr(pos, e - pos);
        auto colon = line.find(':');
        if (colon != std::string::npos) {
          std::string name = line.substr(0, colon);
          std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
          std::string value = line.substr(colon + 1);
          while (!value.empty() && value.front() == ' ') value.erase(0, 1);
          req.headers[name] = value;
        }
        pos = e + 2;
      }
      std::size_t length = 0;
      if (auto it = req.headers.find("content-length"); it != req.headers.end()) length = std::stoul(it->second);
      buf.erase(0, head_end + 4);
      while (buf.size() < length) {
        if (!read_more(fd, buf)) {
          ::close(fd);
          return;
        }
      }
      req.body = buf.substr(0, length);
      buf.erase(0, length);

      if (blackhole_) {
        // Play dead: hold the request unanswered, then drop the connection.
        while (blackhole_ && !stopping_) std::this_thread::sleep_for(std::chrono::milliseconds(5));
        ::close(fd);
        return;
      }
      FakeResponse resp = handler_(req);
      std::string out = "HTTP/1.1 " + std::to_string(resp.status) + " X\r\nContent-Type: application/json\r\n" +
                        "Content-Length: " + std::to_string(resp.body.size()) + "\r\n\r\n" + resp.body;
      std::size_t sent = 0;
      while (sent < out.size()) {
        ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
        if (n <= 0) {
          ::close(fd);
          return;
        }
        sent += static_cast<std::size_t>(n);
      }
    }
    ::close(fd);
  }

  Handler handler_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> blackhole_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::vector<std::thread> connections_;
};

}  // namespace cp::testing
