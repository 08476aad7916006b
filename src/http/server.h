// The HTTP/1.1 server (Boost.Beast on an asio::io_context with C++20
// coroutines). This header does not include Beast or Asio: everything of the
// wire protocol lives in server.cpp.
//
// One coroutine per connection, each on its own strand:
//
//   accept ─> read header (timeout, 431) ─> [100-continue] ─> read body (413)
//         ─> router.handle(req)    synchronous; may block on the store
//         ─> Deferred: wait for wake / deadline, poll, answer
//         ─> Stream:   chunk, wait for wake / short timer, chunk, ..., last chunk
//         ─> write (Content-Length, X-Request-Id) ─> keep-alive? read again : close
//
// stop() closes the acceptor, cancels idle reads and deferred/stream waits
// (a waiting long-poll answers with poll(true), a stream ends cleanly),
// waits for connections to finish (bounded by HttpLimits::drain_ms) and
// joins the I/O threads. The HttpServer must be destroyed before the
// ControlPlane whose Signals its waits subscribe to.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/result.h"
#include "http/metrics.h"
#include "http/router.h"

namespace cp::http {

struct HttpLimits {
  std::size_t body_max = 1 << 20;          // 413 beyond
  std::size_t header_max = 16 * 1024;      // 431 beyond
  std::int64_t read_timeout_ms = 30'000;   // a request (or an idle keep-alive) slower than this is closed
  std::int64_t write_timeout_ms = 30'000;  // per write
  std::size_t max_connections = 1024;      // further connections are answered 503 and closed
  std::int64_t drain_ms = 5'000;           // stop(): how long connections get to finish
};

class HttpServer {
 public:
  // `metrics` may be null. Both must outlive the server.
  HttpServer(Router& router, HttpLimits limits = {}, Metrics* metrics = nullptr);
  ~HttpServer();  // stop()s
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // "127.0.0.1:0", ":8080" (all interfaces), "[::1]:8080", "localhost:8080".
  // Returns the bound port (useful with port 0). Call once, before run().
  Result<unsigned short> listen(const std::string& address);
  // Starts `threads` I/O threads and returns.
  void run(int threads);
  // Blocks until stop() has finished (from another thread).
  void wait();
  // Idempotent; must not be called from an I/O thread (a handler).
  void stop();
  unsigned short port() const;
  // Connections open right now.
  std::size_t connections() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace cp::http
