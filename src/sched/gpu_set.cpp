#include "sched/gpu_set.h"

#include <algorithm>
#include <bit>

namespace cp::sched {

bool GpuIndexSet::contains(int index) const {
  if (index >= 0 && index < 64) return (low_ >> index) & 1u;
  if (index >= 0 && index < kMaskedIndices) {
    auto w = static_cast<std::size_t>(index / 64 - 1);
    return w < high_.size() && ((high_[w] >> (index % 64)) & 1u);
  }
  return std::binary_search(others_.begin(), others_.end(), index);
}

std::size_t GpuIndexSet::count_below_any(int n) const {
  if (n <= 0) return 0;
  auto bits_below = [](std::uint64_t word, int k) {  // members of word among its lowest k bits
    return static_cast<std::size_t>(std::popcount(k >= 64 ? word : word & ((std::uint64_t{1} << k) - 1)));
  };
  std::size_t out = bits_below(low_, n);
  for (std::size_t w = 0; w < high_.size() && 64 * (static_cast<int>(w) + 1) < n; ++w) {
    out += bits_below(high_[w], n - 64 * (static_cast<int>(w) + 1));
  }
  if (n > kMaskedIndices) {
    out += static_cast<std::size_t>(std::lower_bound(others_.begin(), others_.end(), n) -
                                    std::lower_bound(others_.begin(), others_.end(), kMaskedIndices));
  }
  return out;
}

void GpuIndexSet::insert(int index) {
  if (contains(index)) return;
  ++count_;
  if (index >= 0 && index < 64) {
    low_ |= std::uint64_t{1} << index;
  } else if (index >= 0 && index < kMaskedIndices) {
    auto w = static_cast<std::size_t>(index / 64 - 1);
    if (w >= high_.size()) high_.resize(w + 1, 0);
    high_[w] |= std::uint64_t{1} << (index % 64);
  } else {
    others_.insert(std::lower_bound(others_.begin(), others_.end(), index), index);
  }
}

void GpuIndexSet::erase(int index) {
  if (!contains(index)) return;
  --count_;
  if (index >= 0 && index < 64) {
    low_ &= ~(std::uint64_t{1} << index);
  } else if (index >= 0 && index < kMaskedIndices) {
    high_[static_cast<std::size_t>(index / 64 - 1)] &= ~(std::uint64_t{1} << (index % 64));
  } else {
    others_.erase(std::lower_bound(others_.begin(), others_.end(), index));
  }
}

}  // namespace cp::sched
