#include "http/openapi.h"

#include <gtest/gtest.h>

#include <set>

#include "openapi_check.h"

namespace cp::http {
namespace {

Handler nop() {
  return [](Request&) { return json_response(200, json::object{}); };
}

Router sample_router() {
  Router r;
  r.add("GET", "/healthz", {.summary = "liveness", .tag = "health", .auth = AuthKind::none}, nop());
  r.add("GET", "/api/v1/tasks",
        {.summary = "list tasks",
         .tag = "tasks",
         .query = {{.name = "state", .description = "a task state"}, {.name = "limit", .type = "integer"}}},
        nop());
  r.add("GET", "/api/v1/tasks/{id}/logs",
        {.summary = "logs", .tag = "tasks", .response_content_types = {"text/plain"}}, nop());
  r.add("PUT", "/api/v1/resource-groups/{name}",
        {.summary = "apply", .tag = "groups", .auth = AuthKind::admin, .body = BodyKind::document}, nop());
  r.add("POST", "/api/v1/agent/sync",
        {.summary = "sync", .tag = "agent", .auth = AuthKind::agent, .body = BodyKind::json}, nop());
  r.add("PATCH", "/api/v1/clusters/{id}/nodes/{name}", {.summary = "node", .tag = "clusters"}, nop());
  return r;
}

// Every route is in the document with its method, and nothing else is.
TEST(OpenApi, MatchesRouteTable) {
  auto router = sample_router();
  auto doc = json::parse(json::serialize(build_openapi(router)));  // round trip: it is real JSON
  testing::expect_document_matches_routes(doc, router);
}

// Structure: version, security scheme, Error schema, parameters, bodies, responses.
TEST(OpenApi, DescribesParametersBodiesAndErrors) {
  auto router = sample_router();
  auto doc = build_openapi(router);
  EXPECT_EQ(doc.at("openapi"), "3.0.3");
  EXPECT_TRUE(doc.at("info").at("title").is_string());
  EXPECT_EQ(doc.at("components").at("securitySchemes").at("bearerAuth").at("scheme"), "bearer");
  EXPECT_TRUE(doc.at("components").at("schemas").at("Error").at("properties").as_object().contains("error"));

  auto& logs = doc.at("paths").at("/api/v1/tasks/{id}/logs").at("get").as_object();
  auto& p0 = logs.at("parameters").as_array().at(0);
  EXPECT_EQ(p0.at("name"), "id");
  EXPECT_EQ(p0.at("in"), "path");
  EXPECT_EQ(p0.at("required"), true);
  EXPECT_TRUE(logs.at("responses").at("200").at("content").as_object().contains("text/plain"));
  EXPECT_EQ(logs.at("responses").at("404").at("$ref"), "#/components/responses/Error");

  auto& list = doc.at("paths").at("/api/v1/tasks").at("get").as_object();
  ASSERT_EQ(list.at("parameters").as_array().size(), 2u);
  EXPECT_EQ(list.at("parameters").as_array()[1].at("schema").at("type"), "integer");

  auto& apply = doc.at("paths").at("/api/v1/resource-groups/{name}").at("put").as_object();
  auto& content = apply.at("requestBody").at("content").as_object();
  EXPECT_TRUE(content.contains("application/yaml"));
  EXPECT_TRUE(content.contains("application/json"));
  EXPECT_EQ(apply.at("x-cubeplane-auth"), "admin");

  auto& health = doc.at("paths").at("/healthz").at("get").as_object();
  EXPECT_TRUE(health.at("security").as_array().empty());
  EXPECT_FALSE(health.at("responses").as_object().contains("401"));

  // operationIds are unique.
  std::set<std::string> ids;
  for (const auto& [path, item] : doc.at("paths").as_object()) {
    for (const auto& [method, op] : item.as_object()) {
      EXPECT_TRUE(ids.insert(std::string(op.at("operationId").as_string())).second) << path << " " << method;
    }
  }
}

}  // namespace
}  // namespace cp::http
