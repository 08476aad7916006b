// The scheduling cycle and the liveness sweep.
//
//   read tx:  live work brought up to date (live_work.h), clusters, nodes,
//             groups, classes, and the queue
//   decide(): pure, in src/sched, on the state kept between cycles
//             (warm_schedule.h: only what changed is handed to it)
//   write tx: re-check each placement against the store (holdings.h: task
//             still Queued, quota with borrowing, node room, GPU indices) and
//             create its attempt; mark each preemption's victim Stopping (if
//             it still runs); then the waiting tasks' reasons, 1,000
//             tasks a transaction (each checked as stored), so that a long
//             queue's explanation never holds the store's writer for long
//
// Cycles are serialized by schedule_mu_, and only cycles create attempts, so
// a re-check in the write transaction sees every placement made before it.
// Submissions only add Queued tasks; what they could race with (quota, node
// room) is checked here, inside the one write transaction that places.
//
// A preemption, end to end (G = the victim class's grace_s):
//
//   cycle n    victim attempt Stopping (stop_reason preempt), task Preempting;
//              its cluster's long-poll is woken; the preemptor stays Queued
//              with waiting_for_preemption
//   sync       stop {attempt, preempt, G}: SIGTERM, SIGKILL at +G
//   sync       Preempted: task Queued again (agents.cpp), same task id, its
//              `attempts` kept, so the next attempt is number n+1 and resumes
//              (CUBEPLANE_RESUME=1, the task's checkpoint directory)
//   cycle n+k  the preemptor is placed in the room freed
//
// The victim may also end on its own during G (Succeeded, Failed): the task
// then ends as it would have (Preempting -> Succeeded | Failed).
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <unordered_map>

#include <boost/container_hash/hash.hpp>
#include <spdlog/spdlog.h>

#include "sched/scheduler.h"
#include "server/control_plane.h"
#include "server/holdings.h"
#include "server/internal.h"
#include "server/live_work.h"
#include "server/unknown_attempts.h"
#include "server/warm_schedule.h"

namespace cp {

using internal::make_event;

namespace {

// Words the plan's reasons (those kept as figures) to compare them.
bool same_reasons(const std::vector<PendingReason>& a, const sched::Reasons& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].code != b[i].code || a[i].message != b[i].message) return false;
  }
  return true;
}

// The same why: the same codes in the same order, whatever the figures
// (told without wording the plan's reasons, sched::Reason::code).
bool same_codes(const std::vector<PendingReason>& a, const sched::Reasons& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].code != b.items()[i]->code()) return false;
  }
  return true;
}

// The stored words that same_reasons() compares, hashed: a kept
// explanation (ControlPlane::explained_) holds only while they are unchanged.
std::uint64_t stored_words(const std::vector<PendingReason>& reasons) {
  std::size_t h = reasons.size();
  for (const auto& r : reasons) {
    boost::hash_combine(h, std::hash<std::string_view>{}(r.code));
    boost::hash_combine(h, std::hash<std::string_view>{}(r.message));
  }
  return h;
}

struct Loaded {
  sched::Snapshot snapshot;
  std::vector<sched::QueuedTask> queue;
};

