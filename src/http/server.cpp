// The only translation unit that includes Boost.Beast/Asio (they are slow to
// compile; keep it that way).
#include "http/server.h"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>

#include <sys/socket.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/ids.h"
#include "common/log.h"

namespace cp::http {
namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = boost::beast::http;
using tcp = asio::ip::tcp;
using SteadyClock = std::chrono::steady_clock;
constexpr auto kTuple = asio::as_tuple(asio::use_awaitable);

std::chrono::milliseconds ms(std::int64_t v) { return std::chrono::milliseconds(std::max<std::int64_t>(v, 0)); }

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// A client-supplied request id is kept when it is short and tame (so it can
// be logged and echoed safely); otherwise the server makes one.
bool acceptable_request_id(std::string_view id) {
  if (id.empty() || id.size() > 64) return false;
  return std::all_of(id.begin(), id.end(), [](unsigned char c) {
    return std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == ':';
  });
}

// One accepted connection. Everything here is touched only on the
// connection's strand (the coroutine runs there, and stop() and wake-ups
// post there).
struct Connection {
  explicit Connection(tcp::socket s) : stream(std::move(s)), timer(stream.get_executor()) {}
  beast::tcp_stream stream;
  asio::steady_timer timer;  // deferred and stream waits
  bool reading = false;      // a socket read is pending: stop() cancels it
  bool stopping = false;     // the server is stopping
  bool woken = false;        // a Signal fired since the last poll
  std::string remote;
  std::uint64_t id = 0;
};

// A follower that went away (closed its end) is noticed only by the next
// write; a stream that has nothing to write would otherwise poll for hours.
// A peek that reads EOF without consuming anything tells us earlier.
bool peer_closed(Connection& c) {
  char byte;
  auto n = ::recv(c.stream.socket().native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  if (n == 0) return true;
  if (n < 0) return !(errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR);
  return false;
}

// Subscribes a connection to a Signal for the duration of a wait. Signal
// may call a callback after unsubscribe() returned (it calls a copy outside
// its lock), so the callback checks `active` under a mutex that the
// destructor also takes: once the destructor has run, no post can happen.
class WakeSubscription {
 public:
  WakeSubscription(Signal* signal, const std::shared_ptr<Connection>& c) : signal_(signal) {
    if (signal_ == nullptr) return;
    std::weak_ptr<Connection> weak = c;
    auto gate = gate_;
    id_ = signal_->subscribe([gate, weak] {
      std::lock_guard lock(gate->mu);
      if (!gate->active) return;
      auto conn = weak.lock();
      if (!conn) return;
      asio::post(conn->stream.get_executor(), [conn] {
        conn->woken = true;
        conn->timer.cancel();
      });
    });
  }
  ~WakeSubscription() {
    if (signal_ == nullptr) return;
    {
      std::lock_guard lock(gate_->mu);
      gate_->active = false;
    }
    signal_->unsubscribe(id_);
  }
  WakeSubscription(const WakeSubscription&) = delete;
  WakeSubscription& operator=(const WakeSubscription&) = delete;

 private:
  struct Gate {
    std::mutex mu;
    bool active = true;
  };
  Signal* signal_;
  std::shared_ptr<Gate> gate_ = std::make_shared<Gate>();
  std::uint64_t id_ = 0;
};

}  // namespace

struct HttpServer::Impl {
  Impl(Router& r, HttpLimits l, Metrics* m) : router(r), limits(l), metrics(m) {}

  Router& router;
  HttpLimits limits;
  Metrics* metrics;

  std::unique_ptr<asio::io_context> ioc = std::make_unique<asio::io_context>();
  std::unique_ptr<tcp::acceptor> acceptor;
  unsigned short bound_port = 0;

  std::vector<std::thread> threads;
  std::atomic<bool> stopping{false};

