#include "cli/api_client.h"

#include <gtest/gtest.h>

#include "cli/fake_server.h"
#include "cli/format.h"

namespace cp::cli {
namespace {

using testing::ClosedPort;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;
using testing::SilentPort;

ApiClient client_for(const std::string& url, std::string lang = "en", std::string token = "tok") {
  ApiClientOptions o;
  o.server = url;
  o.token = std::move(token);
  o.accept_language = std::move(lang);
  o.timeout_ms = 10000;
  return ApiClient(o);
}

// Each move to the next server, as "from -> to".
struct Failovers {
  std::vector<std::string> moves;
  ApiClient client(const std::string& servers, long timeout_ms = 10000) {
    ApiClientOptions o;
    o.server = servers;
    o.token = "tok";
    o.timeout_ms = timeout_ms;
    o.on_failover = [this](const std::string& from, const Error&, const std::string& to) {
      moves.push_back(from + " -> " + to);
    };
    return ApiClient(o);
  }
};

FakeServer::Handler answers(int status, std::string body = "{}") {
  return [status, body](const FakeRequest&) { return FakeResponse{status, body}; };
}

TEST(ApiClient, SendsTokenAndLanguageAndReturnsTheJsonBody) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{200, R"({"user":"alice","role":"admin"})"}; });
  ApiClient api = client_for(server.url(), "zh-CN", "cpt_abc");
  auto who = api.get("/api/v1/whoami");
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(str_at(*who, "user"), "alice");

  FakeRequest req = server.last();
  EXPECT_EQ(req.method, "GET");
  EXPECT_EQ(req.path, "/api/v1/whoami");
  EXPECT_EQ(req.header("authorization"), "Bearer cpt_abc");
  EXPECT_EQ(req.header("accept-language"), "zh-CN");
  EXPECT_EQ(req.header("accept"), "application/json");
}

TEST(ApiClient, NoTokenNoAuthorizationHeader) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{200, "{}"}; });
  ApiClient api = client_for(server.url(), "en", "");
  ASSERT_TRUE(api.get("/api/v1/whoami").ok());
  EXPECT_EQ(server.last().headers.count("authorization"), 0u);
}

TEST(ApiClient, QueryLeavesOutEmptyValuesAndEncodesTheRest) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{200, R"({"items":[]})"}; });
  ApiClient api = client_for(server.url());
  ASSERT_TRUE(api.get("/api/v1/tasks", {{"state", "Queued"}, {"cluster", ""}, {"project_group", "a b&c"}}).ok());
  EXPECT_EQ(server.last().query, "state=Queued&project_group=a%20b%26c");
}

TEST(ApiClient, BodiesGoWithTheirContentType) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{201, R"({"ok":true})"}; });
  ApiClient api = client_for(server.url());
  ASSERT_TRUE(api.post_text("/api/v1/pipelines", "kind: Pipeline\n", "application/yaml").ok());
  EXPECT_EQ(server.last().method, "POST");
  EXPECT_EQ(server.last().header("content-type"), "application/yaml");
  EXPECT_EQ(server.last().body, "kind: Pipeline\n");

  ASSERT_TRUE(api.put("/api/v1/resource-groups/rg-a", json::object{{"kind", "ResourceGroup"}}).ok());
  EXPECT_EQ(server.last().method, "PUT");
  EXPECT_EQ(server.last().header("content-type"), "application/json");
  EXPECT_EQ(server.last().body, R"({"kind":"ResourceGroup"})");

  ASSERT_TRUE(api.patch("/x", json::object{{"maintenance", true}}).ok());
  EXPECT_EQ(server.last().method, "PATCH");
  ASSERT_TRUE(api.del("/x").ok());
  EXPECT_EQ(server.last().method, "DELETE");
}

TEST(ApiClient, AnEmptySuccessBodyIsNull) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{204, ""}; });
  ApiClient api = client_for(server.url());
  auto answer = api.del("/api/v1/resource-groups/rg-a");
  ASSERT_TRUE(answer.ok());
  EXPECT_TRUE(answer->is_null());
}

