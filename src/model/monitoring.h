// What the platform watches about itself: each cluster's history in time
// buckets (the overview heatmap) and alerts (DESIGN.md "Interfaces";
// issue 7). Plain structs, described for the JSON codec like types.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <boost/describe.hpp>

#include "common/json.h"
#include "model/types.h"

namespace cp {

// One time bucket of one cluster. Every field is a sum, so that rows of the
// same key add up (Tx::add_cluster_samples): gauges are summed over the
// samples taken in the bucket (divide by `samples`), counters over the
// events that fell in it. The same figures are kept at three widths
// (minute, hour, day), each kept for its own time (ServerConfig).
struct ClusterSample {
  std::string cluster;
  std::int64_t width_s = 60;  // 60, 3600 or 86400
  Millis bucket = 0;          // start of the bucket (a multiple of width_s)
  // Gauges, one addend per fleet sample.
  std::int64_t samples = 0;
  std::int64_t gpus_total = 0;        // GPUs on the cluster's nodes
  std::int64_t gpus_allocated = 0;    // GPUs held by attempts
  std::int64_t gpu_util_sum = 0;      // utilization percents of the devices that reported one
  std::int64_t gpu_util_devices = 0;  // how many devices that was
  // Counters.
  std::int64_t dispatched = 0;  // attempts placed on the cluster
  std::int64_t wait_ms = 0;     // their tasks' time in the queue, summed
  std::int64_t finished = 0;    // attempts that ended Succeeded, Failed or Lost
  std::int64_t failed = 0;      // of those, Failed or Lost
};
BOOST_DESCRIBE_STRUCT(ClusterSample, (),
                      (cluster, width_s, bucket, samples, gpus_total, gpus_allocated, gpu_util_sum, gpu_util_devices,
                       dispatched, wait_ms, finished, failed))

BOOST_DEFINE_ENUM_CLASS(AlertState, pending, firing, resolved)

// One receiver's delivery of an alert's latest transition (firing or
// resolved): retried with backoff until it succeeds or gives up.
struct AlertDelivery {
  std::string receiver;  // "webhook:<url>" or "email:<address>"
  std::string notify;    // the transition being delivered: "firing" | "resolved"
  std::string state = "pending";  // pending | ok | failed (gave up)
  int attempts = 0;
  std::string last_error;
  Millis next_at = 0;  // when to try again (pending)
  Millis delivered_at = 0;
};
BOOST_DESCRIBE_STRUCT(AlertDelivery, (), (receiver, notify, state, attempts, last_error, next_at, delivered_at))

struct Alert {
  std::string id;
  std::string fingerprint;  // rule + labels; at most one pending or firing alert per fingerprint
  std::string rule;         // quota_watermark | cluster_offline | credential_expiring | node_not_ready | queue_wait | budget
  std::string severity;     // info | warning | critical
  AlertState state = AlertState::pending;
  Labels labels;
  std::string summary;
  std::string summary_zh;
  double value = 0;  // the observed figure: percent, seconds, ...
  std::int64_t for_s = 0;  // held this long before firing; and clear this long before resolving
  Millis started_at = 0;  // the condition was first seen
  Millis cleared_at = 0;  // firing, but the condition has not been seen since (0: it holds)
  Millis firing_at = 0;
  Millis resolved_at = 0;
  Millis updated_at = 0;
  std::vector<AlertDelivery> deliveries;
};
BOOST_DESCRIBE_STRUCT(Alert, (),
                      (id, fingerprint, rule, severity, state, labels, summary, summary_zh, value, for_s, started_at,
                       cleared_at, firing_at, resolved_at, updated_at, deliveries))

// One change made through the API (or a refused attempt at one): who, what,
// when, from where, and the object before and after (as GET showed it),
// secrets removed. Written by the HTTP layer after each POST, PUT, PATCH or
// DELETE of a user.
struct AuditEntry {
  std::string id;  // time-ordered (new_id)
  Millis at = 0;
  std::string user;
  std::string method;
  std::string path;   // as requested, with the query
  std::string route;  // the pattern, e.g. /api/v1/resource-groups/{name}
  int status = 0;
  std::string remote_addr;
  std::string request_id;
  json::value request;  // the body (JSON; YAML bodies as their JSON), null when none
  json::value before;   // null when there was nothing to show (creations, actions)
  json::value after;    // the answer of a successful change; null after a DELETE or a refusal
  std::string error;    // the refusal's code and message
};
BOOST_DESCRIBE_STRUCT(AuditEntry, (),
                      (id, at, user, method, path, route, status, remote_addr, request_id, request, before, after,
                       error))

// Secrets never reach the audit log: in a body or an answer, the value of
// every key named token, credential, secret, password or hash, at any
// depth, becomes "[redacted]".
void redact_secrets(json::value& v);

}  // namespace cp
