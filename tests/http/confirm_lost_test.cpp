// POST /api/v1/clusters/{id}/confirm-lost over HTTP: a platform admin
// confirms that the Unknown attempts of an offline Slurm or Kubernetes
// cluster are gone (server/unknown_attempts.h). Each refusal says why in
// English and Chinese and changes nothing; a second confirm is a 200 that
// confirms nothing.
#include <gtest/gtest.h>

#include "api_test.h"

namespace cp::http {
namespace {

using testing::ApiTest;
using testing::error_code;
using testing::kYaml;
using testing::parse;

// rg-a of the seed, with cs beside c1.
std::string group_with_slurm() {
  std::string rg = testing::kResourceGroup;
  rg.replace(rg.find("[c1]"), 4, "[c1, cs]");
  return rg;
}

class ConfirmLostApiTest : public ApiTest {
 protected:
  // cs, a Slurm cluster in rg-a, ran alice's task; then its agent fell
  // silent past lost_after: the task's attempt is Unknown. Its id.
  std::string task_with_an_unknown_attempt() {
    seed();
    auto c = call("POST", "/api/v1/clusters", admin_, R"({"id":"cs","executor":"slurm","storage_pool":"pool-a"})");
    EXPECT_EQ(c.status, 201) << c.body;
    EXPECT_EQ(call("PUT", "/api/v1/resource-groups/rg-a", admin_, group_with_slurm(), kYaml).status, 200);
    auto boot = cp_->create_bootstrap_token(cp_->authenticate(admin_).value(), "cs", json::value(nullptr));
    EXPECT_TRUE(boot.ok());
    auto reg = cp_->agent_register(RegisterRequest{"cs", std::string(boot->at("token").as_string()), "i-s", "t"}, "");
    EXPECT_TRUE(reg.ok());
    agent_ = cp_->authenticate_agent(reg->credential).value();
    agent_sync({});
    const std::string task = submit();
    EXPECT_TRUE(cp_->schedule_once().ok());
    auto start = agent_sync({});
    EXPECT_EQ(start.start.size(), 1u);
    if (start.start.empty()) return task;
    agent_sync({AttemptReport{start.start[0].attempt_id, start.start[0].epoch, AttemptState::Running, std::nullopt,
                              clock_.now_ms(), 0, ""}});
    clock_.advance_ms(41'000);
    EXPECT_TRUE(cp_->check_liveness().ok());
    EXPECT_EQ(attempt_state(task), "Unknown");
    return task;
  }

  SyncResponse agent_sync(std::vector<AttemptReport> attempts) {
    SyncRequest req;
    req.cluster_id = "cs";
    req.agent_instance = "i-s";
    NodeReport n;
    n.name = "n1";
    n.labels = {{"gpu-type", "a100"}};
    n.capacity = n.allocatable = Resources::parse_or_die("cpu:16,memory:64Gi,gpu/a100:8");
    req.nodes = {n};
    req.attempts = std::move(attempts);
    auto r = cp_->agent_sync(agent_, req);
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : SyncResponse{};
  }

  std::string attempt_state(const std::string& task) {
    auto r = call("GET", "/api/v1/tasks/" + task, admin_);
    return std::string(parse(r).at("attempts").at(0).at("state").as_string());
  }

  std::int64_t unknown_attempts(const std::string& cluster) {
    auto r = call("GET", "/api/v1/clusters/" + cluster, admin_);
    EXPECT_EQ(r.status, 200) << r.body;
    return parse(r).at("unknown_attempts").as_int64();
  }

  HttpResponse confirm(const std::string& cluster, const std::string& token, bool zh = false) {
    HttpRequestOptions opts;
    if (zh) opts.headers["Accept-Language"] = "zh-CN";
    return call("POST", "/api/v1/clusters/" + cluster + "/confirm-lost", token, "", "application/json", opts);
  }

  static std::string message(const HttpResponse& r) {
    auto v = parse(r);
    return std::string(v.as_object().contains("error") ? v.at("error").at("message").as_string()
                                                        : v.at("message").as_string());
  }

  // A refusal with `status` and `code`, its message holding `en` in English and `zh` in Chinese.
  void expect_refused(const std::string& cluster, const std::string& token, int status, const std::string& code,
                      const std::string& en, const std::string& zh) {
    auto r = confirm(cluster, token);
    EXPECT_EQ(r.status, status) << r.body;
    EXPECT_EQ(error_code(r), code);
    EXPECT_NE(message(r).find(en), std::string::npos) << r.body;
    auto in_zh = confirm(cluster, token, true);
    EXPECT_EQ(in_zh.status, status);
    EXPECT_NE(message(in_zh).find(zh), std::string::npos) << in_zh.body;
  }

  Principal agent_;
};

TEST_F(ConfirmLostApiTest, ConfirmsTheUnknownAttemptsOnceAndTheSecondCallConfirmsNothing) {
  const std::string task = task_with_an_unknown_attempt();
  EXPECT_EQ(unknown_attempts("cs"), 1);
  auto list = call("GET", "/api/v1/clusters", alice_);
  ASSERT_EQ(list.status, 200);
  const json::value listed = parse(list);  // held: the loop reads into it
  for (const auto& c : listed.at("items").as_array()) {
    EXPECT_EQ(c.at("unknown_attempts").as_int64(), c.at("id") == "cs" ? 1 : 0) << json::serialize(c);
  }

  auto r = confirm("cs", admin_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = parse(r);
  ASSERT_EQ(v.at("confirmed").as_array().size(), 1u);
  EXPECT_EQ(v.at("confirmed").at(0).at("task"), task.c_str());
  EXPECT_EQ(v.at("confirmed").at(0).at("requeued"), true);
  EXPECT_NE(message(r).find("1 attempt(s) of cluster cs confirmed lost"), std::string::npos) << r.body;
  EXPECT_EQ(attempt_state(task), "Lost");
  EXPECT_EQ(unknown_attempts("cs"), 0);
  auto t = parse(call("GET", "/api/v1/tasks/" + task, admin_));
  EXPECT_EQ(t.at("state"), "Queued");
  EXPECT_EQ(t.at("storage_pool"), "pool-a");

  auto again = confirm("cs", admin_);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_TRUE(parse(again).at("confirmed").as_array().empty());
  EXPECT_NE(message(again).find("nothing confirmed"), std::string::npos) << again.body;
  auto again_zh = confirm("cs", admin_, true);
  ASSERT_EQ(again_zh.status, 200);
  EXPECT_NE(std::string(parse(again_zh).at("message_zh").as_string()).find("没有可确认的尝试"), std::string::npos);
  EXPECT_EQ(parse(call("GET", "/api/v1/tasks/" + task, admin_)).at("attempts").as_array().size(), 1u);

  // Audited: who, from where, what it confirmed.
  auto audit = call("GET", "/api/v1/audit?limit=10", admin_);
  ASSERT_EQ(audit.status, 200);
  bool found = false;
  const json::value rows = parse(audit);
  for (const auto& row : rows.at("items").as_array()) {
    if (row.at("route") != "/api/v1/clusters/{id}/confirm-lost" || row.at("after").is_null()) continue;
    if (row.at("after").at("confirmed").as_array().empty()) continue;
    found = true;
    EXPECT_EQ(row.at("user"), "admin");
    EXPECT_NE(row.at("remote_addr").as_string().find("127.0.0.1"), std::string::npos);
    EXPECT_EQ(row.at("after").at("confirmed").at(0).at("task"), task.c_str());
  }
  EXPECT_TRUE(found) << audit.body;
}

TEST_F(ConfirmLostApiTest, OnlyPlatformAdminsMayConfirm) {
  const std::string task = task_with_an_unknown_attempt();
  expect_refused("cs", alice_, 403, "forbidden", "platform admins only", "仅平台管理员");
  EXPECT_EQ(attempt_state(task), "Unknown");
  EXPECT_EQ(unknown_attempts("cs"), 1);
}

TEST_F(ConfirmLostApiTest, AnUnknownClusterIs404) {
  seed();
  expect_refused("c9", admin_, 404, "not_found", "cluster \"c9\" not found", "cluster \"c9\" 不存在");
}

TEST_F(ConfirmLostApiTest, AClusterThatIsNotOfflineIs409ItsAgentReportsItself) {
  // Its agent came back without a word on the attempt: online, so the agent, not an admin, says how it ended.
  const std::string task = task_with_an_unknown_attempt();
  agent_sync({});
  expect_refused("cs", admin_, 409, "cluster_not_offline", "its agent reports its attempts itself", "自行报告");
  EXPECT_EQ(attempt_state(task), "Unknown");
  EXPECT_EQ(unknown_attempts("cs"), 1);
}

}  // namespace
}  // namespace cp::http
