// Submits under an idempotency key (ControlPlane::SubmitRequest): a client
// that retries a submit, after a timeout or against another server, never
// creates a second pipeline.
#include <latch>
#include <set>
#include <thread>

#include "common/ids.h"
#include "control_plane_fixture.h"
#include "forwarding_store.h"

namespace cp::testing {
namespace {

using SubmitRequest = ControlPlane::SubmitRequest;
using SubmitAnswer = ControlPlane::SubmitAnswer;

class IdempotencyTest : public ControlPlaneTest {
 protected:
  // A submit of `yaml` as the HTTP route makes it, under `key`.
  Result<SubmitAnswer> submit_keyed(const Principal& p, const std::string& yaml, std::optional<std::string> key,
                                    bool dry_run = false) {
    return submit_keyed_on(*cp_, p, yaml, std::move(key), dry_run);
  }
  static Result<SubmitAnswer> submit_keyed_on(ControlPlane& cp, const Principal& p, const std::string& yaml,
                                              std::optional<std::string> key, bool dry_run = false) {
    auto doc = parse_document(yaml);
    EXPECT_TRUE(doc.ok());
    if (!doc.ok()) return doc.error();
    return cp.submit(p, *doc, SubmitRequest{.dry_run = dry_run, .idempotency_key = std::move(key),
                                            .request_hash = sha256_hex(yaml)});
  }

  std::size_t pipelines() {
    std::size_t n = 0;
    EXPECT_TRUE(store_->read([&](Tx& tx) -> Status {
                        CP_ASSIGN(auto tasks, tx.tasks_in_states({TaskState::Queued}));
                        std::set<std::string> ids;
                        for (const auto& t : tasks) ids.insert(t.pipeline_id);
                        n = ids.size();
                        return {};
                      })
                    .ok());
    return n;
  }

  std::optional<IdempotencyRecord> stored_key(const std::string& user, const std::string& key) {
    std::optional<IdempotencyRecord> out;
    EXPECT_TRUE(store_->read([&](Tx& tx) -> Status {
                        CP_ASSIGN(out, tx.get_idempotency(user, key));
                        return {};
                      })
                    .ok());
    return out;
  }
};

TEST_F(IdempotencyTest, ARetryWithTheSameBodyCreatesNothingAndGetsTheFirstAnswer) {
  const std::string yaml = pipeline_yaml("pa", 1);
  auto first = submit_keyed(alice_, yaml, "k-1");
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(first->status, 201);
  EXPECT_FALSE(first->replayed);
  clock_.advance_ms(60'000);
  auto retry = submit_keyed(alice_, yaml, "k-1");
  ASSERT_TRUE(retry.ok()) << retry.error().message;
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->status, 201);
  EXPECT_EQ(retry->body, first->body);  // the same pipeline id, task ids and times
  EXPECT_EQ(pipelines(), 1u);
}

TEST_F(IdempotencyTest, ARetryGetsTheFirstAnswerEvenWhereTheChecksWouldNowRefuseIt) {
  // The key is looked up before the checks: alice has left pa since her
  // submit, and her retry still learns what became of it.
  const std::string yaml = pipeline_yaml("pa", 1);
  auto first = submit_keyed(alice_, yaml, "k-1");
  ASSERT_TRUE(first.ok()) << first.error().message;
  add_to_fleet("apiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: pa}\n"
               "spec: {members: [], default_resource_group: rg-a}\n");
  const Principal alice_now = user_principal("alice");
  auto fresh = submit_keyed(alice_now, yaml, "k-2");
  ASSERT_FALSE(fresh.ok());
  EXPECT_EQ(fresh.error().status, 403);
  auto retry = submit_keyed(alice_now, yaml, "k-1");
  ASSERT_TRUE(retry.ok()) << retry.error().message;
  EXPECT_TRUE(retry->replayed);
  EXPECT_EQ(retry->body, first->body);
  EXPECT_EQ(pipelines(), 1u);
}

TEST_F(IdempotencyTest, TheSameKeyWithAnotherBodyIs422AndCreatesNothing) {
  ASSERT_TRUE(submit_keyed(alice_, pipeline_yaml("pa", 1), "k-1").ok());
  auto other = submit_keyed(alice_, pipeline_yaml("pa", 2), "k-1");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.error().code, "idempotency_key_reused");
  EXPECT_EQ(other.error().status, 422);
  EXPECT_NE(other.error().message.find("k-1"), std::string::npos) << other.error().message;
  EXPECT_NE(other.error().message_zh.find("幂等键"), std::string::npos) << other.error().message_zh;
  EXPECT_EQ(pipelines(), 1u);
}

TEST_F(IdempotencyTest, KeysAreEachUsersOwn) {
  auto alices = submit_keyed(alice_, pipeline_yaml("pa", 1), "k-1");
  auto mallorys = submit_keyed(mallory_, pipeline_yaml("pb", 1), "k-1");
  ASSERT_TRUE(alices.ok()) << alices.error().message;
  ASSERT_TRUE(mallorys.ok()) << mallorys.error().message;
  EXPECT_FALSE(mallorys->replayed);
  EXPECT_NE(mallorys->body.at("pipeline").at("id"), alices->body.at("pipeline").at("id"));
  EXPECT_EQ(pipelines(), 2u);
}

TEST_F(IdempotencyTest, ARefusedSubmitKeepsNoKeySoTheCorrectedRequestIsAccepted) {
  // pb is mallory's: alice is refused, and her key stays free.
  auto refused = submit_keyed(alice_, pipeline_yaml("pb", 1), "k-1");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.error().status, 403);
  EXPECT_FALSE(stored_key("alice", "k-1").has_value());
  auto again = submit_keyed(alice_, pipeline_yaml("pb", 1), "k-1");
  ASSERT_FALSE(again.ok());
  EXPECT_EQ(again.error().status, 403);  // refused again, not a 422
  auto fixed = submit_keyed(alice_, pipeline_yaml("pa", 1), "k-1");
  ASSERT_TRUE(fixed.ok()) << fixed.error().message;
  EXPECT_FALSE(fixed->replayed);
  EXPECT_EQ(pipelines(), 1u);
}

