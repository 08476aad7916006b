// A digest of every plan a benchmark run produces, so that a change to the
// scheduler that is meant to be faster only can be shown to leave each
// placement (nodes, GPU indices), preemption and pending reason (code,
// wording, details) exactly as it was: same flags, same digest.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "sched/scheduler.h"

namespace cp::bench {

// FNV-1a, 64 bits: not for security, only to tell two runs apart.
class PlanDigest {
 public:
  void add(const sched::Plan& plan);
  // Folds in another digest (a part of the run digested on its own).
  void add(const PlanDigest& part) { number(static_cast<std::int64_t>(part.h_)); }
  std::string hex() const;

 private:
  void bytes(std::string_view s);
  void text(std::string_view s);  // length-prefixed, so fields cannot run together
  void number(std::int64_t n);
  std::uint64_t h_ = 14695981039346656037ull;
};

}  // namespace cp::bench
