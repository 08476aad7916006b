// Resource amounts summed without overflow, for quota and node load.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/resources.h"

namespace cp::sched {

// Sums over many replicas and tasks need more than 64 bits: each validated
// amount is at most 2^53 and a gang has up to 1024 replicas.
__extension__ typedef __int128 Wide;

// Resource amounts that cannot overflow. Absent names are 0. A handful of
// names at most (cpu, memory, a GPU type or two): a flat vector in name order
// is faster to search and to copy than a map, and the scheduler does both
// for every node and task.
class Tally {
 public:
  using Entry = std::pair<std::string, Wide>;
  void add(const Resources& r, std::int64_t times = 1);
  void add(const Tally& t, std::int64_t times = 1);
  void add(std::string_view name, Wide amount) { at(name) += amount; }
  Wide get(std::string_view name) const;
  // Every "gpu/<type>" entry together.
  Wide gpus() const;
  const std::vector<Entry>& amounts() const { return amounts_; }

 private:
  Wide& at(std::string_view name);
  std::vector<Entry> amounts_;  // sorted by name
};

// An int64 for messages and JSON details; clamps what cannot happen with
// validated input rather than wrapping.
std::int64_t narrow(Wide v);

}  // namespace cp::sched
