// What work really uses, as opposed to what it requests (DESIGN.md, usage):
// the agent samples each running replica every few seconds (CPU and
// resident memory of its processes; utilization and memory of its GPUs where
// NVML measures them) and reports the samples as histograms. Histograms,
// not averages, so that they merge across replicas, attempts and days and
// still answer "what does this step use at p95".
//
// Buckets are log-linear (as in HdrHistogram): values below 16 exactly,
// then 8 equal buckets per power of two, so a percentile read back is at
// most 12.5 % above the truth and never below it. Integer arithmetic only.
#pragma once

#include <boost/describe.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include <cstddef>

namespace cp {

// The bucket of a value (negative values count as 0) and the largest value
// that falls in a bucket.
int use_bucket(std::int64_t v);
std::int64_t use_bucket_upper(int bucket);

struct UseHistogram {
  std::vector<std::int32_t> buckets;  // bucket indices, ascending
  std::vector<std::int64_t> counts;   // samples in each, parallel to buckets
  std::int64_t samples = 0;
  std::int64_t max = 0;

  void add(std::int64_t v, std::int64_t n = 1);
  void merge(const UseHistogram& other);
  // The value at or below which a fraction q (0..1) of the samples fall,
  // rounded up to its bucket's upper end but never above max; 0 when empty.
  std::int64_t quantile(double q) const;
  bool empty() const { return samples == 0; }
};
BOOST_DESCRIBE_STRUCT(UseHistogram, (), (buckets, counts, samples, max))

// One replica's figures at one sampling instant.
struct UseSample {
  std::int64_t cpu_milli = 0;     // CPU time over the interval / interval length
  std::int64_t memory_bytes = 0;  // resident set of its processes
  // Of its GPUs, when measured: utilization averaged over them (percent) and
  // memory used summed (bytes); -1 when not measured.
  std::int64_t gpu_util_pct = -1;
  std::int64_t gpu_memory_bytes = -1;
};

struct ResourceUse {
  UseHistogram cpu_milli;       // millicores per replica
  UseHistogram memory_mib;      // MiB per replica
  UseHistogram gpu_util_pct;    // percent, mean over the replica's GPUs
  UseHistogram gpu_memory_mib;  // MiB per replica, over its GPUs

  void add(const UseSample& s);
  void merge(const ResourceUse& other);
  std::int64_t samples() const { return cpu_milli.samples; }
};
BOOST_DESCRIBE_STRUCT(ResourceUse, (), (cpu_milli, memory_mib, gpu_util_pct, gpu_memory_mib))

// Figures as people write them: "1.2" cores from millicores; "9.5 GiB" or
// "300 MiB" (rounded up) from bytes.
std::string cores_text(std::int64_t milli);
std::string bytes_text(std::int64_t bytes);

}  // namespace cp
