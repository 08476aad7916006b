// The REST API end to end: a real HttpServer on 127.0.0.1:0 over a real
// ControlPlane (SQLite in memory, local object store in a temp dir), called
// with libcurl the way the CLI and the agent call it (fixture in api_test.h).
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "api_test.h"
#include "http/openapi.h"
#include "openapi_check.h"

namespace cp::http {
namespace {

using testing::ApiTest;
using testing::error_code;
using testing::eventually;
using testing::kProjectGroup;
using testing::kResourceGroup;
using testing::kYaml;
using testing::parse;
using testing::pipeline_yaml;
using testing::RawClient;

// Every call of docs/rest-shapes.md is routed (the contract with CLI and UI).
TEST_F(ApiTest, RoutesEveryCallOfTheContract) {
  const std::set<std::pair<std::string, std::string>> contract = {
      {"GET", "/healthz"},
      {"GET", "/readyz"},
      {"GET", "/metrics"},
      {"GET", "/api/v1/openapi.json"},
      {"GET", "/api/v1/clusters"},
      {"POST", "/api/v1/clusters"},
      {"GET", "/api/v1/clusters/{id}"},
      {"PATCH", "/api/v1/clusters/{id}"},
      {"DELETE", "/api/v1/clusters/{id}"},
      {"POST", "/api/v1/clusters/{id}/bootstrap-tokens"},
      {"GET", "/api/v1/nodes"},
      {"GET", "/api/v1/clusters/{id}/nodes/{name}"},
      {"PATCH", "/api/v1/clusters/{id}/nodes/{name}"},
      {"GET", "/api/v1/resource-groups"},
      {"POST", "/api/v1/resource-groups"},
      {"GET", "/api/v1/resource-groups/{name}"},
      {"PUT", "/api/v1/resource-groups/{name}"},
      {"DELETE", "/api/v1/resource-groups/{name}"},
      {"GET", "/api/v1/project-groups"},
      {"POST", "/api/v1/project-groups"},
      {"GET", "/api/v1/project-groups/{name}"},
      {"PUT", "/api/v1/project-groups/{name}"},
      {"DELETE", "/api/v1/project-groups/{name}"},
      {"GET", "/api/v1/priority-classes"},
      {"POST", "/api/v1/priority-classes"},
      {"GET", "/api/v1/priority-classes/{name}"},
      {"PUT", "/api/v1/priority-classes/{name}"},
      {"DELETE", "/api/v1/priority-classes/{name}"},
      {"POST", "/api/v1/pipelines"},
      {"GET", "/api/v1/pipelines/{id}"},
      {"GET", "/api/v1/tasks"},
      {"GET", "/api/v1/tasks/{id}"},
      {"POST", "/api/v1/tasks/{id}/cancel"},
      {"GET", "/api/v1/tasks/{id}/explain"},
      {"GET", "/api/v1/tasks/{id}/logs"},
      {"GET", "/api/v1/events"},
      {"POST", "/api/v1/users"},
      {"GET", "/api/v1/users"},
      {"POST", "/api/v1/users/{name}/tokens"},
      {"GET", "/api/v1/whoami"},
      {"GET", "/api/v1/usage"},
      {"POST", "/api/v1/agent/register"},
      {"POST", "/api/v1/agent/sync"},
      {"POST", "/api/v1/agent/logs"},
      {"GET", "/api/v1/overview"},
      {"GET", "/api/v1/alerts"},
      {"GET", "/api/v1/price-table"},
      {"PUT", "/api/v1/price-table"},
      {"GET", "/api/v1/audit"},
      {"POST", "/api/v1/approvals"},
      {"GET", "/api/v1/approvals"},
      {"POST", "/api/v1/approvals/{id}/approve"},
      {"POST", "/api/v1/approvals/{id}/deny"},
      {"POST", "/api/v1/approvals/{id}/revoke"},
  };
  std::set<std::pair<std::string, std::string>> routed;
  for (const auto& r : router_.routes()) routed.emplace(r.method, r.pattern);
  for (const auto& c : contract) EXPECT_TRUE(routed.count(c)) << c.first << " " << c.second << " is not routed";
}

// The served OpenAPI document lists exactly the routes of the table.
TEST_F(ApiTest, OpenApiDocumentMatchesRoutes) {
  auto r = call("GET", "/api/v1/openapi.json");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "application/json");
  auto doc = parse(r);
  EXPECT_EQ(doc.at("openapi"), "3.0.3");
  testing::expect_document_matches_routes(doc, router_);
  auto& logs = doc.at("paths").at("/api/v1/tasks/{id}/logs").at("get");
  EXPECT_EQ(logs.at("parameters").at(0).at("name"), "id");
}

TEST_F(ApiTest, HealthAndReadiness) {
  auto h = call("GET", "/healthz");
  EXPECT_EQ(h.status, 200);
  EXPECT_EQ(parse(h).at("status"), "ok");
  auto r = call("GET", "/readyz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(parse(r).at("status"), "ok");
}

// Missing, malformed and unknown tokens are 401 in the error format.
TEST_F(ApiTest, UnauthenticatedIs401) {
  auto none = call("GET", "/api/v1/clusters");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(error_code(none), "unauthenticated");
  HttpRequestOptions basic;
  basic.headers["Authorization"] = "Basic YWRtaW46YWRtaW4=";
  EXPECT_EQ(call("GET", "/api/v1/clusters", "", "", "application/json", basic).status, 401);
  EXPECT_EQ(call("GET", "/api/v1/clusters", "cp_not-a-real-token").status, 401);
  // A user token is not an agent credential.
  EXPECT_EQ(call("POST", "/api/v1/agent/sync", admin_, "{}").status, 401);
  EXPECT_EQ(call("GET", "/api/v1/clusters", admin_).status, 200);
}

// Messages follow Accept-Language.
TEST_F(ApiTest, ErrorsInChineseOnRequest) {
  HttpRequestOptions zh;
  zh.headers["Accept-Language"] = "zh-CN,zh;q=0.9";
  auto r = call("GET", "/api/v1/clusters", "", "", "application/json", zh);
  EXPECT_EQ(r.status, 401);
  std::string msg(parse(r).at("error").at("message").as_string());
  EXPECT_NE(msg.find("令牌"), std::string::npos) << msg;
  auto en = call("GET", "/api/v1/clusters");
  EXPECT_NE(std::string(parse(en).at("error").at("message").as_string()).find("token"), std::string::npos);
}

// A member may not change a resource group: 403, and the group is unchanged.
TEST_F(ApiTest, MemberCannotChangeResourceGroup) {
  seed();
  std::string changed = kResourceGroup;
  changed.replace(changed.find("guaranteed: 4"), 13, "guaranteed: 64");
  auto r = call("PUT", "/api/v1/resource-groups/rg-a", alice_, changed, kYaml);
  EXPECT_EQ(r.status, 403) << r.body;
  EXPECT_EQ(error_code(r), "forbidden");
  auto del = call("DELETE", "/api/v1/resource-groups/rg-a", alice_);
  EXPECT_EQ(del.status, 403);
  auto get = call("GET", "/api/v1/resource-groups/rg-a", admin_);
  ASSERT_EQ(get.status, 200) << get.body;
  auto quota = parse(get).at("spec").at("quota").at("gpu/a100");
  EXPECT_EQ(quota.at("guaranteed"), "4") << get.body;
}

// An unknown field is a 400 naming the field path, and nothing is stored.
TEST_F(ApiTest, UnknownFieldIs400WithPath) {
  seed();
  const std::string doc = "apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: rg-new}\n"
                          "spec:\n  clusters: [c1]\n  quotaa: {cpu: {guaranteed: 1}}\n";
  auto r = call("POST", "/api/v1/resource-groups", admin_, doc, kYaml);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(error_code(r), "unknown_field");
  EXPECT_NE(r.body.find("spec.quotaa"), std::string::npos) << r.body;
  EXPECT_EQ(call("GET", "/api/v1/resource-groups/rg-new", admin_).status, 404);
  // The same through JSON.
  auto j = call("POST", "/api/v1/resource-groups", admin_,
                R"({"apiVersion":"cubeplane/v1","kind":"ResourceGroup","metadata":{"name":"rg-new"},)"
                R"("spec":{"clusters":["c1"],"bogus":1}})");
  EXPECT_EQ(j.status, 400) << j.body;
  EXPECT_NE(j.body.find("spec.bogus"), std::string::npos) << j.body;
  EXPECT_EQ(call("GET", "/api/v1/resource-groups/rg-new", admin_).status, 404);
}

// Malformed YAML and JSON are 400s with a position; nothing is submitted.
TEST_F(ApiTest, MalformedBodiesAre400AndChangeNothing) {
  seed();
  auto y = call("POST", "/api/v1/pipelines", alice_, "apiVersion: cubeplane/v1\nkind: [Pipeline\n", kYaml);
  EXPECT_EQ(y.status, 400) << y.body;
  EXPECT_EQ(error_code(y), "malformed_yaml");
  EXPECT_NE(y.body.find("line"), std::string::npos) << y.body;
  auto j = call("POST", "/api/v1/pipelines", alice_, R"({"apiVersion": "cubeplane/v1", )");
  EXPECT_EQ(j.status, 400) << j.body;
  EXPECT_EQ(error_code(j), "malformed_json");
  auto deep = call("POST", "/api/v1/clusters", admin_, std::string(100, '[') + std::string(100, ']'));
  EXPECT_EQ(deep.status, 400) << deep.body;
  auto big = call("POST", "/api/v1/pipelines", alice_, pipeline_yaml() + "# " + std::string(2 << 20, 'x'), kYaml);
  EXPECT_EQ(big.status, 413);
  EXPECT_EQ(error_code(big), "payload_too_large");
  EXPECT_EQ(task_count(), 0u);
}

// YAML sent to a JSON-only call is 415.
TEST_F(ApiTest, YamlOnJsonCallIs415) {
  auto r = call("POST", "/api/v1/clusters", admin_, "id: c9\n", kYaml);
  EXPECT_EQ(r.status, 415) << r.body;
  EXPECT_EQ(error_code(r), "unsupported_media_type");
  EXPECT_EQ(call("GET", "/api/v1/clusters/c9", admin_).status, 404);
}

// Query parameters are checked: limit 1..1000, state a TaskState name.
TEST_F(ApiTest, QueryParametersAreValidated) {
  seed();
  EXPECT_EQ(call("GET", "/api/v1/tasks?limit=0", admin_).status, 400);
  EXPECT_EQ(call("GET", "/api/v1/tasks?limit=1001", admin_).status, 400);
  EXPECT_EQ(call("GET", "/api/v1/tasks?limit=ten", admin_).status, 400);
  auto bad = call("GET", "/api/v1/tasks?state=Sleeping", admin_);
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("Queued"), std::string::npos) << bad.body;  // lists the allowed states
  EXPECT_EQ(call("GET", "/api/v1/tasks?limit=1000&state=Queued,Running", admin_).status, 200);
  EXPECT_EQ(call("GET", "/api/v1/usage?from=yesterday", admin_).status, 400);
  EXPECT_EQ(call("GET", "/api/v1/tasks/x/logs?attempt=-1", admin_).status, 400);
}

// Submit, list with filters and paging, get, explain, cancel.
TEST_F(ApiTest, PipelineAndTaskLifecycle) {
  seed();
  auto first = submit();
  auto second = submit();
  ASSERT_FALSE(first.empty());
  auto page = call("GET", "/api/v1/tasks?limit=1&state=Queued", alice_);
  ASSERT_EQ(page.status, 200) << page.body;
  auto body = parse(page);
  EXPECT_EQ(body.at("items").as_array().size(), 1u);
  std::string cursor(body.at("next_cursor").as_string());
  ASSERT_FALSE(cursor.empty());
  auto rest = parse(call("GET", "/api/v1/tasks?limit=1&state=Queued&cursor=" + url_encode(cursor), alice_));
  EXPECT_EQ(rest.at("items").as_array().size(), 1u);
  EXPECT_NE(rest.at("items").at(0).at("id"), body.at("items").at(0).at("id"));

  auto task = call("GET", "/api/v1/tasks/" + first, alice_);
  ASSERT_EQ(task.status, 200);
  EXPECT_TRUE(parse(task).as_object().contains("attempts"));
  auto explain = call("GET", "/api/v1/tasks/" + first + "/explain", alice_);
  ASSERT_EQ(explain.status, 200) << explain.body;
  EXPECT_EQ(parse(explain).at("task_id"), json::value(first));
  auto pipeline_id = parse(task).at("pipeline_id");
  auto pipeline = call("GET", "/api/v1/pipelines/" + std::string(pipeline_id.as_string()), alice_);
  EXPECT_EQ(pipeline.status, 200) << pipeline.body;

  auto cancel = call("POST", "/api/v1/tasks/" + first + "/cancel", alice_);
  ASSERT_EQ(cancel.status, 200) << cancel.body;
  EXPECT_EQ(parse(cancel).at("state"), "Cancelled");
  EXPECT_EQ(call("GET", "/api/v1/tasks/t-does-not-exist", alice_).status, 404);
  auto events = call("GET", "/api/v1/events?object_kind=task&limit=10", admin_);
  EXPECT_EQ(events.status, 200) << events.body;
  EXPECT_FALSE(parse(events).at("items").as_array().empty());
}

TEST_F(ApiTest, ListsHaveItemsAndCursor) {
  seed();
  for (const char* path : {"/api/v1/clusters", "/api/v1/resource-groups", "/api/v1/project-groups",
                           "/api/v1/priority-classes", "/api/v1/users", "/api/v1/nodes", "/api/v1/tasks",
                           "/api/v1/events"}) {
    auto r = call("GET", path, admin_);
    ASSERT_EQ(r.status, 200) << path << ": " << r.body;
    auto b = parse(r);
    EXPECT_TRUE(b.at("items").is_array()) << path;
    EXPECT_TRUE(b.at("next_cursor").is_string()) << path;
  }
  auto who = parse(call("GET", "/api/v1/whoami", alice_));
  EXPECT_EQ(who.at("user"), "alice");
}

// Agent protocol over HTTP; a long-poll sync returns as soon as there is work.
TEST_F(ApiTest, AgentSyncLongPollWakesOnWork) {
  seed();
  auto cred = connect_agent();
  // Nothing to do and a short wait: the empty answer after the wait.
  auto idle = sync(cred, json::array{}, 50);
  ASSERT_EQ(idle.status, 200) << idle.body;
  EXPECT_TRUE(parse(idle).at("start").as_array().empty());

  std::atomic<bool> answered{false};
  HttpResponse answer;
  const auto start = std::chrono::steady_clock::now();
  std::thread agent([&] {
    HttpRequestOptions opts;
    opts.timeout_ms = 90'000;
    answer = sync(cred, json::array{}, 60'000, opts);
    answered = true;
  });
  submit();
  ASSERT_TRUE(cp_->schedule_once().ok());
  agent.join();
  ASSERT_EQ(answer.status, 200) << answer.body;
  EXPECT_EQ(parse(answer).at("start").as_array().size(), 1u) << answer.body;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

// Logs: uploaded by the agent, read whole, and followed until the attempt ends.
TEST_F(ApiTest, LogsReadAndFollow) {
  seed();
  auto cred = connect_agent();
  auto task = submit();
  ASSERT_TRUE(cp_->schedule_once().ok());
  auto s = parse(sync(cred, json::array{}));
  ASSERT_EQ(s.at("start").as_array().size(), 1u) << json::serialize(s);
  std::string attempt(s.at("start").at(0).at("attempt_id").as_string());
  auto epoch = s.at("start").at(0).at("epoch");
  json::object running{{"attempt_id", attempt}, {"epoch", epoch}, {"state", "Running"}, {"started_at", clock_.now_ms()}};
  ASSERT_EQ(sync(cred, json::array{running}).status, 200);

  auto upload = [&](std::int64_t offset, const std::string& data) {
    json::object up{{"attempt_id", attempt}, {"epoch", epoch}, {"offset", offset}, {"data", data}};
    auto r = call("POST", "/api/v1/agent/logs", cred, json::serialize(up));
    EXPECT_EQ(r.status, 200) << r.body;
  };
  upload(0, "hello\n");

  std::mutex mu;
  std::string followed;
  std::thread follower([&] {
    HttpRequestOptions opts;
    opts.timeout_ms = 60'000;
    opts.on_data = [&](std::string_view piece) {
      std::lock_guard lock(mu);
      followed += piece;
      return true;
    };
    auto r = call("GET", "/api/v1/tasks/" + task + "/logs?follow=true", alice_, "", "application/json", opts);
    EXPECT_EQ(r.status, 200);
    EXPECT_NE(r.content_type.find("text/plain"), std::string::npos);
  });
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return followed == "hello\n";
  }));
  upload(6, "world\n");
  ASSERT_TRUE(eventually([&] {
    std::lock_guard lock(mu);
    return followed == "hello\nworld\n";
  }));
  json::object done{{"attempt_id", attempt}, {"epoch", epoch},           {"state", "Succeeded"},
                    {"exit_code", 0},        {"started_at", clock_.now_ms()}, {"finished_at", clock_.now_ms()}};
  ASSERT_EQ(sync(cred, json::array{done}).status, 200);
  // The follower ends once the attempt has been over for the last-logs grace.
  clock_.advance_ms(3000);
  cp_->log_signal().notify();
  follower.join();
  EXPECT_EQ(followed, "hello\nworld\n");