// The cycle's input: the queue from the live work (brought up to date in
// `tx` by the caller), and the fleet and its settings as read in `tx` (the
// nodes into `nodes`, which reads only clusters whose nodes were written
// since, by `node_marks`). The running work is not copied here: the kept
// scheduler (warm_schedule.h) takes what changed of it from the live work.
Status load(Tx& tx, const ServerConfig& config, const LiveWork& live, SchedulerNodes& nodes,
            const FleetNodes::Marks& node_marks, Millis now, Loaded& out) {
  // The queue first: with nothing queued (most wakes of an idle fleet, e.g.
  // by agent syncs) the rest of the state is not needed.
  const auto queued = live.queued();
  if (queued.empty()) return {};
  auto& s = out.snapshot;
  s.config.fair_share = config.fair_share;
  s.config.reservations_per_group = config.reservations_per_group;
  s.config.max_victims = config.max_victims;
  CP_ASSIGN(s.clusters, tx.list_clusters());
  CP_TRY(nodes.refresh(tx, node_marks, s.clusters, now));
  // The nodes as stored, for the check that the kept ones are not stale.
  if (config.verify_warm_scheduler) {
    CP_ASSIGN(s.nodes, tx.list_nodes(""));
  }
  CP_ASSIGN(s.resource_groups, tx.list_resource_groups());
  CP_ASSIGN(s.priority_classes, tx.list_priority_classes());
  std::map<std::string, TaskState> dep_state;
  for (const Task* t : queued) {
    for (const auto& d : t->depends_on) {
      if (dep_state.count(d)) continue;
      const Task* live_dep = live.task(d);
      if (live_dep != nullptr) {
        dep_state[d] = live_dep->state;
        continue;
      }
      CP_ASSIGN(auto dt, tx.get_task(d));
      dep_state[d] = dt ? dt->state : TaskState::Cancelled;
    }
  }
  out.queue.reserve(queued.size());
  for (const Task* t : queued) {
    if (t->cancel_requested) continue;
    sched::QueuedTask q;
    for (const auto& d : t->depends_on) {
      if (dep_state[d] != TaskState::Succeeded) q.unfinished_dependencies.push_back(d);
    }
    q.task = *t;
    out.queue.push_back(std::move(q));
  }
  return {};
}

// Creates the attempt of a placement that passed its re-check.
Status place(Tx& tx, Task& t, const sched::Placement& pl, Millis now, Attempt& a) {
  a.number = t.attempts + 1;  // a requeued task keeps `attempts`: this is the next one
  a.id = t.id + "." + std::to_string(a.number);
  a.task_id = t.id;
  a.epoch = a.number;
  a.cluster_id = pl.cluster_id;
  a.placements = pl.placements;
  // Per replica: attempt_total() multiplies by the replicas (placements), the
  // start order hands it to each replica as is.
  a.resources = pl.per_replica;
  a.state = AttemptState::Dispatched;
  a.created_at = now;
  a.lease_renewed_at = now;
  CP_TRY(tx.insert_attempt(a));
  // A checkpointing step is bound to this cluster's storage pool from its
  // first placement: its checkpoints are written there, and an attempt
  // placed in another pool would not find them (it would start over while
  // told to resume). A step without checkpoints stays free to go anywhere
  // until an attempt is Lost (check_liveness, finish_attempt).
  if (t.step.checkpoint) CP_TRY(internal::bind_storage_pool(tx, t, pl.cluster_id));
  t.attempts = a.number;
  t.current_attempt = a.id;
  t.assigned_cluster = pl.cluster_id;
  json::object data;
  data["attempt"] = a.id;
  json::array nodes;
  for (const auto& rp : pl.placements) nodes.push_back(json::string(rp.node));
  data["nodes"] = std::move(nodes);
  // Which shape ran (0: the step's own resources, i: step.fallbacks[i-1]) and
  // whether it sits on borrowed capacity (reclaimable by the lenders): kept
  // in the event, as Attempt has no field for them.
  data["shape"] = pl.shape;
  data["borrowing"] = pl.borrowing;
  return internal::transition(tx, t, TaskState::Dispatched, now, "scheduler",
                              "placed on " + pl.cluster_id + "/" + pl.placements.front().node, std::move(data));
}

// One preemptor's victims as applied: for its "task.preempting_for" event.
struct Applied {
  json::array victims;
  std::vector<std::string> task_ids;
};

