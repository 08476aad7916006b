// Time is injected. Production code reads a Clock; tests drive a SimulatedClock.
// All timestamps in Cubeplane are milliseconds since the Unix epoch (UTC).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace cp {

using Millis = std::int64_t;

class Clock {
 public:
  virtual ~Clock() = default;
  virtual Millis now_ms() const = 0;
};

class SystemClock final : public Clock {
 public:
  Millis now_ms() const override;
  static const SystemClock& instance();
};

// Milliseconds since this machine booted, suspend included (CLOCK_BOOTTIME):
// wall-clock steps do not move it. Not a date: for deadlines kept on one
// machine (the agent's lease, held by its tasks' supervisors too).
class BootTimeClock final : public Clock {
 public:
  Millis now_ms() const override;
  static const BootTimeClock& instance();
};

class SimulatedClock final : public Clock {
 public:
  explicit SimulatedClock(Millis start = 1'767'225'600'000) : now_(start) {}  // 2026-01-01T00:00:00Z
  Millis now_ms() const override { return now_.load(); }
  void advance_ms(Millis d) { now_ += d; }
  void set_ms(Millis t) { now_ = t; }

 private:
  std::atomic<Millis> now_;
};

// `base` moved by an offset to another clock, set from readings of that
// clock: the metadata store's, so that several servers on one store date
// agent contacts and judge silence on one time (DESIGN.md "Fencing and
// outages": no timestamp crosses machines). Offset 0 until the first
// sample. A sample whose round trip took longer than kMaxRoundTripMs is
// ignored (its error would be up to half of it).
class OffsetClock final : public Clock {
 public:
  static constexpr Millis kMaxRoundTripMs = 200;
  explicit OffsetClock(const Clock& base) : base_(base) {}
  Millis now_ms() const override { return base_.now_ms() + offset_.load(std::memory_order_relaxed); }
  const Clock& base() const { return base_; }
  // `other` read between base readings `before` and `after`.
  void sample(Millis other, Millis before, Millis after) {
    if (after < before || after - before > kMaxRoundTripMs) return;
    offset_.store(other - (before + after) / 2, std::memory_order_relaxed);
    sampled_.store(true, std::memory_order_relaxed);
  }
  Millis offset() const { return offset_.load(std::memory_order_relaxed); }
  bool sampled() const { return sampled_.load(std::memory_order_relaxed); }

 private:
  const Clock& base_;
  std::atomic<Millis> offset_{0};
  std::atomic<bool> sampled_{false};
};

// RFC 3339 in UTC with milliseconds ("2026-01-01T00:00:00.000Z"); 0 -> "".
std::string format_time(Millis t);
// Parses RFC 3339 ("...Z" or "+08:00") and plain dates ("2026-01-31" = midnight UTC).
bool parse_time(std::string_view s, Millis& out);

// 00:00 UTC of the first day of the month holding t, and of the month after.
Millis month_start(Millis t);
Millis next_month_start(Millis t);

// CPU time the calling thread has used so far (not a Clock: it measures,
// it does not date). Beside the wall time it shows how long the thread
// waited, for a core or for the disk (benchmarks, the SQLite writer's stats).
std::int64_t thread_cpu_ns();
inline double thread_cpu_ms() { return static_cast<double>(thread_cpu_ns()) / 1e6; }

}  // namespace cp
