#include "common/clock.h"

#include <gtest/gtest.h>

namespace cp {
namespace {

TEST(OffsetClockTest, FollowsTheOtherClockFromItsFirstSample) {
  SimulatedClock base(10'000);
  OffsetClock clock(base);
  EXPECT_EQ(clock.now_ms(), 10'000) << "offset 0 before any sample";
  EXPECT_FALSE(clock.sampled());
  // The other clock read 12,050 between base readings 10,000 and 10,100:
  // it is 2,000 ahead (midpoint 10,050).
  clock.sample(12'050, 10'000, 10'100);
  EXPECT_TRUE(clock.sampled());
  EXPECT_EQ(clock.offset(), 2'000);
  base.advance_ms(500);
  EXPECT_EQ(clock.now_ms(), 12'500);
  // A slow round trip says too little: ignored.
  clock.sample(99'999, 10'500, 10'500 + OffsetClock::kMaxRoundTripMs + 1);
  EXPECT_EQ(clock.offset(), 2'000);
  clock.sample(9'000, 10'500, 10'500);  // behind now
  EXPECT_EQ(clock.offset(), -1'500);
}

}  // namespace
}  // namespace cp
