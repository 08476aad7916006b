// The audit log covers every change made through the API: one case per
// mutating route, run against real objects, its row checked field by field;
// refusals are recorded with their error, dry runs not at all, and no secret
// handed out by a call reaches the log.
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "api_test.h"
#include "common/clock.h"
#include "common/ids.h"

namespace cp::http {
namespace {

using testing::ApiTest;
using testing::kProjectGroup;
using testing::kResourceGroup;
using testing::kYaml;
using testing::parse;
using testing::pipeline_yaml;

// One call and the row it must leave.
struct Change {
  std::string method;
  std::string route;  // the pattern it exercises: the row's `route`
  std::string path;   // "{task}" and "{approval}" stand for ids kept from earlier answers
  std::string body;
  std::string content_type = "application/json";
  bool by_admin = true;  // else alice, a member of pa
  int status = 200;
  // The path names an object that a GET of it shows: the row has `before`.
  // Otherwise (creations, actions, a missing object) `before` is null.
  bool existed = false;
  // A dry run changes nothing and leaves no row.
  bool audited = true;
  // {name, JSON pointer}: an id in the answer that later paths use.
  std::pair<std::string, std::string> keep;
  // JSON pointer to a secret in the answer: it must show in the row as
  // "[redacted]" and appear nowhere in the log.
  std::string secret;
};

bool mutating(const std::string& method) {
  return method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE";
}

class AuditTest : public ApiTest {
 protected:
  json::array audit_rows() {
    auto r = call("GET", "/api/v1/audit?limit=1000", admin_);
    EXPECT_EQ(r.status, 200) << r.body;
    auto v = parse(r);
    return v.is_object() ? v.at("items").as_array() : json::array{};
  }
};

// Every POST, PUT, PATCH and DELETE a user can make has a case below; a
// route added without one fails this test by name, so no endpoint ships
// without its audit row being checked.
TEST_F(AuditTest, EveryMutatingRouteWritesAnAuditRow) {
  seed();
  const std::string agent_credential = connect_agent();  // node c1/n1, to patch

  const char* urgent = "apiVersion: cubeplane/v1\nkind: PriorityClass\nmetadata: {name: urgent}\nspec: {value: 500}\n";
  const char* urgent_raised =
      "apiVersion: cubeplane/v1\nkind: PriorityClass\nmetadata: {name: urgent}\nspec: {value: 600}\n";
  const char* rg_b = "apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: rg-b}\nspec:\n  clusters: [c1]\n";
  const char* rg_c = "apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: rg-c}\nspec:\n  clusters: [c1]\n";
  const char* pb = "apiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: pb}\nspec:\n"
                   "  members: [{user: alice, role: member}]\n  default_resource_group: rg-a\n";
  const std::string pa_with_approval =
      std::string(kProjectGroup) + "  resource_groups: [{name: rg-b, approval: required}]\n";
  const std::string prices = "apiVersion: cubeplane/v1\nkind: PriceTable\nmetadata: {name: default}\nspec:\n"
                             "  currency: CNY\n  prices:\n"
                             "    - {resource: gpu/a100, per_hour: \"15.5\", from: 2026-01-01}\n";
  const std::string this_month = format_time(clock_.now_ms()).substr(0, 7);  // YYYY-MM
  const std::string ask_rg_b = R"({"project_group":"pa","resource_group":"rg-b","reason":"deadline"})";

  // In order: later cases use what earlier ones made (c2, bob, urgent, rg-b,
  // the task, the approvals).
  const std::vector<Change> changes = {
      // Clusters and nodes.
      {.method = "POST", .route = "/api/v1/clusters", .path = "/api/v1/clusters",
       .body = R"({"id":"c2","display_name":"C2","executor":"local","storage_pool":"pool-a"})", .status = 201},
      {.method = "PATCH", .route = "/api/v1/clusters/{id}", .path = "/api/v1/clusters/c2",
       .body = R"({"display_name":"C2 renamed","labels":{"site":"b"}})", .existed = true},
      {.method = "POST", .route = "/api/v1/clusters/{id}/bootstrap-tokens",
       .path = "/api/v1/clusters/c2/bootstrap-tokens",
       .body = R"({"ttl_s":3600})", .status = 201, .secret = "/token"},
      // c2 is offline (no agent yet) and has nothing Unknown: confirmed is empty.
      {.method = "POST", .route = "/api/v1/clusters/{id}/confirm-lost", .path = "/api/v1/clusters/c2/confirm-lost"},
      {.method = "PATCH", .route = "/api/v1/clusters/{id}/nodes/{name}", .path = "/api/v1/clusters/c1/nodes/n1",
       .body = R"({"labels":{"zone":"a"},"maintenance":false})", .existed = true},
      // Users and tokens: an admin makes bob and his token, alice her own.
      {.method = "POST", .route = "/api/v1/users", .path = "/api/v1/users", .body = R"({"name":"bob","role":"user"})",
       .status = 201},
      {.method = "POST", .route = "/api/v1/users/{name}/tokens", .path = "/api/v1/users/bob/tokens",
       .body = R"({"description":"ci","ttl_s":3600})", .status = 201, .secret = "/token"},
      {.method = "POST", .route = "/api/v1/users/{name}/tokens", .path = "/api/v1/users/alice/tokens",
       .by_admin = false, .status = 201, .secret = "/token"},
      // Documents: create, replace, delete of each kind; PUT that creates.
      {.method = "POST", .route = "/api/v1/priority-classes", .path = "/api/v1/priority-classes", .body = urgent,
       .content_type = kYaml, .status = 201},
      {.method = "PUT", .route = "/api/v1/priority-classes/{name}", .path = "/api/v1/priority-classes/urgent",
       .body = urgent_raised, .content_type = kYaml, .existed = true},
      {.method = "DELETE", .route = "/api/v1/priority-classes/{name}", .path = "/api/v1/priority-classes/urgent",
       .existed = true},
      {.method = "POST", .route = "/api/v1/resource-groups", .path = "/api/v1/resource-groups", .body = rg_c,
       .content_type = kYaml, .status = 201},
      {.method = "DELETE", .route = "/api/v1/resource-groups/{name}", .path = "/api/v1/resource-groups/rg-c",
       .existed = true},
      {.method = "PUT", .route = "/api/v1/resource-groups/{name}", .path = "/api/v1/resource-groups/rg-b", .body = rg_b,
       .content_type = kYaml, .status = 201},
      {.method = "POST", .route = "/api/v1/project-groups", .path = "/api/v1/project-groups", .body = pb,
       .content_type = kYaml, .status = 201},
      {.method = "DELETE", .route = "/api/v1/project-groups/{name}", .path = "/api/v1/project-groups/pb",
       .existed = true},
      {.method = "PUT", .route = "/api/v1/project-groups/{name}", .path = "/api/v1/project-groups/pa",
       .body = pa_with_approval, .content_type = kYaml, .existed = true},
      // Pipelines and tasks.
      {.method = "POST", .route = "/api/v1/pipelines", .path = "/api/v1/pipelines", .body = pipeline_yaml(),
       .content_type = kYaml, .by_admin = false, .status = 201, .keep = {"task", "/tasks/0/id"}},
      {.method = "POST", .route = "/api/v1/tasks/{id}/cancel", .path = "/api/v1/tasks/{task}/cancel", .by_admin = false},
      // Prices: the table always exists (empty at first), so a PUT has a before.
      {.method = "PUT", .route = "/api/v1/price-table", .path = "/api/v1/price-table", .body = prices,
       .content_type = kYaml, .existed = true},
      // The usage ledger of this (simulated) month, rebuilt from the events.
      {.method = "POST", .route = "/api/v1/usage/rebuild", .path = "/api/v1/usage/rebuild",
       .body = R"({"from":")" + this_month + R"("})"},
      // Approvals: asked, denied; asked again, approved, revoked.
      {.method = "POST", .route = "/api/v1/approvals", .path = "/api/v1/approvals", .body = ask_rg_b,
       .by_admin = false, .status = 201, .keep = {"approval", "/id"}},
      {.method = "POST", .route = "/api/v1/approvals/{id}/deny", .path = "/api/v1/approvals/{approval}/deny",
       .body = R"({"note":"not now"})"},
      {.method = "POST", .route = "/api/v1/approvals", .path = "/api/v1/approvals", .body = ask_rg_b,
       .by_admin = false, .status = 201, .keep = {"approval", "/id"}},
      {.method = "POST", .route = "/api/v1/approvals/{id}/approve", .path = "/api/v1/approvals/{approval}/approve",
       .body = R"({"ttl_s":3600})"},
      {.method = "POST", .route = "/api/v1/approvals/{id}/revoke", .path = "/api/v1/approvals/{approval}/revoke"},
      {.method = "DELETE", .route = "/api/v1/clusters/{id}", .path = "/api/v1/clusters/c2", .existed = true},

      // Refusals are audited too, with the error and without `after`.
      // 400, a body that does not parse or does not validate:
      {.method = "PATCH", .route = "/api/v1/clusters/{id}", .path = "/api/v1/clusters/c1",
       .body = R"({"display_name": )", .status = 400, .existed = true},
      {.method = "POST", .route = "/api/v1/pipelines", .path = "/api/v1/pipelines",
       .body = "apiVersion: cubeplane/v1\nkind: [Pipeline\n", .content_type = kYaml, .by_admin = false, .status = 400},
      {.method = "PUT", .route = "/api/v1/price-table", .path = "/api/v1/price-table",
       .body = prices + "    - {resource: gpu/a100, per_hour: x, from: 2026-01-01}\n", .content_type = kYaml,
       .status = 400, .existed = true},
      // 403, a member doing an admin's work:
      {.method = "POST", .route = "/api/v1/users", .path = "/api/v1/users", .body = R"({"name":"eve","role":"admin"})",
       .by_admin = false, .status = 403},
      {.method = "PUT", .route = "/api/v1/price-table", .path = "/api/v1/price-table", .body = prices,
       .content_type = kYaml, .by_admin = false, .status = 403, .existed = true},
      {.method = "PATCH", .route = "/api/v1/clusters/{id}/nodes/{name}", .path = "/api/v1/clusters/c1/nodes/n1",
       .body = R"({"maintenance":true})", .by_admin = false, .status = 403, .existed = true},
      {.method = "POST", .route = "/api/v1/clusters/{id}/bootstrap-tokens",
       .path = "/api/v1/clusters/c1/bootstrap-tokens",
       .by_admin = false, .status = 403},
      {.method = "POST", .route = "/api/v1/clusters/{id}/confirm-lost", .path = "/api/v1/clusters/c1/confirm-lost",
       .by_admin = false, .status = 403},
      // 404, nothing there (so no `before` either):
      {.method = "DELETE", .route = "/api/v1/clusters/{id}", .path = "/api/v1/clusters/c9", .status = 404},

      // Dry runs change nothing and leave no row, however the flag is spelled.
      {.method = "POST", .route = "/api/v1/pipelines", .path = "/api/v1/pipelines?dry_run=true", .body = pipeline_yaml(),
       .content_type = kYaml, .by_admin = false, .audited = false},
      {.method = "POST", .route = "/api/v1/pipelines", .path = "/api/v1/pipelines?dry_run=1", .body = pipeline_yaml(),
       .content_type = kYaml, .by_admin = false, .audited = false},
      // A route without a dry run ignores the flag and makes the change, so
      // the flag must not keep that change out of the log.
      {.method = "PUT", .route = "/api/v1/resource-groups/{name}", .path = "/api/v1/resource-groups/rg-a?dry_run=true",
       .body = std::string(kResourceGroup) + "  cohort: shared\n", .content_type = kYaml, .existed = true},
  };

  // Coverage: every mutating route a user can call has a successful case.
  // The agent protocol authenticates agents, not users, and is not audited;
  // any other mutating route without a user would escape the log.
  std::set<std::pair<std::string, std::string>> covered, routed;
  for (const auto& c : changes) {
    if (c.audited && c.status / 100 == 2) covered.emplace(c.method, c.route);
  }
  for (const auto& r : router_.routes()) {
    if (!mutating(r.method)) continue;
    routed.emplace(r.method, r.pattern);
    if (r.doc.auth == AuthKind::agent || r.doc.auth == AuthKind::none) {
      EXPECT_TRUE(r.pattern.starts_with("/api/v1/agent/"))
          << r.method << " " << r.pattern << " changes state without a user: it would not be audited";
      continue;
    }
    EXPECT_TRUE(covered.count({r.method, r.pattern}))
        << r.method << " " << r.pattern << " has no case in the audit table of " << __FILE__;
  }
  for (const auto& c : changes) {
    EXPECT_TRUE(routed.count({c.method, c.route})) << c.method << " " << c.route << ": a case for no route";
  }

  std::map<std::string, std::string> ids;  // kept from answers: "task", "approval"
  std::vector<std::string> secrets{admin_, alice_, agent_credential};
  for (const auto& c : changes) {
    std::string path = c.path;
    for (const auto& [name, id] : ids) {
      const std::string hole = "{" + name + "}";
      if (auto at = path.find(hole); at != std::string::npos) path.replace(at, hole.size(), id);
    }
    SCOPED_TRACE(c.method + " " + path + (c.by_admin ? " by admin" : " by alice"));

    std::set<std::string> seen;
    for (const auto& row : audit_rows()) seen.insert(std::string(row.at("id").as_string()));
    auto r = call(c.method, path, c.by_admin ? admin_ : alice_, c.body, c.content_type);
    ASSERT_EQ(r.status, c.status) << r.body;
    json::value answer = r.status / 100 == 2 ? parse(r) : json::value();
    if (!c.keep.first.empty()) ids[c.keep.first] = std::string(answer.at_pointer(c.keep.second).as_string());
    if (!c.secret.empty()) secrets.emplace_back(answer.at_pointer(c.secret).as_string());

    // The row is written before the answer is sent, so it is there now.
    std::vector<json::object> added;
    for (const auto& row : audit_rows()) {
      if (!seen.count(std::string(row.at("id").as_string()))) added.push_back(row.as_object());
    }
    if (!c.audited) {
      EXPECT_TRUE(added.empty()) << "a dry run was audited: " << json::serialize(added.front());
      continue;
    }
    ASSERT_EQ(added.size(), 1u) << "one change, one row";
    const auto& row = added.front();
    SCOPED_TRACE(json::serialize(row));
    EXPECT_EQ(row.at("method").as_string(), c.method);
    EXPECT_EQ(row.at("route").as_string(), c.route);
    EXPECT_EQ(row.at("path").as_string(), path);
    EXPECT_EQ(row.at("user").as_string(), c.by_admin ? "admin" : "alice");
    EXPECT_EQ(row.at("status").as_int64(), c.status);
    EXPECT_NE(row.at("remote_addr").as_string().find("127.0.0.1"), std::string::npos);
    EXPECT_FALSE(row.at("request_id").as_string().empty());
    EXPECT_EQ(row.at("request").is_null(), c.body.empty());
    EXPECT_EQ(row.at("before").is_object(), c.existed);  // else null
    if (c.status / 100 == 2) {
      EXPECT_EQ(row.at("error").as_string(), "");
      // A DELETE leaves nothing to show; every other change shows its result.
      EXPECT_EQ(row.at("after").is_null(), c.method == "DELETE");
    } else {
      EXPECT_FALSE(row.at("error").as_string().empty());
      EXPECT_TRUE(row.at("after").is_null());
    }
    if (!c.secret.empty()) {
      EXPECT_EQ(row.at("after").at_pointer(c.secret), "[redacted]");
    }
  }

  // No secret handed out above, nor the tokens the calls were made with,
  // nor their stored hashes, appears anywhere in the log.
  auto log = call("GET", "/api/v1/audit?limit=1000", admin_);
  ASSERT_EQ(log.status, 200);
  ASSERT_EQ(secrets.size(), 6u);  // admin, alice, agent; bootstrap, bob's and alice's new tokens
  for (const auto& s : secrets) {
    ASSERT_FALSE(s.empty());
    EXPECT_EQ(log.body.find(s), std::string::npos) << s.substr(0, 6) << "... is in the audit log";
    EXPECT_EQ(log.body.find(sha256_hex(s)), std::string::npos)
        << "the hash of " << s.substr(0, 6) << "... is in the audit log";
  }
}

// A submit writes its row in its own transaction (one commit, not two): the
// row must be the one the audit hook would have written after the answer:
// the answer as `after`, the document as `request`, secrets redacted in both.
TEST_F(AuditTest, ASubmitsRowIsItsAnswerWrittenWithItsTasks) {
  seed();
  const std::string yaml =
      "apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, project_group: pa}\nspec:\n"
      "  priority: batch\n  steps:\n    - name: train\n      command: [\"true\"]\n"
      "      env: {password: hunter2, EPOCHS: \"3\"}\n      resources: {cpu: \"1\"}\n";
  auto r = call("POST", "/api/v1/pipelines", alice_, yaml, kYaml);
  ASSERT_EQ(r.status, 201) << r.body;
  json::value answer = parse(r);
  const auto rows = audit_rows();
  ASSERT_FALSE(rows.empty());
  const auto& row = rows.front().as_object();  // newest first
  EXPECT_EQ(row.at("route").as_string(), "/api/v1/pipelines");
  EXPECT_EQ(row.at("status").as_int64(), 201);
  EXPECT_EQ(row.at("user").as_string(), "alice");
  EXPECT_FALSE(row.at("request_id").as_string().empty());
  EXPECT_EQ(row.at("error").as_string(), "");
  EXPECT_TRUE(row.at("before").is_null());
  // The answer shows the step's env as given; the row, redacted.
  auto& env = answer.at("pipeline").at("steps").at(0).at("env").as_object();
  EXPECT_EQ(env.at("password").as_string(), "hunter2");
  env["password"] = "[redacted]";
  EXPECT_EQ(row.at("after"), answer);
  EXPECT_EQ(row.at("request").at("spec").at("steps").at(0).at("env").at("password").as_string(), "[redacted]");
  EXPECT_EQ(r.body.find("hunter2") != std::string::npos, true);
  auto log = call("GET", "/api/v1/audit?limit=1000", admin_);
  EXPECT_EQ(log.body.find("hunter2"), std::string::npos);
  // One row for the submit, none from the hook beside it.
  std::size_t submits = 0;
  for (const auto& x : rows) submits += x.at("route").as_string() == "/api/v1/pipelines";
  EXPECT_EQ(submits, 1u);
}

}  // namespace
}  // namespace cp::http
