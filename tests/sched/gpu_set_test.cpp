#include <random>
#include "sched/gpu_set.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

namespace cp::sched {
namespace {

TEST(GpuIndexSet, HoldsIndicesOfAnEightGpuNode) {
  // The common node: indices 0..7 in the first word.
  GpuIndexSet s;
  EXPECT_TRUE(s.empty());
  s.insert(0);
  s.insert(7);
  s.insert(7);  // twice is once
  EXPECT_EQ(s.size(), 2u);
  EXPECT_TRUE(s.contains(0));
  EXPECT_TRUE(s.contains(7));
  EXPECT_FALSE(s.contains(1));
  s.erase(0);
  s.erase(3);  // absent: nothing happens
  EXPECT_EQ(s.size(), 1u);
  EXPECT_FALSE(s.contains(0));
}

TEST(GpuIndexSet, NodesWithMoreThanSixtyFourGpus) {
  // Indices past the first word grow the mask; word boundaries are exact.
  GpuIndexSet s;
  for (int i : {63, 64, 127, 128, 300, 4095}) s.insert(i);
  EXPECT_EQ(s.size(), 6u);
  for (int i : {63, 64, 127, 128, 300, 4095}) EXPECT_TRUE(s.contains(i)) << i;
  for (int i : {62, 65, 126, 129, 299, 4094}) EXPECT_FALSE(s.contains(i)) << i;
  s.erase(64);
  EXPECT_FALSE(s.contains(64));
  EXPECT_TRUE(s.contains(63));
  EXPECT_EQ(s.size(), 5u);
}

TEST(GpuIndexSet, IndicesOutsideTheMaskAreKeptToo) {
  // An agent may report any int: negative and huge indices behave like the others.
  GpuIndexSet s;
  for (int i : {-1, 4096, 1'000'000, -7}) s.insert(i);
  EXPECT_EQ(s.size(), 4u);
  EXPECT_TRUE(s.contains(-1));
  EXPECT_TRUE(s.contains(1'000'000));
  EXPECT_FALSE(s.contains(-2));
  s.erase(-1);
  EXPECT_FALSE(s.contains(-1));
  EXPECT_EQ(s.size(), 3u);
}

TEST(GpuIndexSet, AgreesWithStdSet) {
  // The set it replaced, as the oracle, over a deterministic mix of operations.
  GpuIndexSet s;
  std::set<int> oracle;
  unsigned x = 12345;
  for (int step = 0; step < 5000; ++step) {
    x = x * 1103515245u + 12345u;
    int index = static_cast<int>((x >> 8) % 300) - 20;  // -20..279
    if ((x >> 4) % 3 == 0) {
      s.erase(index);
      oracle.erase(index);
    } else {
      s.insert(index);
      oracle.insert(index);
    }
    ASSERT_EQ(s.size(), oracle.size());
    ASSERT_EQ(s.contains(index), oracle.contains(index));
  }
  for (int i = -25; i < 290; ++i) EXPECT_EQ(s.contains(i), oracle.contains(i)) << i;
}

}  // namespace
}  // namespace cp::sched

namespace cp::sched {
namespace {

TEST(GpuIndexSet, CountBelowIsThePopcountOfTheFirstIndices) {
  // count_below(n): members among 0..n-1, across words and outside the mask.
  GpuIndexSet s;
  for (int i : {-3, 0, 5, 7, 63, 64, 100, 4095, 5000}) s.insert(i);
  EXPECT_EQ(s.count_below(0), 0u);
  EXPECT_EQ(s.count_below(1), 1u);     // 0
  EXPECT_EQ(s.count_below(8), 3u);     // 0, 5, 7
  EXPECT_EQ(s.count_below(64), 4u);    // ... 63
  EXPECT_EQ(s.count_below(65), 5u);    // ... 64
  EXPECT_EQ(s.count_below(101), 6u);   // ... 100
  EXPECT_EQ(s.count_below(4096), 7u);  // ... 4095
  EXPECT_EQ(s.count_below(6000), 8u);  // ... 5000; never the negative one
  std::set<int> oracle{-3, 0, 5, 7, 63, 64, 100, 4095, 5000};
  for (int n = 0; n < 300; ++n) {
    auto expected = static_cast<std::size_t>(std::count_if(oracle.begin(), oracle.end(), [&](int i) { return i >= 0 && i < n; }));
    EXPECT_EQ(s.count_below(n), expected) << n;
  }
}

TEST(BitCount, IsStdPopcount) {
  // The inline count used where the build has no POPCNT instruction.
  std::mt19937_64 rng(7);
  std::vector<std::uint64_t> words{0, 1, ~std::uint64_t{0}, std::uint64_t{1} << 63, 0x5555555555555555ULL,
                                   0xAAAAAAAAAAAAAAAAULL, 0xFFULL, 0x8000000000000001ULL};
  for (int i = 0; i < 64; ++i) words.push_back((std::uint64_t{1} << i) - 1);
  for (int i = 0; i < 1000; ++i) words.push_back(rng() & rng());
  for (std::uint64_t w : words) EXPECT_EQ(bit_count(w), std::popcount(w)) << w;
}

}  // namespace
}  // namespace cp::sched