// Marks a victim Stopping for its preemptor, if that still makes sense: the
// attempt is still the task's live current attempt and not told to stop yet.
// Returns the victim's cluster when applied.
Result<std::optional<std::string>> preempt(Tx& tx, const sched::Preemption& p, Millis now) {
  const std::optional<std::string> skipped;
  CP_ASSIGN(auto a, tx.get_attempt(p.attempt_id));
  // Unknown: its cluster is silent, nothing can stop it (unknown_attempts.h).
  if (!a || is_terminal(a->state) || a->state == AttemptState::Stopping || a->state == AttemptState::Unknown) {
    return skipped;
  }
  CP_ASSIGN(auto t, tx.get_task(a->task_id));
  if (!t || t->current_attempt != a->id || t->cancel_requested) return skipped;
  if (t->state != TaskState::Dispatched && t->state != TaskState::Running) return skipped;

  std::string from = boost::describe::enum_to_string(a->state, "?");
  a->state = AttemptState::Stopping;
  a->stop_reason = "preempt";
  a->message = p.message;
  CP_TRY(tx.update_attempt(*a));
  json::object adata;
  adata["stop_reason"] = "preempt";
  adata["preemptor"] = p.preemptor;
  CP_ASSIGN(auto eid, tx.append_event(make_event(now, "scheduler", "attempt", a->id, "attempt.state", from,
                                                "Stopping", p.message, std::move(adata))));
  (void)eid;
  json::object data;
  data["attempt"] = a->id;
  data["preemptor"] = p.preemptor;
  data["kind"] = p.kind;
  data["message_zh"] = p.message_zh;
  CP_TRY(internal::transition(tx, *t, TaskState::Preempting, now, "scheduler", p.message, std::move(data)));
  return std::optional<std::string>(a->cluster_id);
}

}  // namespace