TEST(ApiClient, TheServersErrorObjectBecomesTheError) {
  // The server localized the message already; the client keeps it as is.
  FakeServer server([](const FakeRequest&) {
    return FakeResponse{403, R"({"error":{"code":"quota_exceeded","message":"配额不足","details":{"resource":"gpu"}}})"};
  });
  ApiClient api = client_for(server.url(), "zh-CN");
  auto answer = api.post("/api/v1/pipelines", json::object{});
  ASSERT_FALSE(answer.ok());
  const Error& e = answer.error();
  EXPECT_EQ(e.code, "quota_exceeded");
  EXPECT_EQ(e.status, 403);
  EXPECT_EQ(e.message, "配额不足");
  EXPECT_EQ(e.message_for("en"), "配额不足");
  EXPECT_EQ(e.message_for("zh-CN"), "配额不足");
  EXPECT_EQ(dump(e.details), R"({"resource":"gpu"})");
}

TEST(ApiClient, AnErrorWithoutTheErrorObjectQuotesTheBody) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{502, "<html>Bad Gateway</html>", "text/html"}; });
  ApiClient api = client_for(server.url());
  auto answer = api.get("/api/v1/clusters");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().code, "http_502");
  EXPECT_EQ(answer.error().status, 502);
  EXPECT_NE(answer.error().message.find("Bad Gateway"), std::string::npos);
}

TEST(ApiClient, ASuccessThatIsNotJsonIsAnError) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{200, "not json", "text/plain"}; });
  ApiClient api = client_for(server.url());
  auto answer = api.get("/api/v1/clusters");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().code, "malformed_response");
}

TEST(ApiClient, AnUnreachableServerSaysSoAndHowToPointElsewhere) {
  ClosedPort closed;
  ApiClient api = client_for(closed.url());
  auto answer = api.get("/api/v1/whoami");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().code, "unreachable");
  EXPECT_NE(answer.error().message.find(closed.url()), std::string::npos);
  EXPECT_NE(answer.error().message.find("--server"), std::string::npos);
}

TEST(ApiClient, ListAllFollowsNextCursorToTheEnd) {
  FakeServer server([](const FakeRequest& req) {
    if (req.query.find("cursor=c2") != std::string::npos) return FakeResponse{200, R"({"items":[3],"next_cursor":""})"};
    if (req.query.find("cursor=c1") != std::string::npos) {
      return FakeResponse{200, R"({"items":[2],"next_cursor":"c2"})"};
    }
    return FakeResponse{200, R"({"items":[1],"next_cursor":"c1"})"};
  });
  ApiClient api = client_for(server.url());
  auto items = api.list_all("/api/v1/tasks", {{"state", "Queued"}});
  ASSERT_TRUE(items.ok()) << items.error().message;
  EXPECT_EQ(dump(*items), "[1,2,3]");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 3u);
  EXPECT_EQ(reqs[0].query, "state=Queued");
  EXPECT_EQ(reqs[1].query, "state=Queued&cursor=c1");
  EXPECT_EQ(reqs[2].query, "state=Queued&cursor=c2");
}

TEST(ApiClient, ListAllStopsOnARepeatedCursor) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{200, R"({"items":[1],"next_cursor":"same"})"}; });
  ApiClient api = client_for(server.url());
  auto items = api.list_all("/api/v1/tasks", {});
  ASSERT_FALSE(items.ok());
  EXPECT_EQ(server.requests().size(), 2u);
}

TEST(ApiClient, TextBodiesAskForTheirType) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{200, "project_group,gpu_seconds\np,10\n", "text/csv"}; });
  ApiClient api = client_for(server.url());
  auto csv = api.get_text("/api/v1/usage", {{"group_by", "project_group"}}, "text/csv");
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(*csv, "project_group,gpu_seconds\np,10\n");
  EXPECT_EQ(server.last().header("accept"), "text/csv");
}

TEST(ApiClient, StreamDeliversTheBody) {
  FakeServer server([](const FakeRequest&) { return FakeResponse{200, "line 1\nline 2\n", "text/plain"}; });
  ApiClient api = client_for(server.url());
  std::string got;
  Status s = api.stream("/api/v1/tasks/t-1/logs", {{"follow", "true"}}, [&](std::string_view c) {
    got += c;
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(got, "line 1\nline 2\n");
  EXPECT_EQ(server.last().query, "follow=true");
}

TEST(ApiClient, StreamOfARefusalPrintsNothingAndReturnsTheError) {
  FakeServer server([](const FakeRequest&) {
    return FakeResponse{404, R"({"error":{"code":"not_found","message":"task \"t-9\" not found"}})"};
  });
  ApiClient api = client_for(server.url());
  std::string got;
  Status s = api.stream("/api/v1/tasks/t-9/logs", {}, [&](std::string_view c) {
    got += c;
    return true;
  });
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "not_found");
  EXPECT_EQ(got, "");
}

// ------------------------------------------------------------ server lists

