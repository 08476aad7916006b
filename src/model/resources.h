// Resource amounts as exact integers: "cpu" in millicores, "memory" in bytes,
// and named extended resources ("gpu/nvidia-a100-80gb", "gpu/mig-1g.10gb") in
// whole units. No floating point anywhere (Ray's fixed_point.h, in spirit).
//
// In JSON and YAML a Resources value is a map of Kubernetes quantity strings:
// {"cpu": "500m", "memory": "4Gi", "gpu/nvidia-a100-80gb": "2"}.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <boost/container/flat_map.hpp>

#include "common/json.h"
#include "common/result.h"

namespace cp {

inline constexpr std::string_view kCpu = "cpu";
inline constexpr std::string_view kMemory = "memory";
inline constexpr std::string_view kGpuPrefix = "gpu/";

// Parses a quantity for the named resource. cpu: "2", "1.5", "500m" -> millicores;
// memory: "4Gi", "512Mi", "1G", "1.5Gi", "1024" -> bytes (fractions must come out
// whole); others: whole non-negative numbers. Negative, malformed, overflowing or
// too precise values are errors naming `field_path`.
Result<std::int64_t> parse_quantity(std::string_view resource, std::string_view text,
                                    const std::string& field_path = "");
// Canonical text for an amount: cpu 1500 -> "1500m", 2000 -> "2"; memory
// 4294967296 -> "4Gi"; others -> decimal.
std::string format_quantity(std::string_view resource, std::int64_t amount);

class Resources {
 public:
  Resources() = default;
  // Short form for tests and configs: "cpu:2,memory:4Gi,gpu/a100:8". CHECKs on bad input.
  static Resources parse_or_die(std::string_view spec);
  static Result<Resources> parse(std::string_view spec);

  std::int64_t get(std::string_view name) const;
  void set(std::string_view name, std::int64_t amount);  // 0 erases
  std::int64_t cpu_milli() const { return get(kCpu); }
  std::int64_t memory_bytes() const { return get(kMemory); }
  // Total GPUs of every type.
  std::int64_t gpus() const;
  // The type of the first "gpu/<type>" entry, or "".
  std::string gpu_type() const;

  // Saturating arithmetic is never wanted: these CHECK on overflow, so callers
  // validate user input (which is bounded) before adding.
  Resources& operator+=(const Resources& o);
  Resources& operator-=(const Resources& o);
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator-(Resources a, const Resources& b) { return a -= b; }
  Resources times(std::int64_t n) const;
  bool operator==(const Resources& o) const = default;

  // Every amount in *this is <= the same amount in `limit` (absent = 0).
  bool fits_in(const Resources& limit) const;
  // The names whose amount in *this exceeds `limit`.
  std::vector<std::string> exceeding(const Resources& limit) const;
  bool empty() const { return amounts_.empty(); }
  bool any_negative() const;
  // By name, in name order, side by side in one array (a task's few amounts
  // are read in a few cache lines, not a tree node each). Valid until this
  // Resources next changes.
  using Amounts = boost::container::flat_map<std::string, std::int64_t, std::less<>>;
  const Amounts& amounts() const { return amounts_; }
  // "cpu=2, memory=4Gi, gpu/a100=8"
  std::string to_string() const;

 private:
  Amounts amounts_;
};

void cp_to_json(json::value& out, const Resources& r);
Status cp_from_json(const json::value& in, Resources& out, const DecodeContext& ctx);

// Largest amount accepted from users for any resource, to keep every sum far
// from int64 overflow: 2^53 (about 9 PiB of memory, 9e12 cores).
inline constexpr std::int64_t kMaxQuantity = std::int64_t{1} << 53;

}  // namespace cp