Status ControlPlane::schedule_once() {
  std::lock_guard cycle(schedule_mu_);
  Millis now = clock_.now_ms();
  using Steady = std::chrono::steady_clock;
  const auto t0 = Steady::now();
  Loaded loaded;
  // Both before the read transaction opens (live_work.h, fleet_nodes.h).
  const std::uint64_t mark = LiveWork::mark(store_);
  const FleetNodes::Marks node_marks = fleet_nodes_.marks();
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_TRY(live_work_.refresh(tx, store_.changes(), mark, now));
    return load(tx, config_, live_work_, scheduler_nodes_, node_marks, now, loaded);
  }));
  if (loaded.queue.empty()) {
    explained_.clear();  // nothing waits
    std::lock_guard lock(last_cycle_mu_);
    last_cycle_ = CycleStats{};
    last_cycle_.running = live_work_.attempt_count();
    last_cycle_.load_ms = std::chrono::duration<double, std::milli>(Steady::now() - t0).count();
    return {};
  }
  const auto t1 = Steady::now();
  sched::Plan plan;
  if (!config_.warm_scheduler) {
    loaded.snapshot.nodes = scheduler_nodes_.all();
    (void)scheduler_nodes_.take_changed();
    const auto preemptible = preemptible_classes(loaded.snapshot.priority_classes);
    for (const Attempt* a : live_work_.attempts()) {
      loaded.snapshot.running.push_back(running_work_of(*a, live_work_, preemptible));
    }
    plan = sched::decide(loaded.snapshot, loaded.queue, now);
  } else if (config_.verify_warm_scheduler) {
    // A copy of what is read this cycle, for the check below (the sync takes
    // the snapshot).
    const sched::Snapshot meta = loaded.snapshot;  // with the nodes as stored (load)
    sched::Scheduler& warm = warm_schedule_.sync(std::move(loaded.snapshot), scheduler_nodes_, live_work_);
    if (std::string diff = warm_schedule_.differences(meta, live_work_); !diff.empty()) {
      warm_check_failures_.fetch_add(1);
      spdlog::error("kept scheduler state differs from the live work: {}; building it again", diff);
      warm_schedule_.reset();
      plan = warm_schedule_.sync(meta, scheduler_nodes_, live_work_).decide(loaded.queue, now);
    } else {
      plan = warm.decide(loaded.queue, now);
    }
  } else {
    plan = warm_schedule_.sync(std::move(loaded.snapshot), scheduler_nodes_, live_work_).decide(loaded.queue, now);
  }
  const auto t2 = Steady::now();
  // Waiting tasks whose stored reasons the apply wrote (counted again if
  // the store runs its body again).
  std::int64_t reasons_written = 0;
  // Kept and logged however the cycle ends.
  struct LogTimes {
    ControlPlane& control;
    Steady::time_point t0, t1, t2;
    std::int64_t rows_read;
    std::size_t running;
    const WarmSchedule::Stats& warm;
    const Loaded& loaded;
    const sched::Plan& plan;
    const std::int64_t& reasons_written;
    std::int64_t writes = 0;  // the apply's transactions
    double longest_write_ms = 0;
    ~LogTimes() {
      auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
      CycleStats s;
      s.queued = loaded.queue.size();
      s.running = running;
      s.placed = plan.placements.size();
      s.preempted = plan.preemptions.size();
      s.waiting = plan.pending.size();
      s.reasons_written = reasons_written;
      s.load_ms = ms(t1 - t0);
      s.decide_ms = ms(t2 - t1);
      s.apply_ms = ms(Steady::now() - t2);
      s.apply_writes = writes;
      s.longest_write_ms = longest_write_ms;
      spdlog::debug(
          "cycle: {} queued, {} running: load {:.1f} ms ({} rows read), decide {:.1f} ms ({} builds, {} work and {} node "
          "deltas so far), apply {:.1f} ms in {} transactions (longest {:.1f} ms); {} placed, {} waiting tasks' reasons "
          "written",
          s.queued, s.running, s.load_ms, rows_read, s.decide_ms, warm.builds, warm.work_deltas, warm.node_deltas,
          s.apply_ms, s.apply_writes, s.longest_write_ms, s.placed, s.reasons_written);
      std::lock_guard lock(control.last_cycle_mu_);
      control.last_cycle_ = s;
    }
  } log_times{*this, t0, t1, t2, live_work_.stats().rows_read, live_work_.attempt_count(), warm_schedule_.stats(),
              loaded, plan, reasons_written};
  if (plan.placements.empty() && plan.preemptions.empty() && plan.pending.empty()) return {};

  // No retry loop here: Store::write already runs the whole body again, a
  // bounded number of times, when the database is busy or reports a conflict
  // (store.h; SqliteStore: SQLITE_BUSY/LOCKED, 5 more runs, each after
  // waiting up to busy_timeout for the lock; the PostgreSQL store: 40001 and
  // 40P01). A loop here would multiply those. The body is written to be run
  // again: everything it decides starts afresh inside it.
  std::set<std::string> clusters_to_wake;
  // The rows each of the apply's transactions writes, applied to the live
  // work once committed (LiveWork::apply): the next cycle need not read
  // them back.
  ChangeJournal* journal = store_.changes();
  WrittenRows written;
  // One transaction of the apply, timed (the store's writer is held meanwhile).
  auto apply_write = [&](const std::function<Status(Tx&)>& body) -> Status {
    const auto began = Steady::now();
    written.writer = journal != nullptr ? journal->new_writer() : 0;
    CP_TRY(store_.write([&](Tx& tx) -> Status {
      written.clear();
      if (journal != nullptr) tx.keep_written(&written);
      CP_TRY(body(tx));
      // A deposed leader's plan changes nothing (beacon.h). After the body:
      // its first read takes the transaction's snapshot, which must come
      // after the journal mark the body takes (LiveWork::mark); where in a
      // SERIALIZABLE transaction the term is read does not matter.
      if (beacon_) CP_TRY(beacon_->check_leader(tx));
      return Status();
    }));
    ++log_times.writes;
    log_times.longest_write_ms =
        std::max(log_times.longest_write_ms, std::chrono::duration<double, std::milli>(Steady::now() - began).count());
    return kept_written(journal, written);
  };

  // 1. Placements and preemptions: one transaction, all or nothing.
  if (!plan.placements.empty() || !plan.preemptions.empty()) CP_TRY(apply_write([&](Tx& tx) -> Status {
    clusters_to_wake.clear();
    std::unique_ptr<internal::Holdings> held;
    if (!plan.placements.empty()) {
      // The live work as of this transaction: what committed since the
      // snapshot (work that ended, or anything written behind our back).
      CP_TRY(live_work_.refresh(tx, store_.changes(), LiveWork::mark(store_), now, /*periodic=*/false));
      if (config_.verify_warm_scheduler) {
        if (std::string diff = live_work_.check_sums(); !diff.empty()) {
          warm_check_failures_.fetch_add(1);
          spdlog::error("kept use of the live work differs from a count: {}", diff);
        }
      }
      CP_ASSIGN(held, internal::Holdings::load(tx, live_work_, plan.placements));
    }

    std::map<std::string, std::pair<std::int64_t, Millis>> dispatched;  // cluster -> (attempts, wait)
    // Each placement writes an attempt, its task and an event: sent together
    // (one statement of each on PostgreSQL), before the next read and COMMIT.
    tx.hold_writes();
    // The placed tasks as this transaction sees them. Where the journal is
    // current (Tx::journal_is_current), the live work refreshed above holds
    // them as stored, decoded: only those this transaction wrote itself are
    // read, and a task that is not live is no longer queued. Elsewhere all
    // are read, in one statement.
    const bool live_is_stored = !plan.placements.empty() && tx.journal_is_current();
    std::unordered_map<std::string, Task> placed;
    {
      std::vector<std::string> ids;
      ids.reserve(plan.placements.size());
      for (const auto& pl : plan.placements) {
        if (!live_is_stored || tx.wrote_task(pl.task_id)) {
          ids.push_back(pl.task_id);
        } else if (const Task* t = live_work_.task(pl.task_id)) {
          placed.emplace(pl.task_id, *t);
        }
      }
      apply_task_reads_.fetch_add(static_cast<std::int64_t>(ids.size()));
      CP_ASSIGN(auto tasks, tx.get_tasks(ids));
      for (auto& task : tasks) {
        std::string id = task.id;
        placed.insert_or_assign(std::move(id), std::move(task));
      }
    }
    for (const auto& pl : plan.placements) {
      auto found = placed.find(pl.task_id);
      if (found == placed.end()) continue;
      Task* t = &found->second;
      if (auto why_not = held->recheck(*t, pl)) {
        spdlog::info("placement of {} dropped at apply: {}", t->id, *why_not);
        continue;
      }
      const Millis queued_at = t->queued_at ? t->queued_at : t->created_at;
      Attempt a;
      CP_TRY(place(tx, *t, pl, now, a));
      held->charge(a, t->resource_group);
      clusters_to_wake.insert(pl.cluster_id);
      auto& d = dispatched[pl.cluster_id];
      d.first += 1;
      d.second += std::max<Millis>(0, now - queued_at);
    }
    // The clusters' history: how many were placed this cycle and how long
    // they had waited, one addition per cluster.
    for (const auto& [cluster, d] : dispatched) {
      CP_TRY(tx.add_cluster_samples(internal::history_rows(cluster, now, [&](ClusterSample& s) {
        s.dispatched = d.first;
        s.wait_ms = d.second;
      })));
    }

    // Preemptions after placements: a preemptor is never placed in the plan
    // that preempts for it, and one placed meanwhile needs no room any more.
    std::map<std::string, Applied> by_preemptor;
    std::map<std::string, bool> preemptor_waits;  // still Queued and wanted
    for (const auto& p : plan.preemptions) {
      auto w = preemptor_waits.find(p.preemptor);
      if (w == preemptor_waits.end()) {
        apply_task_reads_.fetch_add(1);
        CP_ASSIGN(auto pt, tx.get_task(p.preemptor));
        bool waits = pt && pt->state == TaskState::Queued && !pt->cancel_requested;
        w = preemptor_waits.emplace(p.preemptor, waits).first;
      }
      if (!w->second) {
        spdlog::info("preemption of {} for {} dropped at apply: the preemptor no longer waits", p.task_id,
                     p.preemptor);
        continue;
      }
      CP_ASSIGN(auto cluster, preempt(tx, p, now));
      if (!cluster) {
        spdlog::info("preemption of {} ({}) for {} skipped at apply: it is no longer running", p.task_id,
                     p.attempt_id, p.preemptor);
        continue;
      }
      clusters_to_wake.insert(*cluster);
      json::object v;
      v["task"] = p.task_id;
      v["attempt"] = p.attempt_id;
      v["cluster"] = *cluster;
      v["kind"] = p.kind;
      by_preemptor[p.preemptor].victims.push_back(std::move(v));
      by_preemptor[p.preemptor].task_ids.push_back(p.task_id);
    }
    for (auto& [preemptor, applied] : by_preemptor) {
      std::string list;
      for (const auto& id : applied.task_ids) list += (list.empty() ? "" : ", ") + id;
      json::object data;
      data["victims"] = std::move(applied.victims);
      CP_ASSIGN(auto eid, tx.append_event(make_event(now, "scheduler", "task", preemptor, "task.preempting_for", "",
                                                    "", "preempting " + list + " to make room",
                                                    std::move(data))));
      (void)eid;
    }

    return {};
  }));
  // Committed: a long-polling agent hears of its start and stop orders at
  // once, not after the reasons below.
  for (const auto& c : clusters_to_wake) cluster_signal(c).notify();

  // 2. The waiting tasks' reasons, in transactions of kChunk tasks after
  // that: an explanation is news, not a claim on anything, and one
  // transaction writing the first explanation of a queue of 100,000 held
  // the store's writer (every submit behind it) for 5 s on SQLite and 10 s
  // on PostgreSQL. Each transaction checks its tasks as stored, so a task
  // placed, cancelled or explained by another writer in between is left
  // alone.
  //
  // Every waiting task is explained at every cycle, and its reasons seldom
  // change. Unchanged, as the live work's copy has them (as of this
  // cycle's snapshot and the writes above at least), it needs no read and
  // no write:
  // - where the last apply's explanation of it is kept, its stored words
  //   hash the same as then, and the plan's reasons have the same figures
  //   (sched::Reasons::same_as): told without wording the reasons, most
  //   of which a big queue never has read;
  // - else by the words themselves.
  // Where only the figures moved (the same codes, in order), the stored
  // words stand until they are reasons_refresh_s old: under a busy fleet
  // most waiting tasks' counts move at every cycle (used quota, who holds
  // the room), and writing each of them every cycle would be most of the
  // store's work. Then at most reasons_refresh_per_cycle of them are
  // written, in the plan's order (the first tried first); the others
  // stand until a later cycle. A different why is written at once.
  // A write since that snapshot that left the task queued with other
  // reasons is caught at the next cycle, when the copy has caught up.
  //
  // An entry of explained_ says "a task whose stored words hash so was
  // explained with these reasons": true whether or not a transaction
  // commits, so it is kept as the loop goes (a write rolled back leaves
  // other words stored, which the next apply sees by their hash).
  const std::uint64_t this_cycle = ++explained_cycle_;
  const Millis refresh_ms = config_.reasons_refresh_s * 1000;
  // New figures past reasons_refresh_s that may still be written (-1: any number).
  std::int64_t refreshes_left = config_.reasons_refresh_per_cycle > 0 ? config_.reasons_refresh_per_cycle : -1;
  auto explain = [&](Explained& kept, const sched::Pending& pending, std::uint64_t stored) {
    kept.reasons = pending.reasons;
    kept.stored = stored;
    kept.cycle = this_cycle;
    kept.current_since = now;
  };
  struct ToWrite {
    const sched::Pending* pending;
    Explained* kept;
  };
  std::vector<ToWrite> to_write;
  for (const auto& pending : plan.pending) {
    Explained& kept = explained_[pending.task_id];
    const Task* live = live_work_.task(pending.task_id);
    if (live != nullptr && live->state == TaskState::Queued) {
      const std::uint64_t stored = stored_words(live->reasons);
      bool refresh = false;  // new figures past reasons_refresh_s, the same codes
      if (kept.stored == stored) {
        if (kept.reasons.same_as(pending.reasons)) {
          explain(kept, pending, stored);
          continue;
        }
        if (now - kept.current_since < refresh_ms || refreshes_left == 0) {
          if (same_codes(live->reasons, pending.reasons)) {
            kept.cycle = this_cycle;  // the stored words stand, and kept.reasons with them
            continue;
          }
        } else if (refreshes_left > 0) {
          refresh = same_codes(live->reasons, pending.reasons);
        }
      }
      apply_reasons_worded_.fetch_add(1);
      if (same_reasons(live->reasons, pending.reasons)) {
        explain(kept, pending, stored);
        continue;
      }
      if (refresh) --refreshes_left;  // the same words cost nothing, other words count
    }
    to_write.push_back({&pending, &kept});
  }
  // Each transaction brings the live work up to date first: where the
  // journal is then current (Tx::journal_is_current), the live copies are
  // the tasks as stored, and a task that is not live is no longer queued;
  // elsewhere its tasks are read, in one statement.
  constexpr std::size_t kChunk = 1000;
  std::vector<std::string> ids;
  for (std::size_t from = 0; from < to_write.size(); from += kChunk) {
    const std::span<const ToWrite> chunk(to_write.data() + from, std::min(kChunk, to_write.size() - from));
    std::int64_t chunk_written = 0;
    CP_TRY(apply_write([&](Tx& tx) -> Status {
      chunk_written = 0;
      bool live_is_stored = false;
      if (journal != nullptr) {
        CP_TRY(live_work_.refresh(tx, journal, LiveWork::mark(store_), now, /*periodic=*/false));
        live_is_stored = tx.journal_is_current();
      }
      std::vector<Task> read;
      std::unordered_map<std::string_view, const Task*> by_id;
      if (!live_is_stored) {
        ids.clear();
        for (const ToWrite& w : chunk) ids.push_back(w.pending->task_id);
        apply_task_reads_.fetch_add(static_cast<std::int64_t>(ids.size()));
        CP_ASSIGN(read, tx.get_tasks(ids));
        for (const Task& t : read) by_id.emplace(t.id, &t);
      }
      tx.hold_writes();
      for (const auto& [pending, kept] : chunk) {
        const Task* stored = nullptr;
        if (live_is_stored) {
          stored = live_work_.task(pending->task_id);
        } else if (auto it = by_id.find(pending->task_id); it != by_id.end()) {
          stored = it->second;
        }
        if (stored == nullptr || stored->state != TaskState::Queued) continue;  // gone, or no longer waiting
        if (same_reasons(stored->reasons, pending->reasons)) {
          explain(*kept, *pending, stored_words(stored->reasons));
          continue;
        }
        Task t = *stored;
        t.reasons = pending->reasons.copied();
        t.updated_at = now;
        CP_TRY(tx.update_task(t));
        ++chunk_written;
        explain(*kept, *pending, stored_words(t.reasons));
      }
      return {};
    }));
    reasons_written += chunk_written;
  }
  // Tasks no longer waiting (or not explained this time) are forgotten.
  std::erase_if(explained_, [&](const auto& entry) { return entry.second.cycle != explained_cycle_; });
  return {};
}

