// The agent's clock against the server's, as NTP estimates it, for node
// preflight (a node more than 1 s off is drift, server/preflight.h).
//
// Taking `sent_at - now` on the server counts the time a sync waited for the
// server as clock offset: at 1,000 agents a server that fell a second behind
// flagged every node, wrote its rows and an event each, and unflagged them at
// the next quick sync (docs/benchmarks.md, "Agent sync load"). Each sync is
// instead one NTP exchange:
//
//   agent  t0 ──request──►  t1 server took it up
//                            ... the sync (and a long-poll's hold) ...
//   agent  t3 ◄──answer───  t2 server answered
//
//   offset = ((t0 - t1) + (t3 - t2)) / 2    agent clock minus server clock
//   delay  = (t3 - t0) - (t2 - t1)          time on the wire and in queues
//
// A request that queued for Q makes the offset Q/2 too low at worst, and its
// delay says so (|error| <= delay / 2). Of the last few exchanges the one
// with the least delay is the best estimate (NTP's clock filter), so a burst
// of slow syncs moves nothing while one quick sync remains in the window.
//
// Pure: the agent (and the load generator in bench/agents) feed it their
// own clock's readings.
#pragma once

#include <cstddef>
#include <deque>
#include <optional>

#include "common/clock.h"

namespace cp {

struct ClockSample {
  Millis offset_ms = 0;  // agent clock minus server clock
  Millis delay_ms = 0;   // round trip less the server's own time (>= 0)
};

// One exchange; nullopt when it cannot be an exchange (a server that sent no
// times, or times that run backwards).
std::optional<ClockSample> clock_sample(Millis t0, Millis t1, Millis t2, Millis t3);

class ClockEstimator {
 public:
  explicit ClockEstimator(std::size_t window = 8) : window_(window == 0 ? 1 : window) {}

  void add(const ClockSample& sample);
  // The sample of least delay among the last `window` (the latest of equals).
  std::optional<ClockSample> best() const;

 private:
  std::size_t window_;
  std::deque<ClockSample> samples_;
};

}  // namespace cp