  auto whole = call("GET", "/api/v1/tasks/" + task + "/logs", alice_);
  EXPECT_EQ(whole.status, 200);
  EXPECT_EQ(whole.body, "hello\nworld\n");
  auto tail = call("GET", "/api/v1/tasks/" + task + "/logs?offset=6", alice_);
  EXPECT_EQ(tail.body, "world\n");
}

// Usage as JSON and as CSV.
TEST_F(ApiTest, UsageJsonAndCsv) {
  seed();
  auto j = call("GET", "/api/v1/usage?from=2025-01-01&to=2027-01-01&group_by=project_group,cluster", admin_);
  ASSERT_EQ(j.status, 200) << j.body;
  EXPECT_TRUE(parse(j).at("items").is_array());
  HttpRequestOptions csv;
  csv.headers["Accept"] = "text/csv";
  auto c = call("GET", "/api/v1/usage?from=2025-01-01&to=2027-01-01&group_by=project_group,cluster", admin_, "",
                "application/json", csv);
  ASSERT_EQ(c.status, 200) << c.body;
  EXPECT_NE(c.content_type.find("text/csv"), std::string::npos);
  EXPECT_TRUE(c.body.starts_with("project_group,cluster")) << c.body;
  EXPECT_EQ(call("GET", "/api/v1/usage?group_by=planet", admin_).status, 400);
}

