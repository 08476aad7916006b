// Approvals: a project group that lists a resource group with approval:
// required gets work in only while an approval holds; members ask, project
// admins or platform admins decide.
#include "control_plane_fixture.h"

namespace cp {
namespace {

using namespace cp::testing;

class ApprovalsTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    ControlPlaneTest::SetUp();
    ASSERT_TRUE(cp_->create_user(admin_, json::object{{"name", "bob"}, {"role", "user"}}).ok());
    // rg-b, which pa may use with an approval; mallory admins pb only.
    apply("ResourceGroup", "rg-b",
          "apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: rg-b}\nspec:\n  clusters: [c1]\n  quota:\n"
          "    gpu/a100: {guaranteed: 4}\n");
    apply("ProjectGroup", "pa",
          "apiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: pa}\nspec:\n  members: [{user: alice, role: "
          "member}, {user: bob, role: admin}]\n  default_resource_group: rg-a\n  resource_groups: [{name: rg-b, "
          "approval: required}]\n");
    bob_ = user_principal("bob");
  }
  void apply(const std::string& kind, const std::string& name, const std::string& yaml) {
    auto doc = parse_document(yaml);
    ASSERT_TRUE(doc.ok()) << doc.error().message;
    auto r = cp_->apply_document(admin_, kind, *doc, name);
    ASSERT_TRUE(r.ok()) << r.error().message;
  }
  Result<json::object> submit_to_rg_b(const Principal& p) {
    auto doc = parse_document(pipeline_yaml("pa", 1, "  resource_group: rg-b\n"));
    EXPECT_TRUE(doc.ok());
    return cp_->submit_pipeline(p, *doc, /*dry_run=*/true);
  }
  Result<Approval> ask(const Principal& p, const std::string& rg = "rg-b") {
    return cp_->request_approval(
        p, json::object{{"project_group", "pa"}, {"resource_group", rg}, {"reason", "paper deadline"}});
  }
  Principal bob_;
};

TEST_F(ApprovalsTest, SubmissionsWaitForAnApprovalThatHoldsUntilItExpires) {
  auto refused = submit_to_rg_b(alice_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().code, "approval_required");
  EXPECT_NE(refused.error().message.find("cubeplane approvals request --project-group pa --resource-group rg-b"),
            std::string::npos);
  EXPECT_NE(refused.error().message_zh.find("需要审批"), std::string::npos);
  EXPECT_TRUE(submit_to_rg_b(admin_).ok());  // platform admins need none

  auto a = ask(alice_);
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->state, ApprovalState::pending);
  EXPECT_EQ(a->requested_by, "alice");
  EXPECT_EQ(ask(alice_).error().code, "already_exists");  // one open request per pair
  refused = submit_to_rg_b(alice_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("request " + a->id + " by alice is waiting"), std::string::npos);

  // A member cannot decide; the project group's admin can, for 7 days.
  EXPECT_EQ(cp_->decide_approval(alice_, a->id, "approve", nullptr).error().status, 403);
  EXPECT_EQ(cp_->decide_approval(mallory_, a->id, "approve", nullptr).error().status, 404);  // not mallory's group
  auto ok = cp_->decide_approval(bob_, a->id, "approve", json::object{{"ttl_s", 7 * 86400}, {"note", "go"}});
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->state, ApprovalState::approved);
  EXPECT_EQ(ok->decided_by, "bob");
  EXPECT_EQ(ok->expires_at, clock_.now_ms() + 7 * kDay);
  EXPECT_TRUE(submit_to_rg_b(alice_).ok());
  EXPECT_EQ(cp_->decide_approval(bob_, a->id, "deny", nullptr).error().code, "invalid_state");
  EXPECT_EQ(ask(alice_).error().code, "already_exists");  // it holds

  clock_.advance_ms(7 * kDay);
  refused = submit_to_rg_b(alice_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("expired"), std::string::npos);
  EXPECT_TRUE(ask(alice_).ok());  // expired: a new request may be made

  auto events = cp_->list_events(admin_, EventQuery{"approval", a->id, 0, 100});
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].to, "approved");
}

TEST_F(ApprovalsTest, ADeniedOrRevokedApprovalSaysWhoAndWhy) {
  auto a = ask(alice_);
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(cp_->decide_approval(admin_, a->id, "deny", json::object{{"note", "use rg-a"}}).ok());
  auto refused = submit_to_rg_b(alice_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("denied by admin (use rg-a)"), std::string::npos);

  auto b = ask(alice_);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(cp_->decide_approval(bob_, b->id, "approve", nullptr).ok());
  EXPECT_TRUE(submit_to_rg_b(alice_).ok());
  EXPECT_EQ(cp_->decide_approval(bob_, a->id, "revoke", nullptr).error().code, "invalid_state");  // denied
  ASSERT_TRUE(cp_->decide_approval(bob_, b->id, "revoke", json::object{{"note", "over budget"}}).ok());
  refused = submit_to_rg_b(alice_);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("revoked by bob (over budget)"), std::string::npos);
}

TEST_F(ApprovalsTest, BadRequestsAreRefusedAndChangeNothing) {
  EXPECT_EQ(ask(alice_, "rg-a").error().code, "approval_not_required");
  EXPECT_EQ(ask(mallory_).error().status, 403);  // not a member of pa
  EXPECT_EQ(cp_->request_approval(alice_, json::object{{"project_group", "pa"}}).error().status, 400);
  EXPECT_EQ(cp_->request_approval(alice_, json::object{{"project_group", "pa"}, {"resource_group", "rg-b"},
                                                       {"colour", "red"}})
                .error()
                .status,
            400);
  // Someone else's or a missing group: alice may not ask (and learns nothing); an admin hears it is unknown.
  EXPECT_EQ(cp_->request_approval(alice_, json::object{{"project_group", "nope"}, {"resource_group", "rg-b"}})
                .error()
                .code,
            "forbidden");
  EXPECT_EQ(cp_->request_approval(admin_, json::object{{"project_group", "nope"}, {"resource_group", "rg-b"}})
                .error()
                .code,
            "unknown_reference");
  auto a = ask(alice_);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(cp_->decide_approval(bob_, a->id, "approve", json::object{{"ttl_s", 5}}).error().status, 400);
  EXPECT_EQ(cp_->decide_approval(bob_, a->id, "approve", json::object{{"ttl_s", "7d"}}).error().status, 400);
  EXPECT_EQ(cp_->decide_approval(bob_, "ap-missing", "approve", nullptr).error().status, 404);
  auto all = cp_->list_approvals(admin_, ApprovalQuery{});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->items.size(), 1u);
  EXPECT_EQ(all->items[0].state, ApprovalState::pending);  // the bad decisions changed nothing
  auto theirs = cp_->list_approvals(mallory_, ApprovalQuery{});
  ASSERT_TRUE(theirs.ok());
  EXPECT_TRUE(theirs->items.empty());  // pb's admin does not see pa's
}

}  // namespace
}  // namespace cp