TEST_F(IdempotencyTest, ADryRunNeitherReadsNorStoresTheKey) {
  auto dry = submit_keyed(alice_, pipeline_yaml("pa", 1), "k-1", true);
  ASSERT_TRUE(dry.ok()) << dry.error().message;
  EXPECT_EQ(dry->status, 200);
  EXPECT_FALSE(stored_key("alice", "k-1").has_value());
  auto real = submit_keyed(alice_, pipeline_yaml("pa", 1), "k-1");
  ASSERT_TRUE(real.ok()) << real.error().message;
  EXPECT_FALSE(real->replayed);
  // Another body under the stored key: a dry run does not look.
  auto dry_other = submit_keyed(alice_, pipeline_yaml("pa", 2), "k-1", true);
  ASSERT_TRUE(dry_other.ok()) << dry_other.error().message;
  EXPECT_EQ(dry_other->status, 200);
  EXPECT_FALSE(dry_other->replayed);
  EXPECT_EQ(pipelines(), 1u);
}

TEST_F(IdempotencyTest, AKeyOfOneTo255PrintableAsciiCharactersIsAcceptedAnyOtherIs400) {
  for (const std::string& bad : {std::string(), std::string(256, 'k'), std::string("caf\xc3\xa9"),
                                 std::string("a\tb"), std::string("a\nb"), std::string("a\x7f")}) {
    auto r = submit_keyed(alice_, pipeline_yaml("pa", 1), bad);
    ASSERT_FALSE(r.ok()) << "key \"" << bad << "\"";
    EXPECT_EQ(r.error().status, 400);
    EXPECT_EQ(r.error().code, "invalid_field");
    EXPECT_NE(r.error().message.find("Idempotency-Key"), std::string::npos) << r.error().message;
    EXPECT_FALSE(r.error().message_zh.empty());
    // Refused before anything else, a dry run too.
    auto dry = submit_keyed(alice_, pipeline_yaml("pa", 1), bad, true);
    ASSERT_FALSE(dry.ok());
    EXPECT_EQ(dry.error().status, 400);
  }
  EXPECT_EQ(pipelines(), 0u);
  for (const std::string& good : {std::string(255, 'k'), std::string("k"), std::string("a b~!{}")}) {
    auto r = submit_keyed(alice_, pipeline_yaml("pa", 1), good);
    ASSERT_TRUE(r.ok()) << good << ": " << r.error().message;
  }
  EXPECT_EQ(pipelines(), 3u);
}

