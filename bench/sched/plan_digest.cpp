#include "plan_digest.h"

#include <cstdio>

#include "common/json.h"

namespace cp::bench {

void PlanDigest::bytes(std::string_view s) {
  for (unsigned char c : s) {
    h_ ^= c;
    h_ *= 1099511628211ull;
  }
}

void PlanDigest::text(std::string_view s) {
  number(static_cast<std::int64_t>(s.size()));
  bytes(s);
}

void PlanDigest::number(std::int64_t n) {
  auto u = static_cast<std::uint64_t>(n);
  for (int i = 0; i < 8; ++i) {
    h_ ^= (u >> (8 * i)) & 0xff;
    h_ *= 1099511628211ull;
  }
}

void PlanDigest::add(const sched::Plan& plan) {
  number(static_cast<std::int64_t>(plan.placements.size()));
  for (const auto& p : plan.placements) {
    text(p.task_id);
    text(p.cluster_id);
    number(p.shape);
    number(p.borrowing ? 1 : 0);
    text(p.per_replica.to_string());
    number(static_cast<std::int64_t>(p.placements.size()));
    for (const auto& r : p.placements) {
      number(r.replica);
      text(r.node);
      number(static_cast<std::int64_t>(r.gpu_indices.size()));
      for (int g : r.gpu_indices) number(g);
    }
  }
  number(static_cast<std::int64_t>(plan.preemptions.size()));
  for (const auto& p : plan.preemptions) {
    for (const std::string* s : {&p.attempt_id, &p.task_id, &p.cluster_id, &p.preemptor, &p.kind, &p.message,
                                 &p.message_zh}) {
      text(*s);
    }
  }
  number(static_cast<std::int64_t>(plan.pending.size()));
  for (const auto& p : plan.pending) {
    text(p.task_id);
    number(static_cast<std::int64_t>(p.reasons.size()));
    for (const auto& r : p.reasons) {
      text(r.code);
      text(r.message);
      text(r.message_zh);
      text(json::serialize(r.details));
    }
  }
}

std::string PlanDigest::hex() const {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h_));
  return buf;
}

}  // namespace cp::bench
