// Use histograms: exact below 16, within 12.5 % above, never below the
// truth; merging is adding.
#include <gtest/gtest.h>

#include <random>

#include "model/resource_use.h"

namespace cp {
namespace {

TEST(ResourceUse, BucketsAreExactBelowSixteenAndEighthsOfAnOctaveAbove) {
  for (int v = 0; v < 16; ++v) {
    EXPECT_EQ(use_bucket(v), v);
    EXPECT_EQ(use_bucket_upper(v), v);
  }
  EXPECT_EQ(use_bucket(-5), 0);
  EXPECT_EQ(use_bucket(16), 16);
  EXPECT_EQ(use_bucket(17), 16);
  EXPECT_EQ(use_bucket_upper(16), 17);
  EXPECT_EQ(use_bucket(18), 17);
  EXPECT_EQ(use_bucket(31), 23);
  EXPECT_EQ(use_bucket(32), 24);
  EXPECT_EQ(use_bucket_upper(23), 31);
  // Every value lies in its bucket, whose top is within 12.5 % of it.
  std::mt19937_64 rng(3);
  for (int i = 0; i < 100000; ++i) {
    const std::int64_t v = static_cast<std::int64_t>(rng() >> (rng() % 60 + 4));
    const int b = use_bucket(v);
    ASSERT_GE(use_bucket_upper(b), v);
    if (b > 0) {
      ASSERT_LT(use_bucket_upper(b - 1), v) << v;
    }
    ASSERT_LE(static_cast<double>(use_bucket_upper(b) - v), 0.125 * static_cast<double>(v) + 1) << v;
  }
}

TEST(ResourceUse, QuantilesAreTheBucketTopCappedAtTheMaximum) {
  UseHistogram h;
  EXPECT_EQ(h.quantile(0.95), 0);
  for (int i = 1; i <= 100; ++i) h.add(i * 100);  // 100 .. 10,000 millicores
  EXPECT_EQ(h.samples, 100);
  EXPECT_EQ(h.max, 10000);
  const auto p95 = h.quantile(0.95);  // the truth: 9,500
  EXPECT_GE(p95, 9500);
  EXPECT_LE(p95, 9500 * 9 / 8);
  EXPECT_EQ(h.quantile(1.0), 10000);
  const auto p50 = h.quantile(0.5);
  EXPECT_GE(p50, 5000);
  EXPECT_LE(p50, 5000 * 9 / 8);
  UseHistogram one;
  one.add(1234);
  EXPECT_EQ(one.quantile(0.5), 1234);  // capped at the maximum, not the bucket's top
}

TEST(ResourceUse, MergingIsTheSameAsAddingEverySample) {
  UseHistogram a, b, all;
  std::mt19937 rng(11);
  for (int i = 0; i < 500; ++i) {
    const std::int64_t v = rng() % 70000;
    (i % 3 ? a : b).add(v);
    all.add(v);
  }
  UseHistogram merged = a;
  merged.merge(b);
  EXPECT_EQ(merged.buckets, all.buckets);
  EXPECT_EQ(merged.counts, all.counts);
  EXPECT_EQ(merged.samples, all.samples);
  EXPECT_EQ(merged.max, all.max);

  ResourceUse use;
  use.add(UseSample{1500, 3 * (std::int64_t{1} << 30) + 1, -1, -1});
  use.add(UseSample{500, 1 << 20, 40, 2 * (std::int64_t{1} << 30)});
  EXPECT_EQ(use.samples(), 2);
  EXPECT_EQ(use.memory_mib.max, 3 * 1024 + 1);  // rounded up to the MiB
  EXPECT_EQ(use.gpu_util_pct.samples, 1);       // unmeasured GPUs add nothing
  EXPECT_EQ(use.gpu_memory_mib.max, 2048);
}

}  // namespace
}  // namespace cp