TEST_F(IdempotencyTest, KeysOlderThanADayAreRemovedByRetention) {
  const std::string yaml = pipeline_yaml("pa", 1);
  ASSERT_TRUE(submit_keyed(alice_, yaml, "k-1").ok());
  clock_.advance_ms(kDay);  // a day old: kept
  ASSERT_TRUE(cp_->run_retention().ok());
  EXPECT_TRUE(stored_key("alice", "k-1").has_value());
  auto within = submit_keyed(alice_, yaml, "k-1");
  ASSERT_TRUE(within.ok()) << within.error().message;
  EXPECT_TRUE(within->replayed);

  clock_.advance_ms(1);
  auto pass = cp_->run_retention();
  ASSERT_TRUE(pass.ok()) << pass.error().message;
  EXPECT_EQ(pass->history, 1);
  EXPECT_FALSE(stored_key("alice", "k-1").has_value());
  auto after = submit_keyed(alice_, yaml, "k-1");
  ASSERT_TRUE(after.ok()) << after.error().message;
  EXPECT_FALSE(after->replayed);  // a new submit, as the key is forgotten
  EXPECT_EQ(pipelines(), 2u);
}

TEST_F(IdempotencyTest, ConcurrentSubmitsUnderOneKeyCreateOnePipelineAndAllGetItsAnswer) {
  constexpr int kSubmits = 6;
  const std::string yaml = pipeline_yaml("pa", 1);
  std::latch start(kSubmits);
  std::vector<Result<SubmitAnswer>> answers(kSubmits, Error{});
  std::vector<std::thread> threads;
  for (int i = 0; i < kSubmits; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      answers[i] = submit_keyed(alice_, yaml, "k-1");
    });
  }
  for (auto& t : threads) t.join();
  int fresh = 0;
  for (const auto& a : answers) {
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(a->body, answers[0]->body);
    if (!a->replayed) ++fresh;
  }
  EXPECT_EQ(fresh, 1);
  EXPECT_EQ(pipelines(), 1u);
}

// On PostgreSQL two submits under one key can run at once, each finding no
// key in its snapshot: one commits, and the unique (user, key) refuses the
// other's insert at its COMMIT with already_exists. This store plays the
// loser's side once: its first shared write runs the body and rolls it back
// (the run that lost), commits the same body as the winner's run, and
// answers already_exists.
class ARivalTakesTheKeyFirst final : public testing::ForwardingStore {
 public:
  explicit ARivalTakesTheKeyFirst(Store& inner) : ForwardingStore(inner) {}
  Status write_shared(const std::function<Status(Tx&)>& body) override {
    if (played_) return inner_.write_shared(body);
    played_ = true;
    Status lost = inner_.write([&](Tx& tx) -> Status {
      CP_TRY(body(tx));
      return Error{"rolled_back", 503, "the run that lost", "落败的一次", {}};
    });
    EXPECT_EQ(lost.error().code, "rolled_back");
    CP_TRY(inner_.write(body));
    return errors::already_exists("idempotency key", "k-1");
  }

 private:
  bool played_ = false;
};

TEST_F(IdempotencyTest, ASubmitWhoseKeyARivalCommittedFirstGetsTheRivalsAnswer) {
  ARivalTakesTheKeyFirst racing(*store_);
  ControlPlane cp(racing, *objects_, clock_, ServerConfig{});
  auto answer = submit_keyed_on(cp, alice_, pipeline_yaml("pa", 1), "k-1");
  ASSERT_TRUE(answer.ok()) << answer.error().message;
  EXPECT_TRUE(answer->replayed);
  EXPECT_EQ(answer->status, 201);
  auto stored = stored_key("alice", "k-1");
  ASSERT_TRUE(stored.has_value());
  EXPECT_EQ(json::serialize(answer->body), stored->response);
  EXPECT_EQ(pipelines(), 1u);
}

}  // namespace
}  // namespace cp::testing
