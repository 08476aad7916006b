#include "sched/tally.h"

#include <algorithm>
#include <limits>

namespace cp::sched {

Wide& Tally::at(std::string_view name) {
  // Found by equality first: a handful of names, most told apart by their
  // length alone; the ordered search only to insert a new one.
  for (auto& [n, amount] : amounts_) {
    if (n == name) return amount;
  }
  auto it = std::lower_bound(amounts_.begin(), amounts_.end(), name,
                             [](const Entry& e, std::string_view n) { return e.first < n; });
  if (it == amounts_.end() || it->first != name) it = amounts_.emplace(it, std::string(name), 0);
  return it->second;
}

void Tally::add(const Resources& r, std::int64_t times) {
  for (const auto& [name, amount] : r.amounts()) at(name) += static_cast<Wide>(amount) * times;
}

void Tally::add(const Tally& t, std::int64_t times) {
  for (const auto& [name, amount] : t.amounts_) at(name) += amount * times;
}

Wide Tally::get(std::string_view name) const {
  for (const auto& [n, amount] : amounts_) {
    if (n == name) return amount;
  }
  return 0;
}

Wide Tally::gpus() const {
  Wide n = 0;
  for (const auto& [name, amount] : amounts_) {
    if (name.starts_with(kGpuPrefix)) n += amount;
  }
  return n;
}

std::int64_t narrow(Wide v) {
  constexpr auto kMax = std::numeric_limits<std::int64_t>::max();
  constexpr auto kMin = std::numeric_limits<std::int64_t>::min();
  if (v > kMax) return kMax;
  if (v < kMin) return kMin;
  return static_cast<std::int64_t>(v);
}

}  // namespace cp::sched