// A GET goes to the listed servers in order until one answers other than
// with no answer or a 502/503/504; that one serves the next requests.
TEST(ApiClientFailover, AGetTriesTheServersInOrderAndStaysWithTheOneThatAnswered) {
  ClosedPort closed;
  FakeServer unavailable(answers(503, R"({"error":{"code":"not_leader","message":"not the leader"}})"));
  FakeServer good(answers(200, R"({"user":"alice"})"));
  Failovers f;
  ApiClient api = f.client(closed.url() + "," + unavailable.url() + "/, " + good.url());
  auto who = api.get("/api/v1/whoami");
  ASSERT_TRUE(who.ok()) << who.error().message;
  EXPECT_EQ(str_at(*who, "user"), "alice");
  EXPECT_EQ(f.moves, (std::vector<std::string>{closed.url() + " -> " + unavailable.url(),
                                               unavailable.url() + " -> " + good.url()}));
  EXPECT_EQ(unavailable.requests().size(), 1u);
  EXPECT_EQ(good.last().header("authorization"), "Bearer tok");

  ASSERT_TRUE(api.get("/api/v1/whoami").ok());
  EXPECT_EQ(good.requests().size(), 2u);
  EXPECT_EQ(unavailable.requests().size(), 1u) << "the server that answered stays current";
  EXPECT_EQ(f.moves.size(), 2u);
}

// Any other answer settles the request, a refusal or a 500 too.
TEST(ApiClientFailover, AnyOtherAnswerSettlesTheRequest) {
  for (int status : {401, 404, 409, 500}) {
    FakeServer first(answers(status, R"({"error":{"code":"no","message":"no"}})"));
    FakeServer second(answers(200));
    Failovers f;
    ApiClient api = f.client(first.url() + "," + second.url());
    auto answer = api.get("/api/v1/clusters");
    ASSERT_FALSE(answer.ok()) << status;
    EXPECT_EQ(answer.error().status, status);
    EXPECT_TRUE(second.requests().empty()) << status;
    EXPECT_TRUE(f.moves.empty()) << status;
  }
}

// Idempotent requests (GET, PUT, DELETE) go on after a timeout too: the
// server may have done it, and doing it again changes nothing.
TEST(ApiClientFailover, IdempotentRequestsGoOnAfterATimeout) {
  SilentPort silent;
  FakeServer good(answers(200));
  Failovers f;
  ApiClient api = f.client(silent.url() + "," + good.url(), 300);
  ASSERT_TRUE(api.put("/api/v1/resource-groups/rg-a", json::object{}).ok());
  EXPECT_EQ(good.last().method, "PUT");
  EXPECT_EQ(f.moves.size(), 1u);
}

// A POST or PATCH goes to the next server only when it never left: no
// connection. After a timeout or a 502/503/504 the first server may have
// done it, so its failure is the answer.
TEST(ApiClientFailover, APostGoesOnOnlyWhenItNeverLeft) {
  FakeServer good(answers(201, R"({"ok":true})"));
  {
    ClosedPort closed;
    Failovers f;
    ApiClient api = f.client(closed.url() + "," + good.url());
    ASSERT_TRUE(api.post("/api/v1/tasks/t-1/cancel", json::object{}).ok());
    ASSERT_TRUE(api.patch("/api/v1/clusters/c/nodes/n", json::object{}).ok());
    EXPECT_EQ(good.requests().size(), 2u);
  }
  {
    SilentPort silent;
    Failovers f;
    ApiClient api = f.client(silent.url() + "," + good.url(), 300);
    auto answer = api.post("/api/v1/tasks/t-1/cancel", json::object{});
    ASSERT_FALSE(answer.ok());
    EXPECT_EQ(answer.error().code, "unreachable");
    EXPECT_NE(answer.error().message.find(silent.url()), std::string::npos) << answer.error().message;
    EXPECT_TRUE(f.moves.empty());
  }
  {
    FakeServer unavailable(answers(503, R"({"error":{"code":"store_error","message":"the database is unavailable"}})"));
    Failovers f;
    ApiClient api = f.client(unavailable.url() + "," + good.url());
    auto answer = api.post_text("/api/v1/pipelines", "kind: Pipeline\n", "application/yaml");
    ASSERT_FALSE(answer.ok());
    EXPECT_EQ(answer.error().status, 503);
    EXPECT_TRUE(f.moves.empty());
  }
  EXPECT_EQ(good.requests().size(), 2u) << "neither the timed-out POST nor the 503 went on";
}