  mutable std::mutex mu;  // guards conns, active, stopped
  std::condition_variable cv;
  std::map<std::uint64_t, std::weak_ptr<Connection>> conns;
  std::uint64_t next_conn_id = 0;
  std::size_t active = 0;  // session coroutines alive
  bool stopped = false;
  std::once_flag stop_once;

  ~Impl() {
    // Coroutine frames still suspended (only after a drain timeout) are
    // destroyed with the io_context; they reference this Impl, so it goes
    // first, the acceptor before it.
    acceptor.reset();
    ioc.reset();
  }

  // ------------------------------------------------------------ accept
  asio::awaitable<void> accept_loop() {
    for (;;) {
      tcp::socket socket(asio::make_strand(*ioc));
      auto [ec] = co_await acceptor->async_accept(socket, kTuple);
      if (ec) {
        if (ec == asio::error::operation_aborted || !acceptor->is_open() || stopping) co_return;
        // EMFILE and friends: back off a little instead of spinning.
        spdlog::warn("http: accept failed: {}", ec.message());
        asio::steady_timer t(co_await asio::this_coro::executor);
        t.expires_after(std::chrono::milliseconds(50));
        co_await t.async_wait(kTuple);
        continue;
      }
      std::shared_ptr<Connection> c;
      {
        std::lock_guard lock(mu);
        if (active >= limits.max_connections) {
          refuse(socket);
          continue;
        }
        c = std::make_shared<Connection>(std::move(socket));
        c->id = ++next_conn_id;
        conns.emplace(c->id, c);
        ++active;
      }
      // Registered before this check and stop() sets the flag before it
      // walks `conns`: a connection accepted during stop() is either
      // cancelled by stop() or closed here.
      if (stopping) {
        beast::error_code ignored;
        c->stream.socket().close(ignored);
      }
      beast::error_code ep_ec;
      auto ep = c->stream.socket().remote_endpoint(ep_ec);
      if (!ep_ec) c->remote = ep.address().to_string() + ":" + std::to_string(ep.port());
      asio::co_spawn(c->stream.get_executor(), session(c), [](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          spdlog::error("http: connection failed: {}", ex.what());
        } catch (...) {
          spdlog::error("http: connection failed");
        }
      });
    }
  }

  // Over max_connections: a best-effort 503 on a fresh socket (its send
  // buffer is empty, so a non-blocking write goes through), then close.
  void refuse(tcp::socket& socket) {
    static const std::string body =
        R"({"error":{"code":"unavailable","message":"too many connections","details":{}}})";
    static const std::string msg = "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                   "Content-Length: " +
                                   std::to_string(body.size()) + "\r\nConnection: close\r\nRetry-After: 1\r\n\r\n" +
                                   body;
    beast::error_code ec;
    socket.non_blocking(true, ec);
    socket.write_some(asio::buffer(msg), ec);
    socket.shutdown(tcp::socket::shutdown_both, ec);
    socket.close(ec);
  }

  // ----------------------------------------------------------- session
  struct SessionGuard {
    Impl* impl;
    std::uint64_t id;
    ~SessionGuard() {
      std::lock_guard lock(impl->mu);
      impl->conns.erase(id);
      --impl->active;
      impl->cv.notify_all();
    }
  };

