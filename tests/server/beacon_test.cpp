// The leader's chain and beacon (server/beacon.h; DESIGN.md "Fencing and
// outages"): the term in the store, the beacon in the object store, when
// the chain holds, and what the liveness pass judges with it. Both clocks
// are simulated: `clock_` (the server's, J and last_contact) and `mono_`
// (deadlines).
#include "server/beacon.h"

#include <gtest/gtest.h>

#include "control_plane_fixture.h"
#include "forwarding_store.h"

namespace cp::testing {
namespace {

ServerConfig lease_config(std::int64_t lease_ttl_s, std::int64_t lost_after_s) {
  ServerConfig c;
  c.lease_ttl_s = lease_ttl_s;
  c.lost_after_s = lost_after_s;
  return c;
}

TEST(FenceTimingTest, DerivesTheFiguresOfDesignMd) {
  auto t = fence_timing(lease_config(30, 40));
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->margin, 5000);
  EXPECT_EQ(t->period, 2000);
  EXPECT_EQ(t->deadline, 3000);
  EXPECT_EQ(t->window, 5000);
  EXPECT_EQ(t->lost_after, 40000);  // L + F + m
  // The tests' 6 s lease: D = 6 + 1 + 1.
  t = fence_timing(lease_config(6, 6));
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->lost_after, 8000) << "a lost_after below L + F + m is raised to it";
  // A configured D above the floor stays.
  EXPECT_EQ(fence_timing(lease_config(6, 60))->lost_after, 60000);
}

TEST(FenceTimingTest, RefusesALeaseNoStaleVerdictCouldRenew) {
  auto c = lease_config(5, 5);
  c.beacon_period_ms = 2000;
  c.beacon_deadline_ms = 2000;
  auto t = fence_timing(c);
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.error().status, 400);
  EXPECT_NE(t.error().message.find("lease_ttl_s"), std::string::npos);
  EXPECT_FALSE(t.error().message_zh.empty());
}

TEST(BeaconTest, ParsesOnlyAPositiveTermAndSeq) {
  auto b = parse_beacon(encode_beacon({3, 17}, "s1"));
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->term, 3);
  EXPECT_EQ(b->seq, 17);
  EXPECT_FALSE(parse_beacon("{}").has_value());
  EXPECT_FALSE(parse_beacon(R"({"term":0,"seq":1})").has_value());
  EXPECT_FALSE(parse_beacon(R"({"term":"1","seq":1})").has_value());
  EXPECT_FALSE(parse_beacon("not json").has_value());
}

// An object store whose puts fail, or take `put_ms` of the mono clock.
class FlakyObjects : public ObjectStore {
 public:
  FlakyObjects(ObjectStore& inner, SimulatedClock& mono) : inner_(inner), mono_(mono) {}
  Result<ObjectInfo> put(const std::string& k, std::string_view d) override {
    mono_.advance_ms(put_ms);
    if (fail) return errors::unavailable("the witness is down", "见证存储不可用");
    return inner_.put(k, d);
  }
  Result<std::optional<std::string>> get(const std::string& k) override { return inner_.get(k); }
  Result<std::vector<ObjectInfo>> list(const std::string& p, const std::string& a, int l) override {
    return inner_.list(p, a, l);
  }
  Status remove(const std::string& k) override { return inner_.remove(k); }
  std::string url() const override { return inner_.url(); }
  Result<std::string> read_url(const std::string& k, std::int64_t ttl) override { return inner_.read_url(k, ttl); }

  bool fail = false;
  Millis put_ms = 0;

 private:
  ObjectStore& inner_;
  SimulatedClock& mono_;
};

class BeaconChainTest : public ControlPlaneTest {
 protected:
  std::unique_ptr<BeaconChain> chain(ObjectStore& objects, const std::string& id, bool shared = false) {
    return std::make_unique<BeaconChain>(*store_, objects, clock_, mono_, *fence_timing(lease_config(6, 6)), id,
                                         shared);
  }
  std::optional<BeaconMark> witnessed() {
    auto body = objects_->get(kBeaconKey);
    if (!body.ok() || !*body) return std::nullopt;
    return parse_beacon(**body);
  }
  // G on both clocks, then a round.
  bool tick(BeaconChain& c) {
    clock_.advance_ms(400);
    mono_.advance_ms(400);
    return c.round();
  }
  SimulatedClock mono_{1000};
};

TEST_F(BeaconChainTest, EachRoundMovesTheSeqAndTheChainHoldsWhileRoundsKeepTime) {
  FlakyObjects objects(*objects_, mono_);
  auto c = chain(objects, "s1");
  ASSERT_TRUE(c->begin().ok());
  EXPECT_EQ(c->latest().term, 1);
  EXPECT_EQ(witnessed()->seq, 1);
  const Millis j = c->judging_since();
  EXPECT_EQ(j, clock_.now_ms());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE(tick(*c));
  EXPECT_EQ(witnessed()->seq, 6);
  EXPECT_EQ(c->judging_since(), j) << "an unbroken chain keeps its J";
  // This process stalls for more than F: not judging from that moment, and
  // the next round begins a new chain (a later J).
  mono_.advance_ms(1001);
  clock_.advance_ms(1001);
  EXPECT_EQ(c->judging_since(), 0);
  ASSERT_TRUE(tick(*c));
  EXPECT_EQ(c->judging_since(), clock_.now_ms());
}

