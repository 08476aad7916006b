#include "http/router.h"

#include <gtest/gtest.h>

namespace cp::http {
namespace {

Request make(std::string method, std::string target, std::string lang = "") {
  Request r;
  r.method = std::move(method);
  r.target = std::move(target);
  EXPECT_TRUE(parse_target(r));
  if (!lang.empty()) r.headers["accept-language"] = lang;
  return r;
}

Handler echo(std::string name) {
  return [name](Request& req) {
    json::object o;
    o["route"] = name;
    json::object params;
    for (const auto& [k, v] : req.params) params[k] = v;
    o["params"] = std::move(params);
    return json_response(200, o);
  };
}

json::value body_of(const Response& r) { return json::parse(r.body); }

class RouterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    router.add("GET", "/api/v1/tasks", {.summary = "list"}, echo("list"));
    router.add("GET", "/api/v1/tasks/{id}", {.summary = "get"}, echo("get"));
    router.add("POST", "/api/v1/tasks/{id}/cancel", {.summary = "cancel"}, echo("cancel"));
    router.add("GET", "/api/v1/tasks/{id}/logs", {.summary = "logs"}, echo("logs"));
    router.add("GET", "/api/v1/tasks/special", {.summary = "literal"}, echo("literal"));
    router.add("PATCH", "/api/v1/clusters/{id}/nodes/{name}", {.summary = "node"}, echo("node"));
    router.add("DELETE", "/api/v1/tasks/{id}", {.summary = "delete"}, echo("delete"));
  }
  Router router;
};

// A path parameter captures one decoded segment; the route pattern is recorded.
TEST_F(RouterTest, CapturesPathParameters) {
  auto req = make("GET", "/api/v1/tasks/t-123/logs?attempt=2&follow=true");
  auto resp = router.handle(req);
  ASSERT_EQ(resp.status, 200);
  auto b = body_of(resp);
  EXPECT_EQ(b.at("route"), "logs");
  EXPECT_EQ(b.at("params").at("id"), "t-123");
  EXPECT_EQ(req.route, "/api/v1/tasks/{id}/logs");
  EXPECT_EQ(req.query.at("attempt"), "2");
  EXPECT_EQ(req.query.at("follow"), "true");
}

// Two parameters in one pattern; percent-encoding is decoded.
TEST_F(RouterTest, DecodesParametersAndQuery) {
  auto req = make("PATCH", "/api/v1/clusters/c%2D1/nodes/node%20a?x=a%26b&y=%E4%B8%AD");
  auto resp = router.handle(req);
  ASSERT_EQ(resp.status, 200);
  auto b = body_of(resp);
  EXPECT_EQ(b.at("params").at("id"), "c-1");
  EXPECT_EQ(b.at("params").at("name"), "node a");
  EXPECT_EQ(req.query.at("x"), "a&b");
  EXPECT_EQ(req.query.at("y"), "中");
}

// A literal segment wins over a parameter in the same place.
TEST_F(RouterTest, LiteralBeatsParameter) {
  auto req = make("GET", "/api/v1/tasks/special");
  EXPECT_EQ(body_of(router.handle(req)).at("route"), "literal");
  auto req2 = make("GET", "/api/v1/tasks/other");
  EXPECT_EQ(body_of(router.handle(req2)).at("route"), "get");
}

// A trailing slash is forgiven.
TEST_F(RouterTest, TrailingSlash) {
  auto req = make("GET", "/api/v1/tasks/");
  EXPECT_EQ(body_of(router.handle(req)).at("route"), "list");
}

// The path exists with other methods: 405 with Allow listing them (and HEAD for GET).
TEST_F(RouterTest, MethodNotAllowedListsAllowed) {
  auto req = make("PUT", "/api/v1/tasks/t-1");
  auto resp = router.handle(req);
  EXPECT_EQ(resp.status, 405);
  std::string allow;
  for (const auto& [k, v] : resp.headers) {
    if (k == "Allow") allow = v;
  }
  EXPECT_EQ(allow, "DELETE, GET, HEAD");
  EXPECT_EQ(body_of(resp).at("error").at("code"), "method_not_allowed");
}

