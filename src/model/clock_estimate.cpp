#include "model/clock_estimate.h"

namespace cp {

std::optional<ClockSample> clock_sample(Millis t0, Millis t1, Millis t2, Millis t3) {
  if (t1 <= 0 || t2 < t1 || t3 < t0) return std::nullopt;
  ClockSample s;
  s.delay_ms = (t3 - t0) - (t2 - t1);
  // The server's part longer than the whole round trip: two clocks that do
  // not tick alike (or a clock stepped during the exchange); no sample.
  if (s.delay_ms < 0) return std::nullopt;
  // Halves rounded toward zero each, then summed: no overflow for any pair
  // of Millis readings of this century.
  s.offset_ms = (t0 - t1) / 2 + (t3 - t2) / 2;
  return s;
}

void ClockEstimator::add(const ClockSample& sample) {
  samples_.push_back(sample);
  while (samples_.size() > window_) samples_.pop_front();
}

std::optional<ClockSample> ClockEstimator::best() const {
  std::optional<ClockSample> out;
  for (const auto& s : samples_) {
    if (!out || s.delay_ms <= out->delay_ms) out = s;
  }
  return out;
}

}  // namespace cp
