#include "model/clock_estimate.h"

#include <gtest/gtest.h>

namespace cp {
namespace {

// An agent 300 ms ahead of the server, a 10 ms wire each way, a server that
// takes 5 ms: the exchange gives the offset exactly and the wire as delay.
TEST(ClockSample, ASymmetricExchangeGivesTheOffsetExactly) {
  const Millis t0 = 1'000'300;       // agent sends (agent clock)
  const Millis t1 = 1'000'000 + 10;  // server takes it up (server clock)
  const Millis t2 = t1 + 5;          // and answers
  const Millis t3 = t0 + 10 + 5 + 10;
  auto s = clock_sample(t0, t1, t2, t3);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->offset_ms, 300);
  EXPECT_EQ(s->delay_ms, 20);
}

// A request that queued 2 s before the server took it up: the old estimate
// (sent_at minus the server's time) said the clock was 2 s behind; this one
// is off by at most half its delay, and the delay shows it.
TEST(ClockSample, QueueingMovesTheOffsetByAtMostHalfTheDelay) {
  const Millis t0 = 5'000'000;
  const Millis t1 = t0 + 2'000;
  const Millis t2 = t1 + 3;
  const Millis t3 = t2 + 1;
  auto s = clock_sample(t0, t1, t2, t3);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->delay_ms, 2'001);
  EXPECT_EQ(s->offset_ms, -1000) << "true offset 0, error within delay / 2";
  EXPECT_LE(std::llabs(s->offset_ms), s->delay_ms / 2 + 1);
}

TEST(ClockSample, TimesThatCannotBeAnExchangeGiveNoSample) {
  EXPECT_FALSE(clock_sample(1000, 0, 0, 1010)) << "a server that sent no times";
  EXPECT_FALSE(clock_sample(1000, 500, 400, 1010)) << "answered before it took the request up";
  EXPECT_FALSE(clock_sample(1000, 500, 600, 990)) << "the agent's clock ran back";
  EXPECT_FALSE(clock_sample(1000, 500, 600, 1050)) << "the server's part longer than the round trip";
}

// A long-poll held 5 s is the server's own time, not delay.
TEST(ClockSample, ALongPollsHoldIsNotDelay) {
  auto s = clock_sample(10'000, 10'002, 15'002, 15'004);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->delay_ms, 4);
  EXPECT_EQ(s->offset_ms, 0);
}

TEST(ClockEstimator, KeepsTheQuickestOfTheWindow) {
  ClockEstimator e(3);
  EXPECT_FALSE(e.best());
  e.add({40, 8});
  e.add({-900, 1800});  // a sync that queued
  e.add({-400, 900});
  ASSERT_TRUE(e.best());
  EXPECT_EQ(e.best()->offset_ms, 40) << "one quick sync outweighs a burst of slow ones";
  e.add({-450, 950});
  EXPECT_EQ(e.best()->offset_ms, -400) << "the quick one left the window";
  e.add({35, 8});
  EXPECT_EQ(e.best()->offset_ms, 35);
  e.add({36, 8});
  EXPECT_EQ(e.best()->offset_ms, 36) << "the latest of equal delays";
}

}  // namespace
}  // namespace cp