TEST_F(BeaconChainTest, AFailedOrLateRoundBreaksTheChainAtOnce) {
  FlakyObjects objects(*objects_, mono_);
  auto c = chain(objects, "s1");
  ASSERT_TRUE(c->begin().ok());
  objects.fail = true;
  EXPECT_FALSE(tick(*c));
  EXPECT_EQ(c->judging_since(), 0);
  objects.fail = false;
  ASSERT_TRUE(tick(*c));
  EXPECT_NE(c->judging_since(), 0);
  objects.put_ms = 601;  // over p = 600 ms
  EXPECT_FALSE(tick(*c));
  EXPECT_EQ(c->judging_since(), 0);
  // Seqs 2 (failed: it may have landed all the same) and 4 (late) are
  // spent: the next chain's seq must pass any write an agent may have read.
  EXPECT_EQ(witnessed()->seq, 4);
  objects.put_ms = 0;
  ASSERT_TRUE(tick(*c));
  EXPECT_EQ(witnessed()->seq, 5);
}

TEST_F(BeaconChainTest, ANewerTermDeposesTheOldChainAndItsLivenessWrites) {
  auto a = chain(*objects_, "s1");
  ASSERT_TRUE(a->begin().ok());
  auto b = chain(*objects_, "s2");
  ASSERT_TRUE(b->begin().ok());
  EXPECT_EQ(b->latest().term, 2);
  EXPECT_FALSE(tick(*a));
  EXPECT_TRUE(a->deposed());
  EXPECT_EQ(a->judging_since(), 0);
  // A transaction of the deposed leader that checks its term rolls back.
  auto st = store_->write([&](Tx& tx) { return a->check_term(tx); });
  EXPECT_FALSE(st.ok());
  EXPECT_TRUE(store_->write([&](Tx& tx) { return b->check_term(tx); }).ok());
}

TEST_F(BeaconChainTest, NoBeaconNoStart) {
  FlakyObjects objects(*objects_, mono_);
  objects.fail = true;
  auto c = chain(objects, "s1");
  auto st = c->begin();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("witness is down"), std::string::npos);
  EXPECT_FALSE(st.error().message_zh.empty());
}

// Several servers on one store: the first leads, the others follow the
// leader row and take the next term only when it stood still for
// takeover_ms on their own clock, or names nobody (its leader resigned).
TEST_F(BeaconChainTest, AFollowerTakesOverOnlyFromASilentLeader) {
  auto a = chain(*objects_, "s1", true);
  auto b = chain(*objects_, "s2", true);
  ASSERT_TRUE(a->begin().ok());
  EXPECT_TRUE(a->leading()) << "nobody led: the first server takes term 1 at once";
  ASSERT_TRUE(b->begin().ok());
  EXPECT_FALSE(b->leading());
  EXPECT_EQ(b->status().leader, "s1");
  EXPECT_EQ(b->named_mark().term, 1) << "a follower names the leader's mark to its agents";
  const Millis takeover = b->takeover_ms();
  EXPECT_EQ(takeover, 1000);  // 2 G of a 6 s lease, at least 1 s
  // A leader that keeps renewing is never taken over, however long.
  for (int i = 0; i < 10; ++i) {
    ASSERT_TRUE(tick(*a));
    EXPECT_FALSE(b->follow());
  }
  EXPECT_EQ(b->named_mark().seq, a->latest().seq);
  // The leader falls silent (killed, frozen): not before takeover_ms.
  mono_.advance_ms(takeover - 1);
  EXPECT_FALSE(b->follow());
  mono_.advance_ms(1);
  ASSERT_TRUE(b->follow());
  EXPECT_TRUE(b->leading());
  EXPECT_EQ(b->latest().term, 2);
  EXPECT_EQ(witnessed()->term, 2);
  // The old leader wakes: its round finds the newer term, it follows, and
  // neither a leader-only write nor a liveness write of it commits.
  EXPECT_FALSE(tick(*a));
  EXPECT_FALSE(a->leading());
  EXPECT_FALSE(store_->write([&](Tx& tx) { return a->check_leader(tx); }).ok());
  EXPECT_FALSE(store_->write([&](Tx& tx) { return a->check_term(tx); }).ok());
  EXPECT_TRUE(store_->write([&](Tx& tx) { return b->check_leader(tx); }).ok());
  EXPECT_EQ(a->status().leader, "");  // it has not looked at the row since
  EXPECT_FALSE(a->follow());
  EXPECT_EQ(a->status().leader, "s2");
}

