#include "http/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <boost/describe/enumerators.hpp>
#include <boost/mp11/algorithm.hpp>

#include <sstream>

#include "model/types.h"
#include "server/control_plane.h"

namespace cp::http {
namespace {

std::string status_class(int status) {
  if (status < 100 || status > 599) return "other";
  return std::to_string(status / 100) + "xx";
}

const prometheus::Histogram::BucketBoundaries& latency_buckets() {
  static const prometheus::Histogram::BucketBoundaries b{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                                         0.25,  0.5,    1.0,   2.5,  5.0,   10.0, 30.0};
  return b;
}

template <class E>
std::vector<std::string> enum_names() {
  std::vector<std::string> out;
  boost::mp11::mp_for_each<boost::describe::describe_enumerators<E>>([&](auto d) { out.emplace_back(d.name); });
  return out;
}

}  // namespace

Metrics::Metrics() : registry_(std::make_shared<prometheus::Registry>()) {
  latency_ = &prometheus::BuildHistogram()
                  .Name("cubeplane_http_request_duration_seconds")
                  .Help("HTTP request latency by route pattern, method and status class")
                  .Register(*registry_);
  requests_ = &prometheus::BuildCounter()
                   .Name("cubeplane_http_requests_total")
                   .Help("HTTP requests by route pattern, method and status class")
                   .Register(*registry_);
  queue_length_ = &prometheus::BuildGauge()
                       .Name("cubeplane_queue_length")
                       .Help("Tasks waiting in the queue, by resource group")
                       .Register(*registry_);
  quota_used_ = &prometheus::BuildGauge()
                     .Name("cubeplane_quota_used")
                     .Help("Quota in use by admitted work (cpu in millicores, memory in bytes, GPUs in units)")
                     .Register(*registry_);
  quota_limit_ = &prometheus::BuildGauge()
                      .Name("cubeplane_quota_limit")
                      .Help("Guaranteed quota (same units as cubeplane_quota_used)")
                      .Register(*registry_);
  tasks_ = &prometheus::BuildGauge().Name("cubeplane_tasks").Help("Tasks by state").Register(*registry_);
  cluster_up_ = &prometheus::BuildGauge()
                     .Name("cubeplane_cluster_up")
                     .Help("1 for the state each cluster is in, 0 for the others")
                     .Register(*registry_);
  alerts_ = &prometheus::BuildGauge()
                 .Name("cubeplane_alerts")
                 .Help("Alerts pending or firing, by rule, severity and state")
                 .Register(*registry_);
  alert_deliveries_ = &prometheus::BuildGauge()
                           .Name("cubeplane_alert_deliveries")
                           .Help("Notifications of open alerts still to deliver (pending) or given up (failed)")
                           .Register(*registry_);
  cycle_seconds_ = &prometheus::BuildGauge()
                        .Name("cubeplane_schedule_cycle_seconds")
                        .Help("The last scheduling cycle's parts: load (snapshot), decide, apply (its placements in one "
                              "transaction, then the waiting tasks' reasons 1,000 a transaction); "
                              "apply_longest_transaction: the longest of those, the store's writer held")
                        .Register(*registry_);
  cycle_tasks_ = &prometheus::BuildGauge()
                      .Name("cubeplane_schedule_cycle_tasks")
                      .Help("The last scheduling cycle's tasks: queued, placed, preempted, waiting, and "
                            "reasons_written (waiting tasks whose stored reasons it wrote)")
                      .Register(*registry_);
  control_plane_ = &prometheus::BuildGauge()
                        .Name("cubeplane_control_plane")
                        .Help("This server's term, its beacon's seq, and judging (1 while its beacon chain holds "
                              "and it judges the clusters' liveness, 0 while it does not)")
                        .Register(*registry_);
}

void Metrics::update_control_plane(const std::string& server_id, std::int64_t term, std::int64_t seq, bool judging) {
  std::lock_guard lock(domain_mu_);
  control_plane_->Add({{"server", server_id}, {"figure", "term"}}).Set(static_cast<double>(term));
  control_plane_->Add({{"server", server_id}, {"figure", "beacon_seq"}}).Set(static_cast<double>(seq));
  control_plane_->Add({{"server", server_id}, {"figure", "judging"}}).Set(judging ? 1 : 0);
}

Metrics::~Metrics() = default;

void Metrics::observe_request(const std::string& route, const std::string& method, int status, double seconds) {
  prometheus::Labels labels{{"route", route.empty() ? "unmatched" : route},
                            {"method", method},
                            {"code", status_class(status)}};
  latency_->Add(labels, latency_buckets()).Observe(seconds);
  requests_->Add(labels).Increment();
}

void Metrics::set_gauges(prometheus::Family<prometheus::Gauge>& family, std::map<Key, prometheus::Gauge*>& live,
                         const std::map<Key, double>& values) {
  for (auto it = live.begin(); it != live.end();) {
    if (values.count(it->first) == 0) {
      family.Remove(it->second);
      it = live.erase(it);
    } else {
      ++it;
    }
  }
  for (const auto& [labels, v] : values) {
    auto& g = live[labels];
    if (g == nullptr) g = &family.Add(prometheus::Labels(labels.begin(), labels.end()));
    g->Set(v);
  }
}

void Metrics::update_domain(const MetricsSnapshot& s) {
  std::map<Key, double> queue, used, limit, tasks, clusters, alerts, deliveries, cycle_seconds, cycle_tasks;
  const CycleStats& c = s.last_cycle;
  cycle_seconds[{{"part", "load"}}] = c.load_ms / 1000;
  cycle_seconds[{{"part", "decide"}}] = c.decide_ms / 1000;
  cycle_seconds[{{"part", "apply"}}] = c.apply_ms / 1000;
  cycle_seconds[{{"part", "apply_longest_transaction"}}] = c.longest_write_ms / 1000;
  cycle_tasks[{{"kind", "queued"}}] = static_cast<double>(c.queued);
  cycle_tasks[{{"kind", "placed"}}] = static_cast<double>(c.placed);
  cycle_tasks[{{"kind", "preempted"}}] = static_cast<double>(c.preempted);
  cycle_tasks[{{"kind", "waiting"}}] = static_cast<double>(c.waiting);
  cycle_tasks[{{"kind", "reasons_written"}}] = static_cast<double>(c.reasons_written);
  for (const auto& [k, n] : s.alerts) {
    alerts[{{"rule", std::get<0>(k)}, {"severity", std::get<1>(k)}, {"state", std::get<2>(k)}}] =
        static_cast<double>(n);
  }
  deliveries[{{"state", "pending"}}] = static_cast<double>(s.alert_deliveries_pending);
  deliveries[{{"state", "failed"}}] = static_cast<double>(s.alert_deliveries_failed);
  for (const auto& [rg, n] : s.queued_by_group) queue[{{"resource_group", rg}}] = static_cast<double>(n);
  for (const auto& [k, v] : s.quota) {
    Key key{{"resource_group", k.first}, {"resource", k.second}};
    used[key] = static_cast<double>(v.first);
    limit[key] = static_cast<double>(v.second);
  }
  // Every state is present (0 when none), so that rate() and absent() behave.
  for (const auto& st : enum_names<TaskState>()) tasks[{{"state", st}}] = 0;
  for (const auto& [st, n] : s.tasks_by_state) tasks[{{"state", st}}] = static_cast<double>(n);
  const auto cluster_states = enum_names<ClusterState>();
  for (const auto& [cluster, state] : s.cluster_states) {
    for (const auto& st : cluster_states) clusters[{{"cluster", cluster}, {"state", st}}] = st == state ? 1 : 0;
  }
  std::lock_guard lock(domain_mu_);
  set_gauges(*queue_length_, live_queue_, queue);
  set_gauges(*quota_used_, live_used_, used);
  set_gauges(*quota_limit_, live_limit_, limit);
  set_gauges(*tasks_, live_tasks_, tasks);
  set_gauges(*cluster_up_, live_cluster_, clusters);
  set_gauges(*alerts_, live_alerts_, alerts);
  set_gauges(*alert_deliveries_, live_deliveries_, deliveries);
  set_gauges(*cycle_seconds_, live_cycle_seconds_, cycle_seconds);
  set_gauges(*cycle_tasks_, live_cycle_tasks_, cycle_tasks);
}

std::string Metrics::serialize() const {
  std::ostringstream out;
  prometheus::TextSerializer().Serialize(out, registry_->Collect());
  return out.str();
}

}  // namespace cp::http
