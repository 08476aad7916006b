#include "model/resource_use.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>

namespace cp {

namespace {
constexpr int kLinear = 16;     // values below are their own bucket
constexpr int kSubBuckets = 8;  // per power of two above
constexpr int kLinearBits = 4;  // log2(kLinear)
constexpr int kSubBits = 3;     // log2(kSubBuckets)
}  // namespace

int use_bucket(std::int64_t v) {
  if (v < kLinear) return static_cast<int>(std::max<std::int64_t>(0, v));
  const auto u = static_cast<std::uint64_t>(v);
  const int e = std::bit_width(u) - 1;  // 2^e <= v < 2^(e+1), e >= 4
  const auto sub = static_cast<int>((u >> (e - kSubBits)) - kSubBuckets);
  return kLinear + (e - kLinearBits) * kSubBuckets + sub;
}

std::int64_t use_bucket_upper(int bucket) {
  if (bucket < kLinear) return std::max(0, bucket);
  const int e = (bucket - kLinear) / kSubBuckets + kLinearBits;
  const int sub = (bucket - kLinear) % kSubBuckets;
  if (e >= 62) return INT64_MAX;
  const std::int64_t width = std::int64_t{1} << (e - kSubBits);
  return (std::int64_t{1} << e) + (sub + 1) * width - 1;
}

void UseHistogram::add(std::int64_t v, std::int64_t n) {
  if (n <= 0) return;
  v = std::max<std::int64_t>(0, v);
  const auto b = static_cast<std::int32_t>(use_bucket(v));
  auto it = std::lower_bound(buckets.begin(), buckets.end(), b);
  const auto i = it - buckets.begin();
  if (it == buckets.end() || *it != b) {
    buckets.insert(it, b);
    counts.insert(counts.begin() + i, 0);
  }
  counts[static_cast<std::size_t>(i)] += n;
  samples += n;
  max = std::max(max, v);
}

void UseHistogram::merge(const UseHistogram& other) {
  const std::size_t n = std::min(other.buckets.size(), other.counts.size());
  for (std::size_t i = 0; i < n; ++i) {
    const std::int32_t b = other.buckets[i];
    auto it = std::lower_bound(buckets.begin(), buckets.end(), b);
    const auto j = it - buckets.begin();
    if (it == buckets.end() || *it != b) {
      buckets.insert(it, b);
      counts.insert(counts.begin() + j, 0);
    }
    counts[static_cast<std::size_t>(j)] += other.counts[i];
    samples += other.counts[i];
  }
  max = std::max(max, other.max);
}

std::int64_t UseHistogram::quantile(double q) const {
  if (samples <= 0) return 0;
  const auto rank = std::max<std::int64_t>(1, static_cast<std::int64_t>(std::ceil(std::clamp(q, 0.0, 1.0) *
                                                                                  static_cast<double>(samples))));
  std::int64_t seen = 0;
  for (std::size_t i = 0; i < buckets.size() && i < counts.size(); ++i) {
    seen += counts[i];
    if (seen >= rank) return std::min(use_bucket_upper(buckets[i]), max);
  }
  return max;
}

void ResourceUse::add(const UseSample& s) {
  constexpr std::int64_t kMiB = 1 << 20;
  cpu_milli.add(s.cpu_milli);
  memory_mib.add((s.memory_bytes + kMiB - 1) / kMiB);
  if (s.gpu_util_pct >= 0) gpu_util_pct.add(s.gpu_util_pct);
  if (s.gpu_memory_bytes >= 0) gpu_memory_mib.add((s.gpu_memory_bytes + kMiB - 1) / kMiB);
}

void ResourceUse::merge(const ResourceUse& other) {
  cpu_milli.merge(other.cpu_milli);
  memory_mib.merge(other.memory_mib);
  gpu_util_pct.merge(other.gpu_util_pct);
  gpu_memory_mib.merge(other.gpu_memory_mib);
}

namespace {
std::string trim_zero(std::string s) {
  if (s.size() > 2 && s.compare(s.size() - 2, 2, ".0") == 0) s.resize(s.size() - 2);
  return s;
}
constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::int64_t kGiB = std::int64_t{1} << 30;
}  // namespace

std::string cores_text(std::int64_t milli) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(milli) / 1000.0);
  return trim_zero(buf);
}

std::string bytes_text(std::int64_t bytes) {
  char buf[32];
  if (bytes >= kGiB) {
    std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(bytes) / static_cast<double>(kGiB));
    return trim_zero(buf) + " GiB";
  }
  std::snprintf(buf, sizeof buf, "%lld MiB", static_cast<long long>((bytes + kMiB - 1) / kMiB));
  return buf;
}

}  // namespace cp