TEST_F(BeaconChainTest, AResignedTermIsTakenAtOnce) {
  auto a = chain(*objects_, "s1", true);
  auto b = chain(*objects_, "s2", true);
  ASSERT_TRUE(a->begin().ok());
  ASSERT_TRUE(b->begin().ok());
  a->resign();
  EXPECT_FALSE(a->leading());
  EXPECT_EQ(a->judging_since(), 0);
  ASSERT_TRUE(b->follow()) << "no takeover wait after a clean stop";
  EXPECT_EQ(b->latest().term, 2);
}

TEST_F(BeaconChainTest, AStoreThatRefusesWritesRefusesTheStartOfAFollowerToo) {
  auto a = chain(*objects_, "s1", true);
  ASSERT_TRUE(a->begin().ok());
  struct ReadOnly : ForwardingStore {
    using ForwardingStore::ForwardingStore;
    Status write(const std::function<Status(Tx&)>&) override {
      return errors::unavailable("cannot execute INSERT in a read-only transaction", "只读事务");
    }
  } read_only(*store_);
  BeaconChain b(read_only, *objects_, clock_, mono_, *fence_timing(lease_config(6, 6)), "s2", true);
  auto st = b.begin();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("refuses writes"), std::string::npos) << st.error().message;
  EXPECT_FALSE(st.error().message_zh.empty());
}

TEST_F(BeaconChainTest, TimeTheStoreWasAwayIsNotTheLeadersSilence) {
  struct FlakyReads : ForwardingStore {
    using ForwardingStore::ForwardingStore;
    Status read(const std::function<Status(Tx&)>& body) override {
      if (fail_reads) return errors::unavailable("the store is away", "存储不可用");
      return inner_.read(body);
    }
    bool fail_reads = false;
  } flaky(*store_);
  auto a = chain(*objects_, "s1", true);
  ASSERT_TRUE(a->begin().ok());
  auto b = std::make_unique<BeaconChain>(flaky, *objects_, clock_, mono_, *fence_timing(lease_config(6, 6)), "s2",
                                         true);
  ASSERT_TRUE(b->begin().ok());
  flaky.fail_reads = true;  // the leader cannot renew either, meanwhile
  mono_.advance_ms(5 * b->takeover_ms());
  EXPECT_FALSE(b->follow());
  flaky.fail_reads = false;
  EXPECT_FALSE(b->follow()) << "the first look after the outage starts the count again";
  ASSERT_TRUE(tick(*a));
  EXPECT_FALSE(b->follow());
  EXPECT_TRUE(a->leading());
}

// The liveness pass with a beacon: silence counts only from J, and nothing
// is judged while the chain is broken.
class BeaconLivenessTest : public BeaconChainTest {
 protected:
  void configure(ServerConfig& c) override {
    c.lease_ttl_s = 6;
    c.lost_after_s = 6;  // raised to L + F + m = 8 s
  }
};

TEST_F(BeaconLivenessTest, SyncsNameTheBeaconToTheAgent) {
  ASSERT_TRUE(cp_->start_beacon("s1", mono_, false).ok());
  auto [agent, cred] = connect("c1");
  (void)cred;
  auto resp = sync(agent, {});
  EXPECT_EQ(resp.beacon_url, "file://" + (dir_ / kBeaconKey).string());
  EXPECT_EQ(resp.beacon_term, 1);
  EXPECT_EQ(resp.beacon_seq, 1);
  EXPECT_EQ(resp.beacon_window_ms, 1000);
  EXPECT_GT(resp.beacon_poll_ms, 0);
}

TEST_F(BeaconLivenessTest, SilenceCountsOnlyWhileTheChainHolds) {
  ASSERT_TRUE(cp_->start_beacon("s1", mono_, false).ok());
  auto [agent, cred] = connect("c1");
  (void)cred;
  sync(agent, {});
  // The server itself stalls (no rounds) far past D: nothing is judged.
  clock_.advance_ms(60'000);
  mono_.advance_ms(60'000);
  ASSERT_TRUE(cp_->check_liveness().ok());
  EXPECT_EQ(cp_->get_cluster(admin_, "c1")->state, ClusterState::online);
  // The chain begins again: c1's silence counts from this J, so within D
  // it stays online, and past it it goes offline.
  ASSERT_TRUE(cp_->beacon()->round());
  for (int i = 0; i < 19; ++i) {  // 7.6 s of rounds
    ASSERT_TRUE(tick(*cp_->beacon()));
    ASSERT_TRUE(cp_->check_liveness().ok());
  }
  EXPECT_EQ(cp_->get_cluster(admin_, "c1")->state, ClusterState::online);
  for (int i = 0; i < 2; ++i) ASSERT_TRUE(tick(*cp_->beacon()));
  ASSERT_TRUE(cp_->check_liveness().ok());
  EXPECT_EQ(cp_->get_cluster(admin_, "c1")->state, ClusterState::offline);
}

}  // namespace
}  // namespace cp::testing
