#include "http/server.h"

#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>

#include "common/http_client.h"
#include "common/signal.h"
#include "http/metrics.h"
#include "test_util.h"

namespace cp::http {
namespace {

using testing::eventually;
using testing::RawClient;
using testing::TestServer;

Handler ok_handler(std::string text = "ok") {
  return [text](Request&) { return json_response(200, json::object{{"status", text}}); };
}

// A plain request gets a JSON answer with Content-Length and an X-Request-Id.
TEST(HttpServer, AnswersWithLengthAndRequestId) {
  Router router;
  router.add("GET", "/healthz", {}, ok_handler());
  TestServer ts(router);
  RawClient c(ts.port);
  ASSERT_TRUE(c.connected());
  ASSERT_TRUE(c.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto resp = c.read_response();
  EXPECT_TRUE(resp.starts_with("HTTP/1.1 200 OK\r\n")) << resp;
  EXPECT_EQ(RawClient::header_value(resp, "content-length"), "15");
  EXPECT_FALSE(RawClient::header_value(resp, "x-request-id").empty());
  EXPECT_TRUE(resp.ends_with(R"({"status":"ok"})"));
}

// A client-chosen request id is echoed back.
TEST(HttpServer, EchoesRequestId) {
  Router router;
  router.add("GET", "/healthz", {}, ok_handler());
  TestServer ts(router);
  RawClient c(ts.port);
  ASSERT_TRUE(c.send("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Request-Id: abc-123\r\n\r\n"));
  EXPECT_EQ(RawClient::header_value(c.read_response(), "x-request-id"), "abc-123");
}

// Keep-alive: two requests on one connection; Connection: close ends it.
TEST(HttpServer, KeepAliveThenClose) {
  Router router;
  router.add("GET", "/a", {}, ok_handler("a"));
  TestServer ts(router);
  RawClient c(ts.port);
  ASSERT_TRUE(c.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  auto first = c.read_response();
  EXPECT_TRUE(first.ends_with(R"({"status":"a"})")) << first;
  ASSERT_TRUE(c.send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  auto second = c.read_response();
  EXPECT_TRUE(second.starts_with("HTTP/1.1 200")) << second;
  EXPECT_EQ(RawClient::header_value(second, "connection"), "close");
  EXPECT_TRUE(c.closed_by_peer());
}

// HEAD answers the GET route's headers, Content-Length included, without a body.
TEST(HttpServer, HeadHasNoBody) {
  Router router;
  router.add("GET", "/a", {}, ok_handler("a"));
  TestServer ts(router);
  RawClient c(ts.port);
  ASSERT_TRUE(c.send("HEAD /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  auto all = c.read_all();
  EXPECT_TRUE(all.starts_with("HTTP/1.1 200")) << all;
  EXPECT_EQ(RawClient::header_value(all, "content-length"), "14");
  EXPECT_TRUE(all.ends_with("\r\n\r\n")) << all;
}

// A body over the limit is refused with 413 in the JSON error format.
TEST(HttpServer, BodyOverLimitIs413) {
  Router router;
  std::atomic<int> calls{0};
  router.add("POST", "/upload", {}, [&](Request&) {
    ++calls;
    return json_response(200, json::object{});
  });
  HttpLimits limits;
  limits.body_max = 1024;
  TestServer ts(router, limits);
  HttpClient client;
  auto ok = client.request("POST", ts.url("/upload"), std::string(1024, 'x'));
  ASSERT_TRUE(ok.ok()) << ok.error().to_string();
  EXPECT_EQ(ok->status, 200);
  auto big = client.request("POST", ts.url("/upload"), std::string(256 * 1024, 'x'));
  ASSERT_TRUE(big.ok()) << big.error().to_string();
  EXPECT_EQ(big->status, 413);
  auto body = json::parse(big->body);
  EXPECT_EQ(body.at("error").at("code"), "payload_too_large");
  EXPECT_EQ(calls.load(), 1);
}

// A chunked body over the limit is refused as well (no Content-Length to check up front).
TEST(HttpServer, ChunkedBodyOverLimitIs413) {
  Router router;
  router.add("POST", "/upload", {}, [](Request&) { return json_response(200, json::object{}); });
  HttpLimits limits;
  limits.body_max = 100;
  TestServer ts(router, limits);
  RawClient c(ts.port);
  std::string chunk(80, 'x');
  ASSERT_TRUE(c.send("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n50\r\n" + chunk +
                     "\r\n50\r\n" + chunk + "\r\n0\r\n\r\n"));
  auto resp = c.read_response();
  EXPECT_TRUE(resp.starts_with("HTTP/1.1 413")) << resp;
}

// Headers over the limit are refused with 431, message in the asked language.
TEST(HttpServer, HeadersOverLimitIs431) {
  Router router;
  router.add("GET", "/a", {}, ok_handler());
  HttpLimits limits;
  limits.header_max = 2048;
  TestServer ts(router, limits);
  HttpClient client;
  HttpRequestOptions opts;
  opts.headers["Accept-Language"] = "zh-CN";
  opts.headers["X-Big"] = std::string(4096, 'a');
  auto r = client.request("GET", ts.url("/a"), "", "application/json", opts);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->status, 431);
  auto body = json::parse(r->body);
  EXPECT_EQ(body.at("error").at("code"), "header_too_large");
  EXPECT_NE(std::string(body.at("error").at("message").as_string()).find("请求头"), std::string::npos);
}

// A malformed request line is answered 400 and the connection closed.
TEST(HttpServer, MalformedRequestIs400) {
  Router router;
  TestServer ts(router);
  RawClient c(ts.port);
  ASSERT_TRUE(c.send("GET /a HTTP/9\r\n\r\n"));
  auto all = c.read_all();
  EXPECT_TRUE(all.starts_with("HTTP/1.1 400")) << all;
}

// A client that stops mid-request is disconnected after the read timeout.
TEST(HttpServer, SlowRequestTimesOut) {
  Router router;
  HttpLimits limits;
  limits.read_timeout_ms = 100;
  TestServer ts(router, limits);
  RawClient c(ts.port);
  ASSERT_TRUE(c.send("GET /a HTTP/1.1\r\nHost: x\r\n"));
  EXPECT_TRUE(c.closed_by_peer());
}

// Beyond max_connections a new connection gets 503 and is closed.
TEST(HttpServer, RefusesConnectionsBeyondLimit) {
  Router router;
  router.add("GET", "/a", {}, ok_handler());
  HttpLimits limits;
  limits.max_connections = 1;
  TestServer ts(router, limits);
  RawClient first(ts.port);
  ASSERT_TRUE(eventually([&] { return ts.server->connections() == 1; }));
  RawClient second(ts.port);
  auto refused = second.read_all();
  EXPECT_TRUE(refused.starts_with("HTTP/1.1 503")) << refused;
  // The first connection still works.
  ASSERT_TRUE(first.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(first.read_response().starts_with("HTTP/1.1 200"));
}

// Expect: 100-continue gets its interim answer before the body is sent.
TEST(HttpServer, ExpectContinue) {
  Router router;
  router.add("POST", "/echo", {}, [](Request& req) { return text_response(200, req.body); });
  TestServer ts(router);
  RawClient c(ts.port);
  ASSERT_TRUE(c.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n"));
  // The interim answer has no body: read_response returns at its empty line.
  auto interim = c.read_response();
  EXPECT_TRUE(interim.starts_with("HTTP/1.1 100 Continue")) << interim;
  ASSERT_TRUE(c.send("hello"));
  auto resp = c.read_response();
  EXPECT_TRUE(resp.starts_with("HTTP/1.1 200")) << resp;
  EXPECT_TRUE(resp.ends_with("hello")) << resp;
}

// A long-poll whose Signal fires answers at once, long before its deadline.
TEST(HttpServer, DeferredReturnsEarlyOnSignal) {
  Router router;
  Signal signal;
  std::atomic<bool> ready{false};
  std::atomic<int> polls{0};
  router.add("POST", "/wait", {}, [&](Request&) {
    Response r;
    r.deferred = std::make_shared<Deferred>(Deferred{
        60'000, &signal, [&](bool final) -> std::optional<Response> {
          ++polls;
          if (ready) return json_response(200, json::object{{"answer", "woken"}});
          if (final) return json_response(200, json::object{{"answer", "deadline"}});
          return std::nullopt;
        }});
    return r;
  });
  TestServer ts(router);
  Result<HttpResponse> result = Error{};
  std::thread client([&] { result = HttpClient().request("POST", ts.url("/wait"), "{}"); });
  // The first poll happens after the subscription: from then on a notify is seen.
  ASSERT_TRUE(eventually([&] { return polls.load() >= 1; }));
  const auto start = std::chrono::steady_clock::now();
  ready = true;
  signal.notify();
  client.join();
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(json::parse(result->body).at("answer"), "woken");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// A long-poll with nothing to say answers with poll(true) at the deadline.
TEST(HttpServer, DeferredAnswersAtDeadline) {
  Router router;
  Signal signal;
  std::atomic<int> finals{0};
  router.add("GET", "/wait", {}, [&](Request&) {
    Response r;
    r.deferred = std::make_shared<Deferred>(Deferred{50, &signal, [&](bool final) -> std::optional<Response> {
                                                       if (!final) return std::nullopt;
                                                       ++finals;
                                                       return json_response(200, json::object{{"answer", "deadline"}});
                                                     }});
    return r;
  });
  TestServer ts(router);
  auto r = HttpClient().request("GET", ts.url("/wait"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(json::parse(r->body).at("answer"), "deadline");
  EXPECT_EQ(finals.load(), 1);
  // A spurious notify (nothing ready) just polls again and keeps waiting.
}

// Notifies that find nothing ready do not end the wait early.
TEST(HttpServer, DeferredIgnoresSpuriousWake) {
  Router router;
  Signal signal;
  std::atomic<int> polls{0};
  std::atomic<bool> answered_final{false};
  router.add("GET", "/wait", {}, [&](Request&) {
    Response r;
    r.deferred = std::make_shared<Deferred>(Deferred{1500, &signal, [&](bool final) -> std::optional<Response> {
                                                       ++polls;
                                                       if (!final) return std::nullopt;
                                                       answered_final = true;
                                                       return json_response(200, json::object{});
                                                     }});
    return r;
  });
  TestServer ts(router);
  std::thread client([&] { (void)HttpClient().request("GET", ts.url("/wait")); });
  ASSERT_TRUE(eventually([&] { return polls.load() >= 1; }));
  signal.notify();
  ASSERT_TRUE(eventually([&] { return polls.load() >= 2; }));
  EXPECT_FALSE(answered_final.load());
  client.join();
  EXPECT_TRUE(answered_final.load());
}

// stop() ends a waiting long-poll with its final answer, then returns.
TEST(HttpServer, StopEndsLongPoll) {
  Router router;
  Signal signal;
  std::atomic<int> polls{0};
  router.add("GET", "/wait", {}, [&](Request&) {
    Response r;
    r.deferred = std::make_shared<Deferred>(Deferred{600'000, &signal, [&](bool final) -> std::optional<Response> {
                                                       ++polls;
                                                       if (!final) return std::nullopt;
                                                       return json_response(200, json::object{{"answer", "final"}});
                                                     }});
    return r;
  });
  auto ts = std::make_unique<TestServer>(router);
  Result<HttpResponse> result = Error{};
  std::thread client([&] { result = HttpClient().request("GET", ts->url("/wait")); });
  ASSERT_TRUE(eventually([&] { return polls.load() >= 1; }));
  const auto start = std::chrono::steady_clock::now();
  ts->server->stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));  // well under the drain limit
  client.join();
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  EXPECT_EQ(json::parse(result->body).at("answer"), "final");
  ts.reset();
}

// A stream writes its pieces as chunks, in order, waking on the Signal.
TEST(HttpServer, StreamChunksArriveInOrder) {
  Router router;
  Signal signal;
  std::mutex mu;
  std::deque<std::string> pending;
  bool finished = false;
  std::atomic<int> nexts{0};
  router.add("GET", "/logs", {}, [&](Request&) {
    Response r;
    r.content_type = "text/plain";
    auto s = std::make_shared<Stream>();
    s->wake = &signal;
    s->poll_interval_ms = 60'000;  // only the Signal can move it along
    s->next = [&](bool& done) -> std::optional<std::string> {
      ++nexts;
      std::lock_guard lock(mu);
      if (!pending.empty()) {
        auto piece = pending.front();
        pending.pop_front();
        return piece;
      }
      done = finished;
      return std::nullopt;
    };
    r.stream = s;
    return r;
  });
  TestServer ts(router);
  std::vector<std::string> received;
  std::mutex rmu;
  std::thread producer([&] {
    for (int i = 0; i < 5; ++i) {
      // Each piece goes out only after the previous one was received, so
      // every piece is its own chunk and arrives through a wake-up.
      ASSERT_TRUE(eventually([&] {
        std::lock_guard lock(rmu);
        std::string all;
        for (auto& p : received) all += p;
        return all.size() >= static_cast<std::size_t>(i) * 6;
      }));
      {
        std::lock_guard lock(mu);
        pending.push_back("line" + std::to_string(i) + "\n");
      }
      signal.notify();
    }
    {
      std::lock_guard lock(mu);
      finished = true;
    }
    signal.notify();
  });
  HttpRequestOptions opts;
  opts.on_data = [&](std::string_view piece) {
    std::lock_guard lock(rmu);
    received.emplace_back(piece);
    return true;
  };
  auto r = HttpClient().request("GET", ts.url("/logs"), "", "application/json", opts);
  producer.join();
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->status, 200);
  std::string all;
  for (auto& p : received) all += p;
  EXPECT_EQ(all, "line0\nline1\nline2\nline3\nline4\n");
}

// A stream that outlives max_total_ms is ended cleanly.
TEST(HttpServer, StreamEndsAtMaxTotal) {
  Router router;
  router.add("GET", "/logs", {}, [](Request&) {
    Response r;
    r.content_type = "text/plain";
    auto s = std::make_shared<Stream>();
    s->max_total_ms = 100;
    s->poll_interval_ms = 10;
    auto first = std::make_shared<bool>(true);
    s->next = [first](bool&) -> std::optional<std::string> {
      if (*first) {
        *first = false;
        return std::string("hello\n");
      }
      return std::nullopt;
    };
    r.stream = s;
    return r;
  });
  TestServer ts(router);
  auto r = HttpClient().request("GET", ts.url("/logs"));
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(r->body, "hello\n");
}

// A follower that hangs up ends its stream long before max_total_ms.
TEST(HttpServer, StreamEndsWhenClientGoesAway) {
  Router router;
  std::atomic<int> nexts{0};
  router.add("GET", "/logs", {}, [&](Request&) {
    Response r;
    r.content_type = "text/plain";
    auto s = std::make_shared<Stream>();
    s->max_total_ms = 600'000;
    s->poll_interval_ms = 10;
    s->next = [&](bool&) -> std::optional<std::string> {
      if (nexts++ == 0) return std::string("first\n");
      return std::nullopt;
    };
    r.stream = s;
    return r;
  });
  TestServer ts(router);
  HttpRequestOptions opts;
  opts.on_data = [](std::string_view) { return false; };  // hang up after the first piece
  {
    HttpClient client;
    (void)client.request("GET", ts.url("/logs"), "", "application/json", opts);
  }
  EXPECT_TRUE(eventually([&] { return ts.server->connections() == 0; }));
}

// Requests are counted in the latency histogram by route pattern.
TEST(HttpServer, RecordsMetrics) {
  Router router;
  router.add("GET", "/api/v1/tasks/{id}", {}, ok_handler());
  Metrics metrics;
  TestServer ts(router, {}, &metrics);
  auto r = HttpClient().request("GET", ts.url("/api/v1/tasks/t-1"));
  ASSERT_TRUE(r.ok());
  auto r404 = HttpClient().request("GET", ts.url("/nope"));
  ASSERT_TRUE(r404.ok());
  EXPECT_EQ(r404->status, 404);
  auto text = metrics.serialize();
  EXPECT_NE(text.find("# TYPE cubeplane_http_request_duration_seconds histogram"), std::string::npos) << text;
  EXPECT_NE(text.find("cubeplane_http_request_duration_seconds_bucket{"), std::string::npos);
  EXPECT_NE(text.find("route=\"/api/v1/tasks/{id}\""), std::string::npos);
  EXPECT_NE(text.find("code=\"2xx\""), std::string::npos);
  EXPECT_NE(text.find("code=\"4xx\""), std::string::npos);
  EXPECT_EQ(text.find("t-1"), std::string::npos);  // never the raw path
}

TEST(HttpServer, ListenValidatesAddress) {
  Router router;
  HttpServer s(router);
  EXPECT_FALSE(s.listen("nonsense").ok());
  EXPECT_FALSE(s.listen("127.0.0.1:99999").ok());
  EXPECT_FALSE(s.listen("127.0.0.1:http").ok());
  auto p = s.listen(":0");
  ASSERT_TRUE(p.ok()) << p.error().to_string();
  EXPECT_GT(*p, 0);
  EXPECT_EQ(s.port(), *p);
}

// A port in use is an error value, not an exception.
TEST(HttpServer, ListenOnBusyPortFails) {
  Router router;
  TestServer ts(router);
  HttpServer other(router);
  auto r = other.listen("127.0.0.1:" + std::to_string(ts.port));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "listen_failed");
}

}  // namespace
}  // namespace cp::http