  asio::awaitable<void> session(std::shared_ptr<Connection> c) {
    SessionGuard guard{this, c->id};
    beast::flat_buffer buffer;
    for (;;) {
      bhttp::request_parser<bhttp::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(std::min<std::size_t>(limits.header_max, UINT32_MAX)));
      parser.body_limit(limits.body_max);

      if (c->stopping || stopping) break;
      c->reading = true;
      c->stream.expires_after(ms(limits.read_timeout_ms));
      auto [ec, n] = co_await bhttp::async_read_header(c->stream, buffer, parser, kTuple);
      c->reading = false;
      if (!ec && parser.get()[bhttp::field::expect] == "100-continue" && !parser.is_done()) {
        bhttp::response<bhttp::empty_body> cont{bhttp::status::continue_, 11};
        cont.set(bhttp::field::server, "cubeplane");
        c->stream.expires_after(ms(limits.write_timeout_ms));
        auto [wec, wn] = co_await bhttp::async_write(c->stream, cont, kTuple);
        ec = wec;
      }
      if (!ec && !parser.is_done()) {
        if (c->stopping) break;
        c->reading = true;
        c->stream.expires_after(ms(limits.read_timeout_ms));
        auto [rec, rn] = co_await bhttp::async_read(c->stream, buffer, parser, kTuple);
        c->reading = false;
        ec = rec;
      }
      const auto started = SteadyClock::now();
      if (ec) {
        // GCC 12 destroys temporaries inside a co_await expression twice:
        // every argument below is a named local, never a temporary.
        std::optional<Error> refusal;
        if (ec == bhttp::error::body_limit) {
          refusal = errors::too_large("request body is larger than " + std::to_string(limits.body_max) + " bytes",
                                      "请求体超过 " + std::to_string(limits.body_max) + " 字节");
        } else if (ec == bhttp::error::header_limit) {
          refusal = Error{"header_too_large", 431,
                          "request headers are larger than " + std::to_string(limits.header_max) + " bytes",
                          "请求头超过 " + std::to_string(limits.header_max) + " 字节", {}};
        } else if (ec.category() == bhttp::make_error_code(bhttp::error::bad_target).category() &&
                   ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message) {
          // A parse error (bad method, bad chunk, ...): the stream cannot be
          // resynchronized, so answer and close.
          refusal = errors::invalid("", "malformed HTTP request: " + ec.message(),
                                    "HTTP 请求格式错误：" + ec.message());
        }
        if (refusal) co_await reject(c, *refusal, parser);
        // end_of_stream, timeout, reset, cancelled by stop(): just close.
        break;
      }

      auto& breq = parser.get();
      Request req;
      req.method = std::string(breq.method_string());
      std::transform(req.method.begin(), req.method.end(), req.method.begin(),
                     [](unsigned char ch) { return std::toupper(ch); });
      req.target = std::string(breq.target());
      for (const auto& f : breq) {
        auto name = lower(f.name_string());
        auto& slot = req.headers[name];
        if (!slot.empty()) slot += ", ";
        slot += f.value();
      }
      req.body = std::move(breq.body());
      req.remote_addr = c->remote;
      auto supplied_id = req.header("x-request-id");
      req.request_id = acceptable_request_id(supplied_id) ? supplied_id
                                                          : new_id("req", SystemClock::instance().now_ms());
      const bool head = req.method == "HEAD";
      bool keep_alive = breq.keep_alive();

      Response resp;
      if (!parse_target(req)) {
        resp = error_response(errors::invalid("", "malformed request target", "请求路径格式错误"), req);
        keep_alive = false;
      } else {
        resp = router.handle(req);
      }
      if (resp.deferred) {
        auto deferred = resp.deferred;
        resp = co_await wait_deferred(c, *deferred, req);
      }
      if (c->stopping || stopping) keep_alive = false;

      // A plain answer is recorded before it is written, so that a client
      // that got its answer finds it counted (tests, scrapes right after);
      // a stream is recorded when it ends.
      const int status = resp.status;
      const bool streaming = resp.stream && !head;
      auto record = [&] {
        const double seconds = std::chrono::duration<double>(SteadyClock::now() - started).count();
        if (metrics != nullptr) metrics->observe_request(req.route, req.method, status, seconds);
        spdlog::debug("http {} {} {} -> {} in {:.1f} ms [{}]", c->remote, req.method, req.target, status,
                      seconds * 1000, req.request_id);
      };
      bool ok;
      if (streaming) {
        ok = co_await write_stream(c, req, resp, keep_alive);
        record();
      } else {
        record();
        ok = co_await write_response(c, req, resp, keep_alive, head);
      }
      if (!ok || !keep_alive) break;
    }
    beast::error_code ignored;
    c->stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
    c->stream.socket().close(ignored);
  }

  template <class Body>
  void set_common_headers(bhttp::response<Body>& res, const Request& req, const Response& resp, bool keep_alive) {
    res.set(bhttp::field::server, "cubeplane");
    if (!resp.content_type.empty()) res.set(bhttp::field::content_type, resp.content_type);
    if (!req.request_id.empty()) res.set("X-Request-Id", req.request_id);
    for (const auto& [k, v] : resp.headers) res.insert(k, v);
    res.keep_alive(keep_alive);
  }

  // Coroutine parameters are references to the caller's locals, which
  // outlive the call (each is awaited at once).
  asio::awaitable<bool> write_response(const std::shared_ptr<Connection>& c, const Request& req, Response& resp,
                                       bool keep_alive, bool head) {
    const auto status = static_cast<bhttp::status>(resp.status);
    c->stream.expires_after(ms(limits.write_timeout_ms));
    if (head) {
      bhttp::response<bhttp::empty_body> res{status, 11};
      set_common_headers(res, req, resp, keep_alive);
      if (!resp.stream) res.content_length(resp.body.size());
      auto [ec, n] = co_await bhttp::async_write(c->stream, res, kTuple);
      co_return !ec;
    }
    bhttp::response<bhttp::string_body> res{status, 11};
    set_common_headers(res, req, resp, keep_alive);
    res.body() = std::move(resp.body);
    res.prepare_payload();
    auto [ec, n] = co_await bhttp::async_write(c->stream, res, kTuple);
    co_return !ec;
  }

  // Answers a request that could not be read whole (413, 431, 400), then
  // closes gracefully: the client may still be sending the body, and
  // closing with unread data makes the kernel send a reset that can destroy
  // the answer before the client reads it. So: answer, shut down our side,
  // and drain what the client sends for a moment.
  asio::awaitable<void> reject(const std::shared_ptr<Connection>& c, const Error& error,
                               bhttp::request_parser<bhttp::string_body>& parser) {
    // Fields are stored as they are parsed, so the language is known even
    // when the header as a whole was refused.
    std::string lang(parser.get()[bhttp::field::accept_language]);
    Request req;
    req.request_id = new_id("req", SystemClock::instance().now_ms());
    Response resp = error_response(error, lang);
    if (metrics != nullptr) {
      std::string method(parser.get().method_string());
      metrics->observe_request("", method.empty() ? "UNKNOWN" : method, resp.status, 0);
    }
    const bool written = co_await write_response(c, req, resp, false, false);
    if (!written) co_return;
    beast::error_code ec;
    c->stream.socket().shutdown(tcp::socket::shutdown_send, ec);
    std::vector<char> sink(64 * 1024);
    std::size_t drained = 0;
    c->stream.expires_after(std::chrono::seconds(2));
    while (drained < (64u << 20) && !c->stopping) {
      c->reading = true;
      auto [rec, n] = co_await c->stream.async_read_some(asio::buffer(sink), kTuple);
      c->reading = false;
      if (rec) break;
      drained += n;
    }
  }

  static std::optional<Response> call_poll(Deferred& d, bool final, const Request& req) {
    try {
      return d.poll(final);
    } catch (const std::exception& ex) {
      spdlog::error("http: long-poll of {} threw: {}", req.target, ex.what());
      return error_response(errors::internal(ex.what()), req);
    }
  }

  asio::awaitable<Response> wait_deferred(const std::shared_ptr<Connection>& c, Deferred& d, const Request& req) {
    if (!d.poll) co_return error_response(errors::internal("long-poll without poll function"), req);
    // Subscribed before the first poll: a notify between the handler's own
    // check and this point is caught by that poll; one after it wakes us.
    WakeSubscription sub(d.wake, c);
    const auto deadline = SteadyClock::now() + ms(d.max_wait_ms);
    for (;;) {
      c->woken = false;
      const bool final = c->stopping || stopping || SteadyClock::now() >= deadline;
      if (auto r = call_poll(d, final, req)) {
        if (r->deferred) co_return error_response(errors::internal("long-poll answered with a long-poll"), req);
        co_return std::move(*r);
      }
      if (final) co_return error_response(errors::internal("long-poll ended without an answer"), req);
      // Only suspension point: the wake post and stop() run between here
      // and the resumption, and both cancel this wait.
      c->timer.expires_at(deadline);
      co_await c->timer.async_wait(kTuple);
    }
  }

  asio::awaitable<bool> write_stream(const std::shared_ptr<Connection>& c, const Request& req, Response& resp,
                                     bool keep_alive) {
    Stream& s = *resp.stream;
    bhttp::response<bhttp::empty_body> res{static_cast<bhttp::status>(resp.status), 11};
    set_common_headers(res, req, resp, keep_alive);
    res.chunked(true);
    bhttp::response_serializer<bhttp::empty_body> sr{res};
    c->stream.expires_after(ms(limits.write_timeout_ms));
    {
      auto [ec, n] = co_await bhttp::async_write_header(c->stream, sr, kTuple);
      if (ec) co_return false;
    }
    if (!s.next) co_return false;
    WakeSubscription sub(s.wake, c);
    const auto deadline = SteadyClock::now() + ms(s.max_total_ms);
    for (;;) {
      c->woken = false;
      bool done = false;
      std::optional<std::string> piece;
      try {
        piece = s.next(done);
      } catch (const std::exception& ex) {
        spdlog::error("http: stream of {} threw: {}", req.target, ex.what());
        done = true;
      }
      if (piece && !piece->empty()) {
        c->stream.expires_after(ms(limits.write_timeout_ms));
        auto chunk = bhttp::make_chunk(asio::buffer(*piece));
        auto [ec, n] = co_await asio::async_write(c->stream, chunk, kTuple);
        if (ec) co_return false;
      }
      const auto now = SteadyClock::now();
      if (done || c->stopping || stopping || now >= deadline) break;
      if (!piece || piece->empty()) {
        if (peer_closed(*c)) co_return false;
        c->timer.expires_at(std::min(deadline, now + ms(std::max<std::int64_t>(s.poll_interval_ms, 1))));
        co_await c->timer.async_wait(kTuple);
      }
    }
    c->stream.expires_after(ms(limits.write_timeout_ms));
    auto last = bhttp::make_chunk_last();
    auto [ec, n] = co_await asio::async_write(c->stream, last, kTuple);
    co_return !ec;
  }

  // -------------------------------------------------------------- stop
  void stop() {
    std::call_once(stop_once, [this] {
      stopping = true;
      if (acceptor) {
        asio::post(acceptor->get_executor(), [this] {
          beast::error_code ec;
          acceptor->close(ec);
        });
      }
      {
        std::lock_guard lock(mu);
        for (auto& [id, weak] : conns) {
          auto c = weak.lock();
          if (!c) continue;
          asio::post(c->stream.get_executor(), [c] {
            c->stopping = true;
            c->timer.cancel();
            if (c->reading) c->stream.cancel();
          });
        }
      }
      if (!threads.empty()) {
        std::unique_lock lock(mu);
        cv.wait_for(lock, ms(limits.drain_ms), [this] { return active == 0; });
      }
      ioc->stop();
      for (auto& t : threads) {
        if (t.joinable()) t.join();
      }
      threads.clear();
      {
        std::lock_guard lock(mu);
        stopped = true;
      }
      cv.notify_all();
    });
  }
};