Status ControlPlane::kept_written(ChangeJournal* journal, WrittenRows& written) {
  if (journal == nullptr || !written.complete) return {};
  if (!config_.verify_warm_scheduler) {
    live_work_.apply(std::move(written));  // moved in, not copied: it is not read again
    journal->forget(written.writer);
    return {};
  }
  live_work_.apply(written);
  journal->forget(written.writer);
  std::string diff;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(diff, live_work_.check_rows(tx, written));
    return {};
  }));
  if (!diff.empty()) {
    warm_check_failures_.fetch_add(1);
    spdlog::error("rows the apply wrote differ from their kept copies: {}", diff);
  }
  return {};
}

Status ControlPlane::check_liveness() {
  Millis now = clock_.now_ms();
  // D, and J: silence before it is nobody's (control_plane.h, judging_since_;
  // with a beacon, the start of its chain, and nothing is judged while the
  // chain is broken).
  const Millis lost_after_ms = beacon_ ? beacon_->timing().lost_after : config_.lost_after_s * 1000;
  Millis since = 0;
  if (beacon_) {
    since = beacon_->judging_since();
    if (since == 0) return {};
  }
  {
    std::lock_guard lock(contacts_mu_);
    if (!beacon_) {
      if (judging_since_ == 0) judging_since_ = now;  // the store is back
      since = judging_since_;
    }
    if (now < next_full_liveness_ &&
        std::none_of(contacts_.begin(), contacts_.end(),
                     [&](const auto& kv) { return now - std::max(kv.second, since) > lost_after_ms; })) {
      return {};
    }
  }
  bool requeued = false;
  std::map<std::string, Millis, std::less<>> contacts;
  auto judged = store_.write([&](Tx& tx) -> Status {
    contacts.clear();
    // Only the holder of the store's term, while its chain holds, declares
    // anyone silent: checked again after the changes, before the commit.
    if (beacon_) CP_TRY(beacon_->check_term(tx));
    CP_ASSIGN(auto clusters, tx.list_clusters());
    for (auto& c : clusters) {
      if (c.state != ClusterState::offline && c.last_contact != 0) contacts[c.id] = c.last_contact;
      bool silent = c.last_contact != 0 && now - std::max(c.last_contact, since) > lost_after_ms;
      // A cluster put offline because its agent's credential expired (its
      // syncs refused) is as silent as an unreachable one: its attempts are
      // judged the same way, its reason kept.
      const bool refused = c.state == ClusterState::offline && c.state_reason == "credential_expired";
      if (!silent || (c.state == ClusterState::offline && !refused)) continue;
      contacts.erase(c.id);
      if (!refused) {
        std::string from = boost::describe::enum_to_string(c.state, "?");
        c.state = ClusterState::offline;
        c.state_reason = "unreachable";
        c.state_message = "no sync from the agent since " + format_time(c.last_contact);
        c.updated_at = now;
        CP_TRY(tx.update_cluster(c));
        CP_ASSIGN(auto eid, tx.append_event(make_event(now, "system", "cluster", c.id, "cluster.state", from,
                                                      "offline", c.state_message)));
        (void)eid;
      }
      // A local cluster's attempts are Lost: its agent fenced itself at
      // lease_ttl - margin, and its shims stop their tasks at the deadline a
      // living agent extends, both before this point (lost_after >=
      // lease_ttl), so the new attempts that the requeued tasks get cannot
      // overlap the old ones. Slurm's and Kubernetes' jobs run on under
      // slurmd and the kubelet, which a dead agent cannot reach: their
      // attempts are Unknown, and nothing reruns (unknown_attempts.h).
      CP_ASSIGN(auto active, tx.active_attempts(c.id));
      for (auto& a : active) {
        if (a.state == AttemptState::Unknown) continue;  // since an earlier silence
        if (!internal::fenced_by_agent(c.executor)) {
          CP_TRY(internal::mark_unknown(tx, a, c, now));
          continue;
        }
        CP_ASSIGN(bool back, internal::end_lost(tx, a, c, now, "system", "cluster " + c.id + " unreachable"));
        requeued = requeued || back;
      }
    }
    if (beacon_) CP_TRY(beacon_->check_term(tx));
    return {};
  });
  if (!judged.ok()) {
    // Unable to record, so unable to hear: silence from now on counts only
    // once the store is back.
    if (beacon_) {
      beacon_->break_chain("a liveness pass failed: " + judged.error().message);
    } else {
      std::lock_guard lock(contacts_mu_);
      judging_since_ = 0;
    }
    return judged;
  }
  {
    std::lock_guard lock(contacts_mu_);
    // Syncs that committed meanwhile are newer than what the pass read.
    for (const auto& [id, at] : contacts_) {
      auto it = contacts.find(id);
      if (it != contacts.end()) {
        it->second = std::max(it->second, at);
      } else if (at >= now) {
        contacts.emplace(id, at);  // it came back while the pass ran
      }
    }
    contacts_ = std::move(contacts);
    next_full_liveness_ = now + kFullLivenessMs;
  }
  if (requeued) wake_scheduler();
  return {};
}

}  // namespace cp
