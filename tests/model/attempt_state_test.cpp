// Attempt states as the other layers read them.
#include <gtest/gtest.h>

#include "common/json.h"
#include "model/types.h"

namespace cp {
namespace {

TEST(AttemptState, UnknownIsLiveWork) {
  // A silent cluster's attempt whose job may still run (server/unknown_attempts.h) is not terminal: the store
  // lists it among the active attempts, its quota stays charged, and reports about it are taken.
  EXPECT_FALSE(is_terminal(AttemptState::Unknown));
  EXPECT_TRUE(is_terminal(AttemptState::Lost));
  Attempt a;
  a.state = AttemptState::Unknown;
  EXPECT_EQ(to_json(a).at("state"), "Unknown");
  Attempt back;
  ASSERT_TRUE(from_json(to_json(a), back).ok());
  EXPECT_EQ(back.state, AttemptState::Unknown);
  // Added last: the states before it keep their values.
  EXPECT_EQ(static_cast<int>(AttemptState::Lost), 7);
  EXPECT_EQ(static_cast<int>(AttemptState::Unknown), 8);
}

}  // namespace
}  // namespace cp