HttpServer::HttpServer(Router& router, HttpLimits limits, Metrics* metrics)
    : impl_(std::make_unique<Impl>(router, limits, metrics)) {}

HttpServer::~HttpServer() { stop(); }

Result<unsigned short> HttpServer::listen(const std::string& address) {
  // The process may write to sockets the peer closed; Asio already sends
  // with MSG_NOSIGNAL, this covers anything else (e.g. libraries) too.
  std::signal(SIGPIPE, SIG_IGN);

  std::string host;
  std::string port_text;
  if (!address.empty() && address.front() == '[') {
    auto close = address.find(']');
    if (close == std::string::npos || close + 1 >= address.size() || address[close + 1] != ':') {
      return errors::invalid("listen", "expected [ipv6]:port, got \"" + address + "\"",
                             "应为 [ipv6]:端口，实际为 \"" + address + "\"");
    }
    host = address.substr(1, close - 1);
    port_text = address.substr(close + 2);
  } else {
    auto colon = address.rfind(':');
    if (colon == std::string::npos) {
      return errors::invalid("listen", "expected host:port, got \"" + address + "\"",
                             "应为 主机:端口，实际为 \"" + address + "\"");
    }
    host = address.substr(0, colon);
    port_text = address.substr(colon + 1);
  }
  if (host.empty()) host = "0.0.0.0";
  unsigned long port_number = 0;
  if (port_text.empty() || port_text.size() > 5 ||
      !std::all_of(port_text.begin(), port_text.end(), [](unsigned char ch) { return std::isdigit(ch); }) ||
      (port_number = std::stoul(port_text)) > 65535) {
    return errors::invalid("listen", "invalid port \"" + port_text + "\"", "端口无效：\"" + port_text + "\"");
  }

  auto& impl = *impl_;
  beast::error_code ec;
  tcp::resolver resolver(*impl.ioc);
  auto results = resolver.resolve(host, port_text, tcp::resolver::passive, ec);
  if (ec || results.empty()) {
    return errors::invalid("listen", "cannot resolve \"" + host + "\": " + ec.message(),
                           "无法解析 \"" + host + "\"：" + ec.message());
  }
  tcp::endpoint endpoint = results.begin()->endpoint();
  auto acceptor = std::make_unique<tcp::acceptor>(asio::make_strand(*impl.ioc));
  auto fail = [&](const char* step) -> Error {
    return Error{"listen_failed", 503, std::string("cannot listen on ") + address + " (" + step + "): " + ec.message(),
                 std::string("无法监听 ") + address + "（" + step + "）：" + ec.message(),
                 {}};
  };
  acceptor->open(endpoint.protocol(), ec);
  if (ec) return fail("open");
  acceptor->set_option(asio::socket_base::reuse_address(true), ec);
  if (ec) return fail("reuse_address");
  acceptor->bind(endpoint, ec);
  if (ec) return fail("bind");
  acceptor->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return fail("listen");
  impl.bound_port = acceptor->local_endpoint(ec).port();
  if (ec) return fail("local_endpoint");
  impl.acceptor = std::move(acceptor);
  return impl.bound_port;
}

void HttpServer::run(int threads) {
  auto& impl = *impl_;
  CP_CHECK(impl.acceptor != nullptr, "HttpServer::run before a successful listen");
  CP_CHECK(impl.threads.empty(), "HttpServer::run called twice");
  asio::co_spawn(impl.acceptor->get_executor(), impl.accept_loop(), [](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      spdlog::error("http: accept loop failed: {}", ex.what());
    } catch (...) {
      spdlog::error("http: accept loop failed");
    }
  });
  for (int i = 0; i < std::max(threads, 1); ++i) {
    impl.threads.emplace_back([&impl] {
      for (;;) {
        try {
          impl.ioc->run();
          return;
        } catch (const std::exception& ex) {
          spdlog::error("http: I/O thread caught: {}", ex.what());
        }
      }
    });
  }
}

void HttpServer::wait() {
  std::unique_lock lock(impl_->mu);
  impl_->cv.wait(lock, [this] { return impl_->stopped; });
}

void HttpServer::stop() { impl_->stop(); }

unsigned short HttpServer::port() const { return impl_->bound_port; }

std::size_t HttpServer::connections() const {
  std::lock_guard lock(impl_->mu);
  return impl_->active;
}

}  // namespace cp::http
