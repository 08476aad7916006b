// Prices and cost (issue 7): what an hour of each resource costs, from a
// date on, and the cost of usage-ledger sums. Integer arithmetic only:
// prices are micro-units of the currency per hour, a cost is summed as an
// exact fraction and rounded once, to the cent, when it is shown.
//
//   apiVersion: cubeplane/v1
//   kind: PriceTable
//   metadata: {name: default}
//   spec:
//     currency: USD
//     prices:
//       - {resource: gpu/nvidia-a100-80gb, per_hour: "2.50", from: 2026-01-01}   # per GPU-hour
//       - {resource: gpu, per_hour: "1.00", from: 2026-01-01}   # any GPU type without its own price
//       - {resource: cpu, per_hour: "0.04", from: 2026-01-01}   # per core-hour
//       - {resource: memory, per_hour: "0.005", from: 2026-01-01}   # per GiB-hour
#pragma once

#include <boost/describe.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/result.h"

namespace cp {

struct Price {
  std::string resource;             // "cpu", "memory", "gpu/<type>" or "gpu"
  std::int64_t micros_per_hour = 0;  // 2.50 -> 2'500'000
  Millis from = 0;                  // 00:00 UTC of the first day it applies
};
BOOST_DESCRIBE_STRUCT(Price, (), (resource, micros_per_hour, from))

struct PriceTable {
  std::string currency = "USD";
  std::vector<Price> prices;  // by resource, then from
  Millis updated_at = 0;

  bool empty() const { return prices.empty(); }
  // The price of `resource` on `day` (the entry with the latest from <= day);
  // for "gpu/<type>" without one, the "gpu" price. nullopt: free.
  std::optional<std::int64_t> price_at(const std::string& resource, Millis day) const;
  // Whether any price starts inside (from, to): then one price per resource
  // does not cover the whole of [from, to).
  bool changes_within(Millis from, Millis to) const;
};
BOOST_DESCRIBE_STRUCT(PriceTable, (), (currency, prices, updated_at))

Result<PriceTable> price_table_from_document(const json::value& doc);
json::object price_table_to_document(const PriceTable& t);

// "2.5" -> 2'500'000; at most 6 decimals, not negative, at most 1,000,000.
Result<std::int64_t> parse_price(const std::string& text, const std::string& path);
std::string format_micros(std::int64_t micros);  // 2'500'000 -> "2.5", 40'000 -> "0.04"

// The cost of usage, summed exactly and rounded once.
class Cost {
 public:
  // Adds the cost of ledger sums (GPU-ms of `gpu_type`, core-ms, MiB-s)
  // at the prices of `day`.
  void add(const PriceTable& t, Millis day, const std::string& gpu_type, std::int64_t gpu_ms,
           std::int64_t cpu_core_ms, std::int64_t memory_mib_s);
  void add(const Cost& other) { num_ += other.num_; }
  std::int64_t cents() const;  // rounded half up

 private:
  // In units of 1 / (3,600,000 ms x 1,024 MiB x 10,000 micro-units per cent).
  __extension__ using Wide = __int128;
  Wide num_ = 0;
};

}  // namespace cp
