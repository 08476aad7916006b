// The device indices of a node's GPUs that work holds, as a bitmask: one
// 64-bit word covers a whole 8-GPU node, so a node's load is copied (for a
// what-if overlay, for each replica of a gang) without touching the heap,
// and "is GPU i free" is a shift and a mask, not a tree walk.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace cp::sched {

// std::popcount, inline. Built for the x86-64 baseline (no POPCNT
// instruction), std::popcount is a call into libgcc; free_gpus counts bits
// for every node a fit asks about (two million times in a big cycle).
inline int bit_count(std::uint64_t x) {
#if defined(__POPCNT__) || !defined(__x86_64__)
  return std::popcount(x);
#else
  x -= (x >> 1) & 0x5555555555555555ULL;
  x = (x & 0x3333333333333333ULL) + ((x >> 2) & 0x3333333333333333ULL);
  x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0FULL;
  return static_cast<int>((x * 0x0101010101010101ULL) >> 56);
#endif
}

class GpuIndexSet {
 public:
  bool contains(int index) const;
  void insert(int index);
  void erase(int index);
  bool empty() const { return count_ == 0; }
  std::size_t size() const { return count_; }
  // How many of 0..n-1 are in the set: a popcount for a node whose devices
  // are numbered 0..n-1 (the usual case), instead of a lookup per device.
  std::size_t count_below(int n) const {
    // 0..n-1 within the first word: nothing else can be among them.
    if (n > 0 && n <= 64) {
      return static_cast<std::size_t>(bit_count(n == 64 ? low_ : low_ & ((std::uint64_t{1} << n) - 1)));
    }
    return count_below_any(n);
  }

 private:
  // Indices below this go in the bitmask; an agent may report any int, so
  // the rare ones outside it (negative, huge) are kept in a sorted list
  // instead of growing the mask without bound.
  static constexpr int kMaskedIndices = 4096;

  std::uint64_t low_ = 0;             // 0..63: every node seen in practice
  std::size_t count_ = 0;             // beside low_: the two a free-GPU count reads
  std::vector<std::uint64_t> high_;   // 64..kMaskedIndices-1, word w = indices 64(w+1)..
  std::vector<int> others_;           // the rest, ascending

  std::size_t count_below_any(int n) const;
};

}  // namespace cp::sched
