// The fleet's history and the overview built from it.
//
// sample_fleet adds one sample of every cluster's gauges (GPUs, allocated
// GPUs, device utilization) to the minute, hour and day rows that now falls
// in; the counters (attempts placed and their wait, attempts ended and
// failed) are added by the transactions that place and end attempts
// (internal::history_rows). overview reads the rows of one width back.
#include <algorithm>

#include "server/control_plane.h"
#include "server/internal.h"

namespace cp {

Status ControlPlane::sample_fleet() {
  const Millis now = clock_.now_ms();
  // Read, then add: the reads need no write lock.
  std::map<std::string, ClusterSample> gauges;
  const auto written = fleet_nodes_.marks();  // before the read opens (fleet_nodes.h)
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    gauges.clear();
    CP_ASSIGN(auto clusters, tx.list_clusters());
    CP_ASSIGN(auto attempts, tx.active_attempts(""));
    for (const auto& c : clusters) gauges[c.id].samples = 1;
    CP_TRY(fleet_nodes_.visit(tx, written, clusters, [&](const NodeSummary& n) {
      auto& g = gauges[n.cluster_id];
      g.gpus_total += n.gpus_total;
      for (int u : live_inventory_.live_utilization(n.cluster_id, n.name, n.gpu_utilization)) {
        if (u < 0) continue;  // not measured: no figure rather than 0 %
        g.gpu_util_sum += std::min(u, 100);
        g.gpu_util_devices += 1;
      }
    }));
    for (const auto& a : attempts) {
      auto it = gauges.find(a.cluster_id);
      if (it != gauges.end()) it->second.gpus_allocated += internal::attempt_total(a).gpus();
    }
    return {};
  }));
  return store_.write([&](Tx& tx) -> Status {
    for (const auto& [cluster, g] : gauges) {
      CP_TRY(tx.add_cluster_samples(internal::history_rows(cluster, now, [&](ClusterSample& s) {
        s.samples = g.samples;
        s.gpus_total = g.gpus_total;
        s.gpus_allocated = g.gpus_allocated;
        s.gpu_util_sum = g.gpu_util_sum;
        s.gpu_util_devices = g.gpu_util_devices;
      })));
    }
    return {};
  });
}

namespace {

json::value ratio(std::int64_t num, std::int64_t den, double scale) {
  if (den <= 0) return nullptr;
  return scale * static_cast<double>(num) / static_cast<double>(den);
}

}  // namespace

Result<json::object> ControlPlane::overview(const Principal& p, std::int64_t hours) {
  if (p.kind != Principal::Kind::user) return internal::forbidden_for(p, "read the overview", "查看总览");
  if (hours < 1 || hours > 24 * 366) {
    return errors::invalid("hours", "must be between 1 and 8784 (a year)", "必须在 1 到 8784（一年）之间");
  }
  const Millis now = clock_.now_ms();
  // Columns: minutes for a few hours, hours up to two weeks, days beyond.
  const std::int64_t width_s = hours <= 3 ? 60 : hours <= 14 * 24 ? 3600 : 86400;
  const Millis width_ms = width_s * 1000;
  const std::int64_t columns = hours * 3600 / width_s;
  const Millis last = now - now % width_ms;
  const Millis first = last - (columns - 1) * width_ms;

  std::vector<Cluster> clusters;
  std::vector<Node> nodes;
  std::vector<Attempt> attempts;
  std::vector<ClusterSample> samples;
  std::vector<std::tuple<std::string, TaskState, std::int64_t>> counts;
  std::vector<Alert> open;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(clusters, tx.list_clusters());
    CP_ASSIGN(nodes, tx.list_nodes(""));
    CP_ASSIGN(attempts, tx.active_attempts(""));
    CP_ASSIGN(samples, tx.cluster_samples(width_s, first, last + width_ms));
    CP_ASSIGN(counts, tx.count_tasks());
    CP_ASSIGN(open, tx.open_alerts());
    return {};
  }));

  json::array buckets;
  for (std::int64_t i = 0; i < columns; ++i) buckets.push_back(json::string(format_time(first + i * width_ms)));

  std::map<std::string, std::int64_t> gpus_total, gpus_allocated;
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> by_type;  // type -> (total, allocated)
  std::int64_t nodes_ready = 0;
  for (const auto& n : nodes) {
    gpus_total[n.cluster_id] += n.capacity.gpus();
    if (n.capacity.gpus() > 0) by_type[n.capacity.gpu_type()].first += n.capacity.gpus();
    if (n.ready && !n.in_maintenance()) ++nodes_ready;
  }
  for (const auto& a : attempts) {
    const Resources r = internal::attempt_total(a);
    gpus_allocated[a.cluster_id] += r.gpus();
    if (r.gpus() > 0) by_type[r.gpu_type()].second += r.gpus();
  }

  std::map<std::string, std::vector<const ClusterSample*>> rows_of;
  for (const auto& s : samples) rows_of[s.cluster].push_back(&s);
  json::array cluster_rows;
  for (const auto& c : clusters) {
    json::object row;
    row["id"] = c.id;
    row["name"] = c.display_name.empty() ? c.id : c.display_name;
    row["state"] = boost::describe::enum_to_string(c.state, "?");
    row["reason"] = c.state_reason;
    row["gpus"] = json::object{{"total", gpus_total[c.id]}, {"allocated", gpus_allocated[c.id]}};
    std::vector<const ClusterSample*> by_column(columns, nullptr);
    for (const auto* s : rows_of[c.id]) {
      const auto i = (s->bucket - first) / width_ms;
      if (i >= 0 && i < columns) by_column[i] = s;
    }
    json::array cells;
    for (const auto* s : by_column) {
      json::object cell;
      ClusterSample z;
      const ClusterSample& v = s ? *s : z;
      cell["gpu_utilization"] = ratio(v.gpu_util_sum, v.gpu_util_devices, 1.0);
      cell["allocation"] = ratio(v.gpus_allocated, v.gpus_total, 100.0);
      cell["queue_wait_s"] = ratio(v.wait_ms, v.dispatched, 0.001);
      cell["failure_rate"] = ratio(v.failed, v.finished, 1.0);
      cells.push_back(std::move(cell));
    }
    row["cells"] = std::move(cells);
    cluster_rows.push_back(std::move(row));
  }

  json::object totals;
  json::array types;
  for (const auto& [type, ta] : by_type) {
    types.push_back(json::object{{"gpu_type", type},
                                 {"total", ta.first},
                                 {"allocated", ta.second},
                                 {"idle", std::max<std::int64_t>(0, ta.first - ta.second)}});
  }
  totals["gpus_by_type"] = std::move(types);
  totals["nodes"] = static_cast<std::int64_t>(nodes.size());
  totals["nodes_ready"] = nodes_ready;
  std::int64_t queued = 0, running = 0;
  for (const auto& [rg, state, n] : counts) {
    if (state == TaskState::Queued) queued += n;
    if (state == TaskState::Running || state == TaskState::Dispatched) running += n;
  }
  totals["tasks_queued"] = queued;
  totals["tasks_running"] = running;

  json::array firing;
  for (const auto& a : open) {
    if (a.state != AlertState::firing) continue;
    auto pg = a.labels.find("project_group");
    if (pg != a.labels.end() && !p.can_read_project(pg->second)) continue;
    firing.push_back(to_json(a));
  }

  json::object out;
  out["now"] = format_time(now);
  out["bucket_s"] = width_s;
  out["buckets"] = std::move(buckets);
  out["clusters"] = std::move(cluster_rows);
  out["totals"] = std::move(totals);
  out["alerts"] = std::move(firing);
  return out;
}

}  // namespace cp
