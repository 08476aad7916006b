// Prometheus metrics (prometheus-cpp core, text format 0.0.4): HTTP request
// latency and counts by route pattern, and the domain gauges that GET
// /metrics refreshes from ControlPlane::metrics() before serializing.
//
//   cubeplane_http_request_duration_seconds{route,method,code}  histogram
//   cubeplane_http_requests_total{route,method,code}            counter
//   cubeplane_queue_length{resource_group}
//   cubeplane_quota_used{resource_group,resource}
//   cubeplane_quota_limit{resource_group,resource}
//   cubeplane_tasks{state}
//   cubeplane_cluster_up{cluster,state}   1 for the cluster's state, 0 for the others
//
// `code` is the status class ("2xx", "4xx"); `route` is the pattern
// ("/api/v1/tasks/{id}"), never the raw path, to keep cardinality bounded.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>

namespace prometheus {
class Registry;
class Counter;
class Gauge;
class Histogram;
template <typename T>
class Family;
}  // namespace prometheus

namespace cp {
struct MetricsSnapshot;
}

namespace cp::http {

class Metrics {
 public:
  Metrics();
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  // route: the matched pattern, "" when nothing matched (recorded as "unmatched").
  void observe_request(const std::string& route, const std::string& method, int status, double seconds);
  // Sets the domain gauges to the snapshot; series that left it are removed.
  void update_domain(const MetricsSnapshot& snapshot);
  // This server's term, beacon seq and whether it judges liveness
  // (server/beacon.h), labelled with its id.
  void update_control_plane(const std::string& server_id, std::int64_t term, std::int64_t seq, bool judging);
  // Prometheus text exposition format.
  std::string serialize() const;

  static constexpr const char* kContentType = "text/plain; version=0.0.4; charset=utf-8";

 private:
  using Key = std::map<std::string, std::string>;
  void set_gauges(prometheus::Family<prometheus::Gauge>& family, std::map<Key, prometheus::Gauge*>& live,
                  const std::map<Key, double>& values);

  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Histogram>* latency_;
  prometheus::Family<prometheus::Counter>* requests_;
  prometheus::Family<prometheus::Gauge>* queue_length_;
  prometheus::Family<prometheus::Gauge>* quota_used_;
  prometheus::Family<prometheus::Gauge>* quota_limit_;
  prometheus::Family<prometheus::Gauge>* tasks_;
  prometheus::Family<prometheus::Gauge>* cluster_up_;
  prometheus::Family<prometheus::Gauge>* alerts_;
  prometheus::Family<prometheus::Gauge>* alert_deliveries_;
  prometheus::Family<prometheus::Gauge>* cycle_seconds_;
  prometheus::Family<prometheus::Gauge>* cycle_tasks_;
  prometheus::Family<prometheus::Gauge>* control_plane_;

  std::mutex domain_mu_;  // one update_domain at a time; guards the live maps
  std::map<Key, prometheus::Gauge*> live_queue_, live_used_, live_limit_, live_tasks_, live_cluster_, live_alerts_,
      live_deliveries_, live_cycle_seconds_, live_cycle_tasks_;
};

}  // namespace cp::http
