// The fixture of the REST API tests (routes_test.cpp, audit_test.cpp): a real
// HttpServer on 127.0.0.1:0 over a real ControlPlane (SQLite in memory, local
// object store in a temp dir), called with libcurl the way the CLI and the
// agent call it, and the documents that seed() applies.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/http_client.h"
#include "http/routes.h"
#include "objstore/object_store.h"
#include "server/control_plane.h"
#include "store/store.h"
#include "test_util.h"

namespace cp::http::testing {

inline constexpr const char* kYaml = "application/yaml";

inline constexpr const char* kResourceGroup = R"(apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-a}
spec:
  clusters: [c1]
  quota:
    gpu/a100: {guaranteed: 4}
)";

inline constexpr const char* kProjectGroup = R"(apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: pa}
spec:
  members: [{user: alice, role: member}]
  default_resource_group: rg-a
)";

inline constexpr const char* kPriorityClass = R"(apiVersion: cubeplane/v1
kind: PriorityClass
metadata: {name: batch}
spec: {value: 100}
)";

inline std::string pipeline_yaml(int gpus = 1) {
  return "apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, project_group: pa}\nspec:\n"
         "  priority: batch\n  steps:\n    - name: train\n      command: [\"true\"]\n"
         "      resources: {cpu: \"1\", gpu: " +
         std::to_string(gpus) + ", gpu_type: a100}\n";
}

inline json::value parse(const HttpResponse& r) {
  auto v = parse_json(r.body);
  EXPECT_TRUE(v.ok()) << r.body;
  return v.ok() ? *v : json::value();
}

inline std::string error_code(const HttpResponse& r) {
  auto v = parse(r);
  if (!v.is_object() || !v.as_object().contains("error")) return "";
  return std::string(v.at("error").at("code").as_string());
}

class ApiTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cp-http-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "objects");
    store_ = std::move(open_store("sqlite::memory:")).value();
    ASSERT_TRUE(store_->migrate().ok());
    objects_ = std::move(open_object_store("file://" + (dir_ / "objects").string())).value();
    ServerConfig cfg;
    cfg.long_poll_max_ms = 60'000;
    cp_ = std::make_unique<ControlPlane>(*store_, *objects_, clock_, cfg);
    auto admin = cp_->ensure_admin_token();
    ASSERT_TRUE(admin.ok() && admin->has_value());
    admin_ = **admin;
    add_api_routes(router_, *cp_, &metrics_, web_root());
    server_ = std::make_unique<TestServer>(router_, HttpLimits{}, &metrics_);
  }
  void TearDown() override {
    server_.reset();  // before the ControlPlane whose signals it subscribes to
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }
  virtual std::string web_root() { return ""; }

  HttpResponse call(const std::string& method, const std::string& path, const std::string& token = "",
                    const std::string& body = "", const std::string& content_type = "application/json",
                    HttpRequestOptions opts = {}) {
    if (!token.empty()) opts.headers["Authorization"] = "Bearer " + token;
    HttpClient client;
    auto r = client.request(method, server_->url(path), body, content_type, opts);
    EXPECT_TRUE(r.ok()) << method << " " << path << ": " << (r.ok() ? "" : r.error().to_string());
    return r.ok() ? *r : HttpResponse{};
  }

  // Cluster c1, user alice (member of pa), rg-a, pa, priority class batch.
  void seed() {
    auto c = call("POST", "/api/v1/clusters", admin_,
                  R"({"id":"c1","display_name":"C1","executor":"local","storage_pool":"pool-a"})");
    ASSERT_EQ(c.status, 201) << c.body;
    ASSERT_EQ(call("POST", "/api/v1/users", admin_, R"({"name":"alice","role":"user"})").status, 201);
    auto tok = call("POST", "/api/v1/users/alice/tokens", admin_);
    ASSERT_EQ(tok.status, 201) << tok.body;
    alice_ = std::string(parse(tok).at("token").as_string());
    ASSERT_EQ(call("PUT", "/api/v1/priority-classes/batch", admin_, kPriorityClass, kYaml).status, 201);
    auto rg = call("PUT", "/api/v1/resource-groups/rg-a", admin_, kResourceGroup, kYaml);
    ASSERT_EQ(rg.status, 201) << rg.body;
    auto pg = call("PUT", "/api/v1/project-groups/pa", admin_, kProjectGroup, kYaml);
    ASSERT_EQ(pg.status, 201) << pg.body;
  }

  // Registers an agent for c1 over HTTP and reports one node with 8 GPUs.
  std::string connect_agent() {
    auto boot = call("POST", "/api/v1/clusters/c1/bootstrap-tokens", admin_);
    EXPECT_EQ(boot.status, 201) << boot.body;
    json::object reg{{"cluster_id", "c1"},
                     {"bootstrap_token", parse(boot).at("token")},
                     {"agent_instance", "i-1"},
                     {"agent_version", "test"}};
    auto r = call("POST", "/api/v1/agent/register", "", json::serialize(reg));
    EXPECT_EQ(r.status, 200) << r.body;
    std::string cred(parse(r).at("credential").as_string());
    auto s = sync(cred, json::array{});
    EXPECT_EQ(s.status, 200) << s.body;
    return cred;
  }

  HttpResponse sync(const std::string& cred, json::array attempts, std::int64_t wait_ms = 0,
                    HttpRequestOptions opts = {}) {
    json::object node{{"name", "n1"},
                      {"labels", json::object{{"gpu-type", "a100"}}},
                      {"capacity", json::object{{"cpu", "16"}, {"memory", "64Gi"}, {"gpu/a100", "8"}}},
                      {"allocatable", json::object{{"cpu", "16"}, {"memory", "64Gi"}, {"gpu/a100", "8"}}},
                      {"ready", true}};
    json::array gpus;
    for (int i = 0; i < 8; ++i) gpus.push_back(json::object{{"index", i}, {"uuid", "u" + std::to_string(i)}, {"model", "a100"}});
    node["gpus"] = std::move(gpus);
    json::object req{{"cluster_id", "c1"},          {"agent_instance", "i-1"},
                     {"seq", ++seq_},               {"nodes", json::array{node}},
                     {"attempts", std::move(attempts)}, {"wait_ms", wait_ms}};
    return call("POST", "/api/v1/agent/sync", cred, json::serialize(req), "application/json", std::move(opts));
  }

  std::string submit() {
    auto r = call("POST", "/api/v1/pipelines", alice_, pipeline_yaml(), kYaml);
    EXPECT_EQ(r.status, 201) << r.body;
    if (r.status != 201) return "";
    return std::string(parse(r).at("tasks").at(0).at("id").as_string());
  }

  std::size_t task_count() {
    auto r = call("GET", "/api/v1/tasks", admin_);
    EXPECT_EQ(r.status, 200) << r.body;
    return parse(r).at("items").as_array().size();
  }

  std::filesystem::path dir_;
  SimulatedClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ObjectStore> objects_;
  std::unique_ptr<ControlPlane> cp_;
  Metrics metrics_;
  Router router_;
  std::unique_ptr<TestServer> server_;
  std::string admin_, alice_;
  std::int64_t seq_ = 0;
};

}  // namespace cp::http::testing