// /metrics carries the domain gauges, the last scheduling cycle and the
// request histogram.
TEST_F(ApiTest, MetricsEndpoint) {
  seed();
  submit();
  ASSERT_TRUE(cp_->schedule_once().ok());
  auto m = call("GET", "/metrics");
  ASSERT_EQ(m.status, 200);
  EXPECT_NE(m.content_type.find("text/plain"), std::string::npos);
  EXPECT_NE(m.body.find("cubeplane_tasks{state=\"Queued\"} 1"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("cubeplane_queue_length{resource_group=\"rg-a\"} 1"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("cubeplane_cluster_up{cluster=\"c1\""), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("cubeplane_schedule_cycle_tasks{kind=\"queued\"} 1"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("cubeplane_schedule_cycle_seconds{part=\"decide\"}"), std::string::npos) << m.body;
  EXPECT_NE(m.body.find("cubeplane_http_request_duration_seconds_bucket{code=\"2xx\",method=\"POST\",route=\"/api/v1/pipelines\""),
            std::string::npos)
      << m.body;
}

TEST_F(ApiTest, UnknownApiPathIsJson404) {
  auto r = call("GET", "/api/v1/nothing", admin_);
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(error_code(r), "not_found");
  EXPECT_EQ(call("PATCH", "/api/v1/tasks", admin_, "{}").status, 405);
}

// Without a built UI, / serves a page that says so and links the API description.
TEST_F(ApiTest, BuiltInPageWhenUiNotBuilt) {
  auto r = call("GET", "/");
  EXPECT_EQ(r.status, 200);
  EXPECT_NE(r.content_type.find("text/html"), std::string::npos);
  EXPECT_NE(r.body.find("/api/v1/openapi.json"), std::string::npos);
}

class StaticUiTest : public ApiTest {
 protected:
  std::string web_root() override {
    auto root = dir_ / "web";
    std::filesystem::create_directories(root / "assets");
    std::ofstream(root / "index.html") << "<html>app</html>";
    std::ofstream(root / "assets" / "app.js") << "console.log(1)";
    std::ofstream(dir_ / "secret.txt") << "TOP-SECRET-CONTENT";
    return root.string();
  }
};

TEST_F(StaticUiTest, ServesFilesAndClientRoutes) {
  auto index = call("GET", "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.body, "<html>app</html>");
  EXPECT_NE(index.content_type.find("text/html"), std::string::npos);
  auto js = call("GET", "/assets/app.js");
  EXPECT_EQ(js.status, 200);
  EXPECT_NE(js.content_type.find("javascript"), std::string::npos);
  auto route = call("GET", "/tasks/t-123");  // a client-side route
  EXPECT_EQ(route.status, 200);
  EXPECT_EQ(route.body, "<html>app</html>");
  EXPECT_EQ(call("GET", "/assets/missing.js").status, 404);
}

// No path reaches a file outside the web root.
TEST_F(StaticUiTest, NoTraversal) {
  for (const char* target : {"/../secret.txt", "/assets/../../secret.txt", "/%2e%2e/secret.txt",
                             "/assets/%2e%2e/%2e%2e/secret.txt", "/..%2fsecret.txt"}) {
    RawClient c(server_->port);
    ASSERT_TRUE(c.send(std::string("GET ") + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    auto resp = c.read_all();
    EXPECT_TRUE(resp.starts_with("HTTP/1.1 404")) << target << ": " << resp;
    EXPECT_EQ(resp.find("TOP-SECRET-CONTENT"), std::string::npos) << target << ": " << resp;
  }
}

}  // namespace
}  // namespace cp::http

namespace cp::http {
namespace {

// Every change by a user lands in the audit log with who, what, from where,
// the object before and after, and secrets removed; refusals too. Reads do
// not; only admins read the log.
TEST_F(ApiTest, ChangesAreAuditedWithBeforeAndAfterAndSecretsRemoved) {
  seed();
  const std::string changed = std::string(kResourceGroup) + "  cohort: shared\n";
  ASSERT_EQ(call("PUT", "/api/v1/resource-groups/rg-a", admin_, changed, kYaml).status, 200);
  ASSERT_EQ(call("DELETE", "/api/v1/priority-classes/batch", alice_).status, 403);
  ASSERT_EQ(call("GET", "/api/v1/resource-groups/rg-a", admin_).status, 200);
  ASSERT_EQ(call("POST", "/api/v1/pipelines?dry_run=true", alice_, pipeline_yaml(), kYaml).status, 200);

  auto r = call("GET", "/api/v1/audit?limit=1000", admin_);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto items = parse(r).at("items").as_array();
  // seed(): cluster, user, token, class, group, project group; then the PUT
  // and the refused DELETE. Not the GET, not the dry run.
  ASSERT_EQ(items.size(), 8u);
  const auto& refused = items[0].as_object();  // newest first
  EXPECT_EQ(refused.at("user").as_string(), "alice");
  EXPECT_EQ(refused.at("method").as_string(), "DELETE");
  EXPECT_EQ(refused.at("status").as_int64(), 403);
  EXPECT_NE(refused.at("error").as_string().find("forbidden"), std::string::npos);
  EXPECT_TRUE(refused.at("after").is_null());
  const auto& put = items[1].as_object();
  EXPECT_EQ(put.at("user").as_string(), "admin");
  EXPECT_EQ(put.at("route").as_string(), "/api/v1/resource-groups/{name}");
  EXPECT_NE(put.at("remote_addr").as_string().find("127.0.0.1"), std::string::npos);
  EXPECT_EQ(put.at("before").at("spec").at("cohort").as_string(), "");
  EXPECT_EQ(put.at("after").at("spec").at("cohort").as_string(), "shared");
  EXPECT_EQ(put.at("request").at("spec").at("cohort").as_string(), "shared");
  const auto& token = items[5].as_object();
  EXPECT_EQ(token.at("path").as_string(), "/api/v1/users/alice/tokens");
  EXPECT_EQ(token.at("after").at("token").as_string(), "[redacted]");
  EXPECT_EQ(r.body.find(alice_), std::string::npos);  // the secret is nowhere

  EXPECT_EQ(call("GET", "/api/v1/audit", alice_).status, 403);
  auto mine = call("GET", "/api/v1/audit?user=alice", admin_);
  EXPECT_EQ(parse(mine).at("items").as_array().size(), 1u);
}

TEST_F(ApiTest, OverviewAlertsAndPricesAnswerInTheirShapes) {
  seed();
  connect_agent();
  ASSERT_TRUE(cp_->sample_fleet().ok());
  auto o = call("GET", "/api/v1/overview?hours=2", alice_);
  ASSERT_EQ(o.status, 200) << o.body;
  auto ov = parse(o);
  EXPECT_EQ(ov.at("bucket_s").as_int64(), 60);
  EXPECT_EQ(ov.at("clusters").at(0).at("gpus").at("total").as_int64(), 8);
  EXPECT_DOUBLE_EQ(ov.at("clusters").at(0).at("cells").as_array().back().at("allocation").as_double(), 0.0);
  EXPECT_EQ(call("GET", "/api/v1/overview?hours=0", alice_).status, 400);

  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  HttpRequestOptions zh;
  zh.headers["Accept-Language"] = "zh-CN";
  auto a = call("GET", "/api/v1/alerts?state=pending", admin_, "", "application/json", zh);
  ASSERT_EQ(a.status, 200) << a.body;
  EXPECT_TRUE(parse(a).at("items").as_array().empty());  // c1 online, nothing over quota
  EXPECT_EQ(call("GET", "/api/v1/alerts?state=burning", admin_).status, 400);

  const char* prices = R"(apiVersion: cubeplane/v1
kind: PriceTable
metadata: {name: default}
spec:
  currency: CNY
  prices:
    - {resource: gpu/a100, per_hour: "15.5", from: 2026-01-01}
)";
  EXPECT_EQ(call("PUT", "/api/v1/price-table", alice_, prices, kYaml).status, 403);
  auto bad = call("PUT", "/api/v1/price-table", admin_, std::string(prices) + "    - {resource: gpu/a100, per_hour: x, from: 2026-01-01}\n", kYaml);
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(parse(call("GET", "/api/v1/price-table", alice_)).at("spec").at("prices").as_array().size(), 0u);
  ASSERT_EQ(call("PUT", "/api/v1/price-table", admin_, prices, kYaml).status, 200);
  auto got = parse(call("GET", "/api/v1/price-table", alice_));
  EXPECT_EQ(got.at("spec").at("currency").as_string(), "CNY");
  EXPECT_EQ(got.at("spec").at("prices").at(0).at("per_hour").as_string(), "15.5");
}

TEST_F(ApiTest, ApprovalsAreAskedForListedAndDecidedOverHttp) {
  seed();
  const char* rg_b = "apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: rg-b}\nspec:\n  clusters: [c1]\n";
  ASSERT_EQ(call("PUT", "/api/v1/resource-groups/rg-b", admin_, rg_b, kYaml).status, 201);
  const std::string pa = std::string(kProjectGroup) + "  resource_groups: [{name: rg-b, approval: required}]\n";
  ASSERT_EQ(call("PUT", "/api/v1/project-groups/pa", admin_, pa, kYaml).status, 200);
  auto asked = call("POST", "/api/v1/approvals", alice_,
                    R"({"project_group":"pa","resource_group":"rg-b","reason":"deadline"})");
  ASSERT_EQ(asked.status, 201) << asked.body;
  const std::string id(parse(asked).at("id").as_string());
  EXPECT_FALSE(parse(asked).at("active").as_bool());
  EXPECT_EQ(error_code(call("POST", "/api/v1/approvals", alice_, R"({"project_group":"pa","resource_group":"rg-b"})")),
            "already_exists");
  EXPECT_EQ(call("POST", "/api/v1/approvals/" + id + "/approve", alice_).status, 403);
  auto list = call("GET", "/api/v1/approvals?state=pending", alice_);
  ASSERT_EQ(list.status, 200);
  EXPECT_EQ(parse(list).at("items").as_array().size(), 1u);
  EXPECT_EQ(call("GET", "/api/v1/approvals?state=maybe", alice_).status, 400);
  auto ok = call("POST", "/api/v1/approvals/" + id + "/approve", admin_, R"({"ttl_s": 3600})");
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_TRUE(parse(ok).at("active").as_bool());
  EXPECT_EQ(parse(ok).at("expires_at").as_int64(), clock_.now_ms() + 3'600'000);
  auto pipeline = pipeline_yaml();
  pipeline.insert(pipeline.find("  priority:"), "  resource_group: rg-b\n");
  EXPECT_EQ(call("POST", "/api/v1/pipelines?dry_run=true", alice_, pipeline, kYaml).status, 200);
}

}  // namespace
}  // namespace cp::http
