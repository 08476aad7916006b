#include "common/ids.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cp {
namespace {

constexpr Millis kT0 = 1'780'000'000'000;

TEST(NewId, IsThePrefixTimeAndRandomnessInLowerCaseBase32) {
  const std::string id = new_id("t", kT0);
  ASSERT_EQ(id.size(), 2u + 20u);
  EXPECT_EQ(id.substr(0, 2), "t-");
  for (char c : id.substr(2)) {
    EXPECT_NE(std::string_view("0123456789abcdefghjkmnpqrstvwxyz").find(c), std::string_view::npos) << id;
  }
  // The time part alone orders ids of different milliseconds.
  EXPECT_LT(new_id("t", kT0), new_id("t", kT0 + 1));
  EXPECT_EQ(new_id("t", kT0).substr(0, 12), id.substr(0, 12));
}

TEST(NewId, IdsOfOneMillisecondSortInTheOrderTheyWereMade) {
  std::vector<std::string> ids;
  for (int i = 0; i < 1000; ++i) ids.push_back(new_id("t", kT0));
  EXPECT_TRUE(std::is_sorted(ids.begin(), ids.end()));
}

TEST(NewId, ThreadsMakingIdsAtOnceNeverRepeatOneAndDrawDifferentRandomness) {
  constexpr int kThreads = 8;
  constexpr int kEach = 5000;
  std::vector<std::vector<std::string>> made(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&made, t] {
      for (int i = 0; i < kEach; ++i) made[t].push_back(new_id("t", kT0));
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> all;
  std::set<std::string> random_tails;  // the last 6 chars: 30 random bits
  for (const auto& ids : made) {
    all.insert(ids.begin(), ids.end());
    for (const auto& id : ids) random_tails.insert(id.substr(id.size() - 6));
  }
  EXPECT_EQ(all.size(), static_cast<std::size_t>(kThreads * kEach));
  // 40,000 draws of 30 bits: a handful of collisions at most, not threads
  // sharing one seed.
  EXPECT_GT(random_tails.size(), static_cast<std::size_t>(kThreads * kEach - 50));
}

TEST(Sha256Hex, MatchesTheStandardTestVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(NewSecret, IsThePrefixAndFortyHexCharsEveryTimeDifferent) {
  const std::string a = new_secret("cp_");
  const std::string b = new_secret("cp_");
  EXPECT_EQ(a.size(), 3u + 40u);
  EXPECT_NE(a, b);
  EXPECT_TRUE(secure_equals(a, a));
  EXPECT_FALSE(secure_equals(a, b));
}

}  // namespace
}  // namespace cp
