#include "server/alert_rules.h"

#include <algorithm>
#include <map>

namespace cp {

namespace {

std::vector<AlertDelivery> notify_all(const std::vector<std::string>& receivers, const std::string& what, Millis now) {
  std::vector<AlertDelivery> out;
  for (const auto& r : receivers) {
    AlertDelivery d;
    d.receiver = r;
    d.notify = what;
    d.next_at = now;
    out.push_back(std::move(d));
  }
  return out;
}

std::vector<std::string> receivers_of(const Alert& a) {
  std::vector<std::string> out;
  for (const auto& d : a.deliveries) out.push_back(d.receiver);
  return out;
}

void fire(Alert& a, const std::vector<std::string>& receivers, Millis now) {
  a.state = AlertState::firing;
  a.firing_at = now;
  a.deliveries = notify_all(receivers, "firing", now);
}

}  // namespace

std::string alert_fingerprint(const std::string& rule, const Labels& labels) {
  // Labels is an ordered map: the same labels give the same text.
  std::string out = rule;
  for (const auto& [k, v] : labels) {
    out += '|';
    out += k;
    out += '=';
    out += v;
  }
  return out;
}

AlertStep step_alerts(const std::vector<Alert>& open, const std::vector<AlertCondition>& holding, Millis now,
                      const std::function<std::string()>& new_id) {
  AlertStep step;
  std::map<std::string, const Alert*> by_fingerprint;
  for (const auto& a : open) {
    if (a.state != AlertState::resolved) by_fingerprint[a.fingerprint] = &a;
  }
  std::map<std::string, bool> seen;
  for (const auto& c : holding) {
    const std::string fp = alert_fingerprint(c.rule, c.labels);
    if (seen[fp]) continue;  // the same condition twice: the first counts
    seen[fp] = true;
    auto it = by_fingerprint.find(fp);
    if (it == by_fingerprint.end()) {
      Alert a;
      a.id = new_id();
      a.fingerprint = fp;
      a.rule = c.rule;
      a.severity = c.severity;
      a.labels = c.labels;
      a.summary = c.summary;
      a.summary_zh = c.summary_zh;
      a.value = c.value;
      a.for_s = c.for_s;
      a.started_at = now;
      a.updated_at = now;
      if (c.for_s <= 0) fire(a, c.receivers, now);
      step.changed.push_back(std::move(a));
      continue;
    }
    Alert a = *it->second;
    bool changed = a.value != c.value || a.summary != c.summary || a.summary_zh != c.summary_zh ||
                   a.severity != c.severity;
    a.value = c.value;
    a.summary = c.summary;
    a.summary_zh = c.summary_zh;
    a.severity = c.severity;
    if (a.for_s != c.for_s || a.cleared_at != 0) changed = true;
    a.for_s = c.for_s;
    a.cleared_at = 0;  // back before it resolved: the same alert goes on firing, nobody is told again
    if (a.state == AlertState::pending && now - a.started_at >= c.for_s * 1000) {
      fire(a, c.receivers, now);
      changed = true;
    }
    if (changed) {
      a.updated_at = now;
      step.changed.push_back(std::move(a));
    }
  }
  for (const auto& [fp, alert] : by_fingerprint) {
    if (seen.count(fp)) continue;
    if (alert->state == AlertState::pending) {
      step.dropped.push_back(alert->id);
      continue;
    }
    Alert a = *alert;
    if (a.cleared_at == 0) a.cleared_at = now;
    if (now - a.cleared_at < a.for_s * 1000) {
      if (a.cleared_at == now) {  // first pass without it: note when
        a.updated_at = now;
        step.changed.push_back(std::move(a));
      }
      continue;
    }
    a.state = AlertState::resolved;
    a.resolved_at = now;
    a.updated_at = now;
    a.deliveries = notify_all(receivers_of(*alert), "resolved", now);
    step.changed.push_back(std::move(a));
  }
  return step;
}

Millis delivery_backoff_ms(int attempts) {
  const Millis cap = 15 * 60 * 1000;
  Millis d = 10'000;
  for (int i = 1; i < attempts && d < cap; ++i) d *= 2;
  return std::min(d, cap);
}

std::vector<std::size_t> due_deliveries(const Alert& a, Millis now) {
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < a.deliveries.size(); ++i) {
    if (a.deliveries[i].state == "pending" && a.deliveries[i].next_at <= now) out.push_back(i);
  }
  return out;
}

void record_delivery(Alert& a, std::size_t i, Millis now, const std::string& error) {
  auto& d = a.deliveries.at(i);
  ++d.attempts;
  a.updated_at = now;
  if (error.empty()) {
    d.state = "ok";
    d.last_error.clear();
    d.delivered_at = now;
    return;
  }
  d.last_error = error;
  if (d.attempts >= kMaxDeliveryAttempts) {
    d.state = "failed";
  } else {
    d.next_at = now + delivery_backoff_ms(d.attempts);
  }
}

}  // namespace cp
