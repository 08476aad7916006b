#include "server/principal.h"

#include <gtest/gtest.h>

#include "server/control_plane_fixture.h"

namespace cp {
namespace {

Principal alice() {
  Principal p;
  p.user = "alice";
  p.project_roles["pa"] = ProjectRole::member;
  return p;
}

TEST(PrincipalCacheTest, KeepsAnAnswerForItsTtlOnly) {
  PrincipalCache cache(2000);
  cache.put("h", alice(), 0, cache.generation(), 1000);
  ASSERT_TRUE(cache.get("h", 2999).has_value());
  EXPECT_EQ(cache.get("h", 2999)->user, "alice");
  EXPECT_FALSE(cache.get("h", 3000).has_value());  // read again at the TTL
  EXPECT_FALSE(cache.get("other", 1000).has_value());
}

TEST(PrincipalCacheTest, NeverOutlivesTheTokensExpiry) {
  PrincipalCache cache(60'000);
  cache.put("h", alice(), 1500, cache.generation(), 1000);
  EXPECT_TRUE(cache.get("h", 1499).has_value());
  EXPECT_FALSE(cache.get("h", 1500).has_value());
}

TEST(PrincipalCacheTest, AnAnswerReadBeforeAClearIsNotKept) {
  PrincipalCache cache;
  const auto before = cache.generation();
  cache.clear();  // e.g. a project group changed while the answer was being read
  cache.put("h", alice(), 0, before, 1000);
  EXPECT_FALSE(cache.get("h", 1000).has_value());
  cache.put("h", alice(), 0, cache.generation(), 1000);
  EXPECT_TRUE(cache.get("h", 1000).has_value());
  cache.clear();
  EXPECT_FALSE(cache.get("h", 1000).has_value());
}

TEST(PrincipalCacheTest, StaysWithinItsCapacity) {
  PrincipalCache cache(2000, 3);
  for (int i = 0; i < 10; ++i) cache.put("h" + std::to_string(i), alice(), 0, cache.generation(), 1000);
  EXPECT_LE(cache.size(), 3u);
  EXPECT_TRUE(cache.get("h9", 1000).has_value());
}

TEST(PrincipalCacheTest, AClockSetBackReadsAgain) {
  PrincipalCache cache(2000);
  cache.put("h", alice(), 0, cache.generation(), 5000);
  EXPECT_FALSE(cache.get("h", 4000).has_value());
}

// Through the control plane: a change to a project group's members is seen by
// the very next request of a user whose principal was cached.
class PrincipalCacheControlPlaneTest : public testing::ControlPlaneTest {};

TEST_F(PrincipalCacheControlPlaneTest, AMembershipChangeTakesEffectAtOnce) {
  auto tok = cp_->create_token(admin_, "alice", json::value(nullptr));
  ASSERT_TRUE(tok.ok());
  const std::string bearer(tok->at("token").as_string());
  ASSERT_TRUE(cp_->authenticate(bearer)->can_submit_to("pa"));
  ASSERT_TRUE(cp_->authenticate(bearer)->can_submit_to("pa"));  // from the cache now

  auto doc = parse_document(
      "apiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: pa}\n"
      "spec: {members: [{user: mallory, role: member}], default_resource_group: rg-a}\n");
  ASSERT_TRUE(doc.ok());
  ASSERT_TRUE(cp_->apply_document(admin_, "ProjectGroup", *doc, std::string("pa")).ok());
  auto after = cp_->authenticate(bearer);
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE(after->can_submit_to("pa"));
  auto refused = cp_->submit_pipeline(*after, *parse_document(testing::pipeline_yaml("pa", 1)));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().status, 403);

  // Deleting the group takes mallory's role with it, cached or not.
  auto mtok = cp_->create_token(admin_, "mallory", json::value(nullptr));
  const std::string mbearer(mtok->at("token").as_string());
  ASSERT_TRUE(cp_->authenticate(mbearer)->can_submit_to("pa"));
  ASSERT_TRUE(cp_->delete_document(admin_, "ProjectGroup", "pa").ok());
  EXPECT_FALSE(cp_->authenticate(mbearer)->can_submit_to("pa"));
}

TEST_F(PrincipalCacheControlPlaneTest, AnExpiredTokenIsRefusedEvenWhenCached) {
  auto tok = cp_->create_token(admin_, "alice", json::parse(R"({"ttl_s": 60})"));
  ASSERT_TRUE(tok.ok());
  const std::string bearer(tok->at("token").as_string());
  ASSERT_TRUE(cp_->authenticate(bearer).ok());
  clock_.advance_ms(1000);
  ASSERT_TRUE(cp_->authenticate(bearer).ok());  // cached
  clock_.advance_ms(60'000);
  auto refused = cp_->authenticate(bearer);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().status, 401);
  EXPECT_NE(refused.error().message.find("expired"), std::string::npos);
}

}  // namespace
}  // namespace cp
