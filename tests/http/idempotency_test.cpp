// POST /api/v1/pipelines with an Idempotency-Key header: the header's rules
// and the replayed answer over HTTP (the rules themselves:
// tests/server/idempotency_test.cpp).
#include <gtest/gtest.h>

#include "api_test.h"

namespace cp::http {
namespace {

using testing::ApiTest;
using testing::error_code;
using testing::kYaml;
using testing::parse;
using testing::pipeline_yaml;
using testing::RawClient;

HttpRequestOptions with_key(const std::string& key, const std::string& language = "en") {
  HttpRequestOptions o;
  o.headers["Idempotency-Key"] = key;
  o.headers["Accept-Language"] = language;
  return o;
}

TEST_F(ApiTest, ASubmitRetriedUnderItsKeyGetsTheFirstAnswerMarkedReplayed) {
  seed();
  auto first = call("POST", "/api/v1/pipelines", alice_, pipeline_yaml(), kYaml, with_key("k-1"));
  ASSERT_EQ(first.status, 201) << first.body;
  EXPECT_FALSE(first.headers.contains("idempotent-replayed"));
  auto retry = call("POST", "/api/v1/pipelines", alice_, pipeline_yaml(), kYaml, with_key("k-1"));
  ASSERT_EQ(retry.status, 201) << retry.body;
  EXPECT_EQ(retry.headers["idempotent-replayed"], "true");
  EXPECT_EQ(parse(retry), parse(first));
  EXPECT_EQ(task_count(), 1u);

  // Another body under the key, in the caller's language.
  auto other = call("POST", "/api/v1/pipelines", alice_, pipeline_yaml(2), kYaml, with_key("k-1", "zh-CN"));
  EXPECT_EQ(other.status, 422) << other.body;
  EXPECT_EQ(error_code(other), "idempotency_key_reused");
  EXPECT_NE(other.body.find("幂等键"), std::string::npos) << other.body;
  EXPECT_FALSE(other.headers.contains("idempotent-replayed"));
  // The same document written another way is another body: bytes are compared.
  auto reformatted =
      call("POST", "/api/v1/pipelines", alice_, pipeline_yaml() + "# retried\n", kYaml, with_key("k-1"));
  EXPECT_EQ(reformatted.status, 422) << reformatted.body;
  EXPECT_EQ(task_count(), 1u);

  // Without the header, the same body is a new pipeline.
  ASSERT_EQ(call("POST", "/api/v1/pipelines", alice_, pipeline_yaml(), kYaml).status, 201);
  EXPECT_EQ(task_count(), 2u);
}

TEST_F(ApiTest, AMalformedIdempotencyKeyIs400AndCreatesNothing) {
  seed();
  for (const std::string& bad : {std::string(256, 'k'), std::string("caf\xc3\xa9")}) {
    auto r = call("POST", "/api/v1/pipelines", alice_, pipeline_yaml(), kYaml, with_key(bad));
    EXPECT_EQ(r.status, 400) << r.body;
    EXPECT_EQ(error_code(r), "invalid_field");
    EXPECT_NE(r.body.find("Idempotency-Key"), std::string::npos) << r.body;
  }
  // An empty header (libcurl does not send one: written by hand).
  const std::string body = pipeline_yaml();
  RawClient c(server_->port);
  ASSERT_TRUE(c.send("POST /api/v1/pipelines HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer " +
                     alice_ + "\r\nContent-Type: application/yaml\r\nAccept-Language: zh-CN\r\nIdempotency-Key:\r\n"
                     "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body));
  auto raw = c.read_all();
  EXPECT_TRUE(raw.starts_with("HTTP/1.1 400")) << raw;
  EXPECT_NE(raw.find("Idempotency-Key：须为"), std::string::npos) << raw;
  EXPECT_EQ(task_count(), 0u);
}

TEST_F(ApiTest, AReplayIsAuditedAsARequestWhileOnlyTheFirstSubmitCreated) {
  seed();
  ASSERT_EQ(call("POST", "/api/v1/pipelines", alice_, pipeline_yaml(), kYaml, with_key("k-1")).status, 201);
  ASSERT_EQ(call("POST", "/api/v1/pipelines", alice_, pipeline_yaml(), kYaml, with_key("k-1")).status, 201);
  auto r = call("GET", "/api/v1/audit?user=alice", admin_);
  ASSERT_EQ(r.status, 200) << r.body;
  const auto items = parse(r).at("items").as_array();
  ASSERT_EQ(items.size(), 2u);  // the submit's own row and the replay's, with the same answer
  EXPECT_EQ(items[0].at("after"), items[1].at("after"));
  EXPECT_EQ(task_count(), 1u);
}

}  // namespace
}  // namespace cp::http
