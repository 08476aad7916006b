// The alert state machine, pure: the conditions that hold now and the open
// alerts in, the alerts to write (and the pending ones to forget) out. No
// store, no clock, no network: the caller gathers the conditions
// (alerts.cpp) and delivers what this decides.
//
//   condition holds, no alert      -> pending (firing at once when for_s == 0)
//   pending, held for for_s        -> firing; each receiver gets "firing"
//   pending, condition gone        -> dropped (never fired, nobody told)
//   firing, condition gone for_s   -> resolved; each receiver gets "resolved"
//
// A firing alert resolves only once its condition has stayed away as long as
// it had to hold to fire, so a figure wobbling around a watermark keeps one
// alert firing instead of sending firing/resolved pairs on every pass.
//
// One alert per fingerprint (rule and labels) is pending or firing at a
// time, so a condition seen on every pass is one alert, not many.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "model/monitoring.h"

namespace cp {

// A condition that holds now, as a rule saw it.
struct AlertCondition {
  std::string rule;
  std::string severity;  // info | warning | critical
  Labels labels;         // with `rule`, what makes it one alert
  double value = 0;
  std::int64_t for_s = 0;  // how long it must hold before it fires
  std::string summary;
  std::string summary_zh;
  std::vector<std::string> receivers;  // "webhook:<url>" | "email:<address>"
};

std::string alert_fingerprint(const std::string& rule, const Labels& labels);

struct AlertStep {
  std::vector<Alert> changed;        // to write (new, or changed)
  std::vector<std::string> dropped;  // ids of pending alerts whose condition went away
};

// `open`: the alerts that are pending or firing (others are ignored).
// `new_id` names a new alert.
AlertStep step_alerts(const std::vector<Alert>& open, const std::vector<AlertCondition>& holding, Millis now,
                      const std::function<std::string()>& new_id);

// Delivery backoff: after the n-th failed try (n >= 1), the next comes this
// much later: 10 s, 20 s, 40 s, ... at most 15 minutes. After
// kMaxDeliveryAttempts tries a delivery has failed for good.
Millis delivery_backoff_ms(int attempts);
inline constexpr int kMaxDeliveryAttempts = 8;

// The receivers of `a` whose delivery is due at `now`.
std::vector<std::size_t> due_deliveries(const Alert& a, Millis now);
// Records the outcome of one try of a.deliveries[i].
void record_delivery(Alert& a, std::size_t i, Millis now, const std::string& error /* "" = delivered */);

}  // namespace cp