// No route for the path: 404 in the JSON error format.
TEST_F(RouterTest, UnknownPathIs404Json) {
  auto req = make("GET", "/api/v1/nothing/here");
  auto resp = router.handle(req);
  EXPECT_EQ(resp.status, 404);
  EXPECT_EQ(resp.content_type, "application/json");
  auto e = body_of(resp).at("error");
  EXPECT_EQ(e.at("code"), "not_found");
  EXPECT_TRUE(e.at("details").is_object());
  // Segment counts must match: a longer path is not a match.
  auto req2 = make("GET", "/api/v1/tasks/t-1/logs/extra");
  EXPECT_EQ(router.handle(req2).status, 404);
}

// HEAD is served by the GET route.
TEST_F(RouterTest, HeadUsesGet) {
  auto req = make("HEAD", "/api/v1/tasks");
  auto resp = router.handle(req);
  EXPECT_EQ(resp.status, 200);
  EXPECT_EQ(req.route, "/api/v1/tasks");
}

// The fallback sees unmatched paths and may decline.
TEST_F(RouterTest, FallbackTakesOrDeclines) {
  router.set_fallback([](Request& req) -> std::optional<Response> {
    if (req.path.starts_with("/api/")) return std::nullopt;
    return text_response(200, "ui", "text/html");
  });
  auto ui = make("GET", "/clusters/abc");
  EXPECT_EQ(router.handle(ui).body, "ui");
  auto api = make("GET", "/api/v1/unknown");
  EXPECT_EQ(router.handle(api).status, 404);
  // The fallback is not consulted for a known path with another method.
  auto wrong = make("POST", "/api/v1/tasks");
  EXPECT_EQ(router.handle(wrong).status, 405);
}

// A handler that throws answers 500 instead of taking the server down.
TEST_F(RouterTest, ThrowingHandlerIs500) {
  router.add("GET", "/boom", {}, [](Request&) -> Response { throw std::runtime_error("kaput"); });
  auto req = make("GET", "/boom");
  auto resp = router.handle(req);
  EXPECT_EQ(resp.status, 500);
  EXPECT_EQ(body_of(resp).at("error").at("code"), "internal");
}

// Errors carry code, message in the asked language, details, and the status.
TEST(ErrorResponse, PicksLanguageAndStatus) {
  Error e = errors::not_found("task", "t-1");
  Request en = make("GET", "/", "en-US,en;q=0.9");
  Request zh = make("GET", "/", "zh-CN,zh;q=0.9,en;q=0.8");
  Request none = make("GET", "/");
  auto r_en = error_response(e, en);
  auto r_zh = error_response(e, zh);
  auto r_none = error_response(e, none);
  EXPECT_EQ(r_en.status, 404);
  EXPECT_EQ(r_zh.status, 404);
  EXPECT_EQ(body_of(r_en).at("error").at("message"), "task \"t-1\" not found");
  EXPECT_EQ(body_of(r_zh).at("error").at("message"), "task \"t-1\" 不存在");
  EXPECT_EQ(body_of(r_none).at("error").at("message"), "task \"t-1\" not found");
  auto err = body_of(r_zh).at("error");
  EXPECT_EQ(err.at("code"), "not_found");
  EXPECT_EQ(err.at("details").at("name"), "t-1");
}

// A nonsense status in an Error never reaches the wire.
TEST(ErrorResponse, ClampsStatus) {
  Error e{"weird", 42, "odd", "奇怪", {}};
  EXPECT_EQ(error_response(e, "").status, 500);
}

TEST(ParseTarget, RejectsGarbageAndNul) {
  Request r;
  r.target = "no-slash";
  EXPECT_FALSE(parse_target(r));
  r.target = "/a%00b";
  EXPECT_FALSE(parse_target(r));
  r.target = "/";
  EXPECT_TRUE(parse_target(r));
  EXPECT_EQ(r.path, "/");
  r.target = "/a/b?k&v=1&v=2";
  EXPECT_TRUE(parse_target(r));
  EXPECT_EQ(r.path, "/a/b");
  EXPECT_EQ(r.query.at("k"), "");
  EXPECT_EQ(r.query.at("v"), "1");
}

TEST(RequestHelpers, HeaderAndMediaType) {
  Request r;
  r.headers["content-type"] = "Application/YAML; charset=utf-8";
  EXPECT_EQ(r.header("Content-Type"), "Application/YAML; charset=utf-8");
  EXPECT_EQ(r.media_type(), "application/yaml");
  EXPECT_EQ(r.header("missing"), "");
}

}  // namespace
}  // namespace cp::http
