#include "sched/gpu_set.h"

#include <algorithm>

namespace cp::sched {

bool GpuIndexSet::contains(int index) const {
  if (index >= 0 && index < 64) return (low_ >> index) & 1u;
  if (index >= 0 && index < kMaskedIndices) {
    auto w = static_cast<std::size_t>(index / 64 - 1);
    return w < high_.size() && ((high_[w] >> (index % 64)) & 1u);
  }
  return std::binary_search(others_.begin(), others_.end(), index);
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