// post_idempotent: every server in turn under the same key, then the
// retry's wait, then every server again.
TEST(ApiClientFailover, AnIdempotentPostTriesEveryServerBeforeEachWait) {
  FakeServer first(answers(503, R"({"error":{"code":"store_error","message":"the database is unavailable"}})"));
  FakeServer second(answers(504, "gateway timeout"));
  Failovers f;
  ApiClient api = f.client(first.url() + "," + second.url());
  std::vector<Millis> slept;
  RetryPolicy retry;
  retry.sleep = [&](Millis ms) { slept.push_back(ms); };
  auto answer = api.post_idempotent("/api/v1/pipelines", "kind: Pipeline\n", "application/yaml", "key-1", retry);
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().status, 504) << "the last server's answer";
  EXPECT_EQ(slept, (std::vector<Millis>{1000, 2000, 4000}));
  ASSERT_EQ(first.requests().size(), 4u);
  ASSERT_EQ(second.requests().size(), 4u);
  for (const auto& r : first.requests()) EXPECT_EQ(r.header("idempotency-key"), "key-1");
  for (const auto& r : second.requests()) EXPECT_EQ(r.header("idempotency-key"), "key-1");
  EXPECT_EQ(f.moves.size(), 4u) << "first -> second once per round; each round starts with the first";
}

TEST(ApiClientFailover, AStreamGoesOnOnlyBeforeItPrintedAnything) {
  ClosedPort closed;
  FakeServer good([](const FakeRequest&) { return FakeResponse{200, "line 1\n", "text/plain"}; });
  Failovers f;
  ApiClient api = f.client(closed.url() + "," + good.url());
  std::string got;
  Status s = api.stream("/api/v1/tasks/t-1/logs", {}, [&](std::string_view c) {
    got += c;
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(got, "line 1\n");
  EXPECT_EQ(f.moves.size(), 1u);
}

TEST(ApiClientFailover, AMalformedListIsTheErrorOfEveryRequest) {
  FakeServer good(answers(200));
  ApiClient api = client_for(good.url() + ",,");
  auto answer = api.get("/api/v1/whoami");
  ASSERT_FALSE(answer.ok());
  EXPECT_EQ(answer.error().code, "invalid_field");
  EXPECT_NE(answer.error().message.find("entry 2 of the server list"), std::string::npos) << answer.error().message;
  EXPECT_TRUE(good.requests().empty());
}

// ------------------------------------------------------------- StreamGate

struct GateHarness {
  std::string out;
  StreamGate gate{[this](std::string_view c) {
    out += c;
    return true;
  }};
};

TEST(StreamGate, PlainLogTextPassesAtOnce) {
  GateHarness h;
  h.gate.feed("epoch 1 loss 0.3\n");
  EXPECT_EQ(h.out, "epoch 1 loss 0.3\n");
  h.gate.feed("epoch 2");
  EXPECT_EQ(h.out, "epoch 1 loss 0.3\nepoch 2");
  EXPECT_TRUE(h.gate.finish(200).ok());
}

TEST(StreamGate, AJsonLineWaitsForWhatFollowsIt) {
  // JSON-lines logs: the first line could be an error body until more comes.
  GateHarness h;
  h.gate.feed("{\"level\":\"info\"}\n");
  EXPECT_EQ(h.out, "");
  h.gate.feed("{\"level\":\"warn\"}\n");
  EXPECT_EQ(h.out, "{\"level\":\"info\"}\n{\"level\":\"warn\"}\n");
  EXPECT_TRUE(h.gate.finish(200).ok());
}

TEST(StreamGate, AHeldBodyIsFlushedOnSuccess) {
  GateHarness h;
  h.gate.feed("{\"only\":");
  h.gate.feed("1}");
  EXPECT_EQ(h.out, "");
  EXPECT_TRUE(h.gate.finish(200).ok());
  EXPECT_EQ(h.out, "{\"only\":1}");
}

TEST(StreamGate, AnErrorBodyInPiecesIsTheError) {
  GateHarness h;
  h.gate.feed("{\"error\":{\"code\":\"forbidden\",");
  h.gate.feed("\"message\":\"no\"}}");
  Status s = h.gate.finish(403);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "forbidden");
  EXPECT_EQ(h.out, "");
}

TEST(StreamGate, AnOversizedPrefixIsPassedOn) {
  GateHarness h;
  std::string big = "[" + std::string(StreamGate::kMaxHeld, ' ');
  h.gate.feed(big);
  EXPECT_EQ(h.out, big);
}

}  // namespace
}  // namespace cp::cli
