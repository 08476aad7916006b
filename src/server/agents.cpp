// The agent side of the control plane: register, sync, logs.
//
// Orders are derived from stored state, never queued in memory, so a sync is
// idempotent and a restarted server (or agent) loses nothing:
//   start  = attempts of the cluster that are Dispatched and not yet reported
//   stop   = attempts marked Stopping (cancel, preempt), and any attempt the
//            agent reports that the server does not hold live at that epoch
//            (an Unknown attempt is held live: its report is taken)
//   ack    = terminal reports the server has stored
#include <algorithm>
#include <set>

#include <spdlog/spdlog.h>

#include "common/ids.h"
#include "server/control_plane.h"
#include "server/internal.h"
#include "server/preflight.h"
#include "server/unknown_attempts.h"

namespace cp {

using internal::make_event;

namespace {

// The agent holds an attempt the server no longer holds live at that epoch.
StopOrder superseded(const std::string& attempt_id) { return StopOrder{attempt_id, "superseded", 0}; }

std::string state_name(ClusterState s) { return boost::describe::enum_to_string(s, "?"); }

}  // namespace

Result<RegisterResponse> ControlPlane::agent_register(const RegisterRequest& req, std::string_view bearer) {
  Millis now = clock_.now_ms();
  std::string cluster_id;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    if (!req.bootstrap_token.empty()) {
      CP_ASSIGN(auto owner, tx.consume_bootstrap_token(sha256_hex(req.bootstrap_token), now));
      if (!owner) {
        return errors::unauthenticated("bootstrap token is invalid, expired or already used",
                                       "引导令牌无效、已过期或已被使用");
      }
      cluster_id = *owner;
    } else {
      CP_ASSIGN(auto cred, tx.find_agent_credential(sha256_hex(bearer)));
      if (!cred || cred->expires_at <= now) {
        return errors::unauthenticated("renewal needs a valid, unexpired agent credential",
                                       "续期需要有效且未过期的 agent 凭据");
      }
      cluster_id = cred->cluster_id;
    }
    if (!req.cluster_id.empty() && req.cluster_id != cluster_id) {
      Error e = errors::forbidden("this token belongs to cluster " + cluster_id + ", not " + req.cluster_id,
                                  "该令牌属于集群 " + cluster_id + "，而不是 " + req.cluster_id);
      e.code = "wrong_cluster";
      return e;
    }
    return {};
  }));
  // The credential is written in its own transaction so that a refused
  // register above never burns the bootstrap token (that one rolled back).
  std::string secret = new_secret("cpa_");
  Millis expires = now + config_.credential_ttl_s * 1000;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_TRY(tx.insert_agent_credential(AgentCredential{sha256_hex(secret), cluster_id, now, expires}));
    // Old credentials stay valid until they expire: an agent mid-renewal may still use one.
    CP_TRY(tx.delete_agent_credentials_before(cluster_id, now));
    CP_ASSIGN(auto c, tx.get_cluster(cluster_id));
    if (!c) return errors::not_found("cluster", cluster_id);
    c->credential_expires_at = expires;
    if (c->agent_instance != req.agent_instance) c->agent_seq = 0;  // a new agent process counts afresh
    c->agent_instance = req.agent_instance;
    c->agent_version = req.agent_version;
    c->updated_at = now;
    CP_TRY(tx.update_cluster(*c));
    CP_ASSIGN(auto eid, tx.append_event(make_event(now, "agent:" + cluster_id, "cluster", cluster_id,
                                                  req.bootstrap_token.empty() ? "cluster.credential_renewed"
                                                                              : "cluster.registered",
                                                  "", "", "credential expires at " + format_time(expires))));
    (void)eid;
    return {};
  }));
  RegisterResponse resp;
  resp.credential = secret;
  resp.expires_at = expires;
  resp.server_time = now;
  resp.lease_ttl_s = config_.lease_ttl_s;
  resp.sync_interval_ms = config_.sync_interval_ms;
  return resp;
}

// Orders from stored state (see the file comment). A task is read only for
// the attempts that get an order: most syncs (and every long-poll wake) have
// none, and this runs on each of them.
static Status compute_orders(Tx& tx, const std::string& cluster_id, const std::set<std::string>& reported,
                             SyncResponse& resp) {
  CP_ASSIGN(auto active, tx.active_attempts(cluster_id));
  std::optional<std::map<std::string, std::int64_t>> grace_of_class;  // loaded on first need
  auto grace_of = [&](const Task& t) -> Result<std::int64_t> {
    if (!grace_of_class) {
      CP_ASSIGN(auto pcs, tx.list_priority_classes());
      grace_of_class.emplace();
      for (const auto& pc : pcs) (*grace_of_class)[pc.name] = pc.grace_s;
    }
    auto it = grace_of_class->find(t.priority_class);
    return it == grace_of_class->end() ? std::int64_t{30} : it->second;
  };
  for (const auto& a : active) {
    bool stop = a.state == AttemptState::Stopping;
    bool start = a.state == AttemptState::Dispatched && !reported.count(a.id);
    if (!stop && !start) continue;
    CP_ASSIGN(auto t, tx.get_task(a.task_id));
    if (!t) continue;
    CP_ASSIGN(auto grace, grace_of(*t));
    if (stop) {
      resp.stop.push_back(StopOrder{a.id, a.stop_reason, grace});
      continue;
    }
    StartOrder o;
    o.attempt_id = a.id;
    o.epoch = a.epoch;
    o.task_id = a.task_id;
    o.attempt_number = a.number;
    o.placements = a.placements;
    o.command = t->step.command;
    o.image = t->step.image;
    o.env = t->step.env;
    o.resources = a.resources;
    if (t->step.checkpoint) o.checkpoint_key = "checkpoints/" + t->id + "/";
    o.grace_s = grace;
    resp.start.push_back(std::move(o));
  }
  return {};
}

// Applies an agent's terminal report to the attempt and its task.
static Status finish_attempt(Tx& tx, Attempt& a, const AttemptReport& r, Millis now, const std::string& actor) {
  // A preempted attempt keeps the scheduler's message (who preempted it and
  // why) in front of the agent's ("preempted; grace expired, killed").
  const bool preempted = r.state == AttemptState::Preempted && a.stop_reason == "preempt" && !a.message.empty();
  a.state = r.state;
  a.exit_code = r.exit_code;
  a.finished_at = r.finished_at ? r.finished_at : now;
  if (a.started_at == 0) a.started_at = r.started_at;
  if (r.use.samples() > 0) a.use = r.use;
  if (!preempted) {
    a.message = r.message;
  } else if (!r.message.empty()) {
    a.message += " (" + r.message + ")";
  }
  CP_TRY(tx.update_attempt(a));
  CP_ASSIGN(auto t, tx.get_task(a.task_id));
  CP_TRY(internal::record_attempt_end(tx, t ? &*t : nullptr, a, now, actor, r.message));
  if (!t || t->current_attempt != a.id || is_terminal(t->state)) return {};
  t->exit_code = r.exit_code;
  std::string msg = r.message;
  switch (r.state) {
    case AttemptState::Succeeded:
      return internal::transition(tx, *t, TaskState::Succeeded, now, actor, msg);
    case AttemptState::Cancelled:
      t->reasons = {PendingReason{"cancelled", "cancelled", "已取消", {}}};
      CP_TRY(internal::transition(tx, *t, TaskState::Cancelled, now, actor, msg));
      return internal::cancel_dependents(tx, *t, now, actor);
    case AttemptState::Failed:
      if (t->cancel_requested) {
        CP_TRY(internal::transition(tx, *t, TaskState::Cancelled, now, actor, msg));
        return internal::cancel_dependents(tx, *t, now, actor);
      }
      if (t->retries < t->step.max_retries) {
        ++t->retries;
        t->reasons = {PendingReason{"retrying",
                                    "attempt " + std::to_string(a.number) + " failed (" + msg + "); retry " +
                                        std::to_string(t->retries) + " of " + std::to_string(t->step.max_retries),
                                    "第 " + std::to_string(a.number) + " 次尝试失败（" + msg + "）；重试 " +
                                        std::to_string(t->retries) + "/" + std::to_string(t->step.max_retries),
                                    {}}};
        return internal::transition(tx, *t, TaskState::Queued, now, actor, "retry after failure: " + msg);
      }
      t->reasons = {PendingReason{"failed", msg.empty() ? "the command failed" : msg,
                                  msg.empty() ? "命令执行失败" : msg, {}}};
      CP_TRY(internal::transition(tx, *t, TaskState::Failed, now, actor, msg));
      return internal::cancel_dependents(tx, *t, now, actor);
    case AttemptState::Preempted:
    case AttemptState::Lost:
      if (t->cancel_requested) {
        CP_TRY(internal::transition(tx, *t, TaskState::Cancelled, now, actor, msg));
        return internal::cancel_dependents(tx, *t, now, actor);
      }
      // An attempt its agent reports Lost (e.g. fenced, or its outcome
      // unknown after a restart): the task stays in that cluster's storage
      // pool, as when the server marks it Lost (check_liveness).
      if (r.state == AttemptState::Lost) CP_TRY(internal::bind_storage_pool(tx, *t, a.cluster_id));
      // Back to the queue as the same task: `attempts` is kept, so the next
      // attempt is number + 1 and resumes (CUBEPLANE_RESUME, its checkpoint).
      if (r.state == AttemptState::Preempted && a.stop_reason == "preempt") {
        t->reasons = {PendingReason{"requeued_after_preemption",
                                    "attempt " + std::to_string(a.number) + " was preempted (" + a.message +
                                        "); waiting for a new placement to resume",
                                    "第 " + std::to_string(a.number) + " 次尝试被抢占（" + a.message +
                                        "）；等待重新调度后继续",
                                    {}}};
        return internal::transition(tx, *t, TaskState::Queued, now, actor, a.message);
      }
      t->reasons = {PendingReason{"requeued", "attempt " + std::to_string(a.number) + " ended early (" + msg +
                                                  "); waiting for a new placement",
                                  "第 " + std::to_string(a.number) + " 次尝试提前结束（" + msg + "）；等待重新调度",
                                  {}}};
      return internal::transition(tx, *t, TaskState::Queued, now, actor, msg);
    default:
      return {};
  }
}

// An attempt told to stop (cancel, preempt) before its agent ever had it
// ends here, since no stop order can reach it: a start order goes out only
// for Dispatched attempts, so once it is Stopping it is never started. That
// the agent never had it is known from this sync: the agent reports every
// attempt it holds until the server acks its end, and builds each sync after
// applying the answer to the previous one (an answer it dropped, e.g. an
// aborted long-poll, started nothing). Stale syncs never get here.
//
//   sync k      agent holds {}           server: A Dispatched -> start A
//   (answer to sync k lost, or A created after it)
//   cycle       A preempted: Stopping    (started_at 0: never reported running)
//   sync k+1    agent holds {}           server: A ends Preempted / Cancelled here
static Result<bool> end_unstarted_stops(Tx& tx, const std::string& cluster_id, const std::set<std::string>& reported,
                                        Millis now, const std::string& actor) {
  CP_ASSIGN(auto active, tx.active_attempts(cluster_id));
  bool ended = false;
  for (auto& a : active) {
    if (a.state != AttemptState::Stopping || a.started_at != 0 || reported.count(a.id)) continue;
    AttemptReport r;
    r.attempt_id = a.id;
    r.epoch = a.epoch;
    r.state = a.stop_reason == "preempt" ? AttemptState::Preempted : AttemptState::Cancelled;
    r.finished_at = now;
    r.message = "stopped before the agent started it";
    CP_TRY(finish_attempt(tx, a, r, now, actor));
    ended = true;
  }
  return ended;
}

Result<SyncResponse> ControlPlane::agent_sync(const Principal& agent, const SyncRequest& req) {
  if (agent.kind != Principal::Kind::agent) {
    return errors::forbidden("sync needs an agent credential", "同步需要 agent 凭据");
  }
  if (!req.cluster_id.empty() && req.cluster_id != agent.cluster_id) {
    Error e = errors::forbidden("credential of cluster " + agent.cluster_id + " cannot act for " + req.cluster_id,
                                "集群 " + agent.cluster_id + " 的凭据不能代表 " + req.cluster_id);
    e.code = "wrong_cluster";
    return e;
  }
  const std::string& cid = agent.cluster_id;
  const std::string actor = "agent:" + cid;
  Millis now = clock_.now_ms();
  SyncResponse resp;
  resp.lease_ttl_s = config_.lease_ttl_s;
  resp.received_at = now;
  fill_witness(resp);
  bool freed = false;
  bool stale_request = false;
  // What the sync does with the inventory (model/inventory.h): take the
  // reported nodes; nothing (the agent says they are unchanged and we hold
  // them); or rewrite the stored ones with a clock offset that moved.
  enum class Inventory { none, reported, stored_with_new_offset };
  Inventory inventory = Inventory::none;
  bool nodes_written = false;  // a node row was written or deleted (server/fleet_nodes.h)
  // The agent's own NTP-style measurement when it has one; the first syncs
  // fall back to sent_at, which counts any time the request queued as offset.
  const bool clock_known = req.clock_delay_ms >= 0 || req.sent_at != 0;
  const Millis clock_offset = req.clock_delay_ms >= 0 ? req.clock_offset_ms : req.sent_at != 0 ? req.sent_at - now : 0;
  std::set<std::string> reported;  // the attempts this sync reports on
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    // Store::write runs the body again after a conflict or a busy database:
    // no order computed by a run that rolled back may reach the agent.
    reported.clear();
    resp.start.clear();
    resp.stop.clear();
    resp.ack.clear();
    resp.send_inventory = false;
    inventory = Inventory::none;
    nodes_written = false;
    freed = false;
    stale_request = false;
    CP_ASSIGN(auto c, tx.get_cluster(cid));
    if (!c) return errors::not_found("cluster", cid);
    // An aborted long-poll may arrive after the sync that replaced it: its
    // reports are older than what we hold, so only orders are answered.
    if (req.agent_instance == c->agent_instance && req.seq != 0 && req.seq <= c->agent_seq) {
      stale_request = true;
      return {};
    }
    c->agent_seq = req.seq;

    // Liveness and engine health.
    ClusterState before = c->state;
    std::string reason_before = c->state_reason;
    if (c->state != ClusterState::draining) {
      if (req.engine.ok) {
        c->state = ClusterState::online;
        c->state_reason.clear();
        c->state_message.clear();
      } else {
        c->state = ClusterState::degraded;
        c->state_reason = "engine_error";
        c->state_message = req.engine.message;
      }
    }
    c->last_contact = now;
    c->agent_instance = req.agent_instance;
    c->updated_at = now;
    CP_TRY(tx.update_cluster(*c));
    if (before != c->state || reason_before != c->state_reason) {
      freed = true;  // a cluster coming back may let queued work run
      CP_ASSIGN(auto eid, tx.append_event(make_event(now, actor, "cluster", cid, "cluster.state", state_name(before),
                                                    state_name(c->state), c->state_message)));
      (void)eid;
    }

    // Inventory: reported nodes replace what we knew; vanished nodes go.
    // The preflight check compares them with each other (preflight.h); a
    // change in what it finds about a node is an event.
    // An agent that reports its nodes unchanged costs no node read or write
    // while we hold the inventory it names and its clock has not moved.
    if (!req.nodes.empty()) {
      inventory = Inventory::reported;
    } else if (req.nodes_unchanged) {
      auto held = live_inventory_.held(cid);
      if (!held || held->fingerprint != req.inventory) {
        resp.send_inventory = true;
      } else if (clock_known && std::llabs(clock_offset - held->clock_offset_ms) > internal::kClockSlackMs) {
        inventory = Inventory::stored_with_new_offset;
      }
    }
    std::map<std::string, Node> known_nodes;
    if (inventory != Inventory::none) {
      CP_ASSIGN(auto known, tx.list_nodes(cid));
      for (auto& n : known) known_nodes.emplace(n.name, std::move(n));
    }
    std::vector<Node> reported_nodes;
    if (inventory == Inventory::reported) {
      for (const auto& nr : req.nodes) {
        Node n;
        n.cluster_id = cid;
        n.name = nr.name;
        n.labels = nr.labels;
        n.capacity = nr.capacity;
        n.allocatable = nr.allocatable;
        n.ready = nr.ready;
        n.not_ready_reason = nr.reason;
        n.facts = nr.facts;
        n.gpus = nr.gpus;
        reported_nodes.push_back(std::move(n));
      }
    } else if (inventory == Inventory::stored_with_new_offset) {
      for (const auto& [name, known] : known_nodes) reported_nodes.push_back(known);
    }
    for (auto& n : reported_nodes) {
      if (clock_known) n.facts.clock_offset_ms = clock_offset;
      n.updated_at = now;
    }
    auto drift = find_drift(reported_nodes, c->storage_mount);
    for (auto& n : reported_nodes) {
      n.drift = std::move(drift[n.name]);
      auto before_it = known_nodes.find(n.name);
      const std::vector<NodeDrift> none;
      const auto& drift_before = before_it == known_nodes.end() ? none : before_it->second.drift;
      if (to_json(n.drift) != to_json(drift_before)) {
        json::object data;
        data["cluster"] = cid;
        data["drift"] = to_json(n.drift);
        std::string summary;
        for (const auto& d : n.drift) summary += (summary.empty() ? "" : "; ") + d.message;
        CP_ASSIGN(auto eid, tx.append_event(make_event(now, actor, "node", cid + "/" + n.name, "node.drift", "", "",
                                                      summary.empty() ? "no drift" : summary, std::move(data))));
        (void)eid;
      }
      // A node that says nothing new is not written again: most syncs of a
      // steady fleet change no node, and rewriting every node was a third of
      // a sync's cost (docs/benchmarks.md, "Agent sync load"). Its
      // updated_at then tells when it last changed.
      if (before_it == known_nodes.end() || !internal::same_report(before_it->second, n)) {
        CP_TRY(tx.upsert_node(n));
        nodes_written = true;
      }
      known_nodes.erase(n.name);
    }
    // What is left was not reported: gone.
    for (const auto& [name, n] : known_nodes) {
      CP_TRY(tx.delete_node(cid, name));
      nodes_written = true;
    }

    // Attempt reports.
    for (const auto& r : req.attempts) {
      reported.insert(r.attempt_id);
      CP_ASSIGN(auto a, tx.get_attempt(r.attempt_id));
      if (!a || a->cluster_id != cid) {
        resp.stop.push_back(superseded(r.attempt_id));
        if (is_terminal(r.state)) resp.ack.push_back(r.attempt_id);
        continue;
      }
      if (r.epoch != a->epoch) {
        // A report from an older incarnation: refused, and told to stop.
        resp.stop.push_back(superseded(r.attempt_id));
        if (is_terminal(r.state)) resp.ack.push_back(r.attempt_id);
        continue;
      }
      if (is_terminal(a->state)) {
        if (is_terminal(r.state)) {
          resp.ack.push_back(r.attempt_id);
        } else {
          // e.g. marked Lost while the cluster was cut off: the task moved on.
          resp.stop.push_back(superseded(r.attempt_id));
        }
        continue;
      }
      a->lease_renewed_at = now;
      if (a->state == AttemptState::Unknown) {
        // Its cluster was silent, and now its agent tells (unknown_attempts.h):
        // back to what it was, nothing having rerun meanwhile; an end is then
        // recorded as any end.
        CP_TRY(internal::resume_unknown(tx, *a, now, actor));
      }
      if (is_terminal(r.state)) {
        CP_TRY(finish_attempt(tx, *a, r, now, actor));
        resp.ack.push_back(r.attempt_id);
        freed = true;
        continue;
      }
      if (a->started_at == 0 && a->state == AttemptState::Stopping && r.started_at != 0) {
        // Told to stop before its first report reached us: it did start, so
        // ending it is the agent's business (end_unstarted_stops skips it).
        a->started_at = r.started_at;
      }
      if (r.state == AttemptState::Running && a->state == AttemptState::Dispatched) {
        a->state = AttemptState::Running;
        a->started_at = r.started_at ? r.started_at : now;
        CP_ASSIGN(auto t, tx.get_task(a->task_id));
        if (t && t->current_attempt == a->id && t->state == TaskState::Dispatched) {
          CP_TRY(internal::transition(tx, *t, TaskState::Running, now, actor,
                                      "attempt " + std::to_string(a->number) + " started"));
        }
      }
      CP_TRY(tx.update_attempt(*a));
    }
    CP_ASSIGN(bool ended, end_unstarted_stops(tx, cid, reported, now, actor));
    freed = freed || ended;
    return {};
  }));
  if (nodes_written) fleet_nodes_.changed(cid);
  if (stale_request) return pending_orders(cid, req.attempts, now);
  // The orders, from what this sync committed or anything newer, in a read
  // transaction: decoding every active attempt of the cluster (and the task
  // of each one to start) is most of a sync's cost on a busy cluster, and a
  // read runs beside the writer instead of holding it.
  CP_TRY(store_.read([&](Tx& tx) -> Status { return compute_orders(tx, cid, reported, resp); }));
  {
    std::lock_guard lock(contacts_mu_);
    auto& at = contacts_[cid];
    at = std::max(at, now);
  }
  // An agent without nodes (or whose engine listed none) changes no row, as
  // before fingerprints; holding its empty inventory stops it being asked again.
  const bool reported_empty = req.nodes.empty() && !req.nodes_unchanged && !req.inventory.empty();
  if (inventory == Inventory::reported || reported_empty) {
    live_inventory_.stored(cid, req.agent_instance, req.seq, req.inventory, clock_offset, req.nodes);
  } else if (inventory == Inventory::stored_with_new_offset) {
    live_inventory_.offset_stored(cid, clock_offset);
  }
  if (req.nodes_unchanged && !resp.send_inventory) live_inventory_.figures(cid, req.gpu_figures);
  if (freed) {
    wake_scheduler();
    log_signal_.notify();
  }
  resp.server_time = clock_.now_ms();
  return resp;
}

void ControlPlane::fill_witness(SyncResponse& resp) {
  if (!beacon_) return;
  resp.beacon_url = beacon_->read_url();
  if (resp.beacon_url.empty()) return;
  const BeaconMark mark = beacon_->named_mark();
  resp.beacon_term = mark.term;
  resp.beacon_seq = mark.seq;
  resp.beacon_window_ms = beacon_->timing().window;
  resp.beacon_poll_ms = beacon_->timing().poll;
}

Result<SyncResponse> ControlPlane::pending_orders(const std::string& cluster_id,
                                                  const std::vector<AttemptReport>& reported, Millis received_at) {
  SyncResponse resp;
  resp.lease_ttl_s = config_.lease_ttl_s;
  resp.received_at = received_at;
  fill_witness(resp);
  resp.server_time = clock_.now_ms();
  std::set<std::string> ids;
  for (const auto& r : reported) ids.insert(r.attempt_id);
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    return compute_orders(tx, cluster_id, ids, resp);
  }));
  return resp;
}

Status ControlPlane::agent_logs(const Principal& agent, const LogUpload& up) {
  if (agent.kind != Principal::Kind::agent) {
    return errors::forbidden("log upload needs an agent credential", "上传日志需要 agent 凭据");
  }
  if (static_cast<std::int64_t>(up.data.size()) > config_.log_chunk_max_bytes) {
    return errors::too_large("log chunk over " + std::to_string(config_.log_chunk_max_bytes) + " bytes",
                             "日志块超过 " + std::to_string(config_.log_chunk_max_bytes) + " 字节");
  }
  if (up.offset < 0 || up.replica < 0 || up.replica > 1024) {
    return errors::invalid("offset", "offset and replica must be non-negative", "offset 和 replica 不能为负数");
  }
  std::optional<Attempt> a;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(a, tx.get_attempt(up.attempt_id));
    return {};
  }));
  if (!a || a->cluster_id != agent.cluster_id) return errors::not_found("attempt", up.attempt_id);
  if (a->epoch != up.epoch) {
    Error e = errors::conflict("stale epoch " + std::to_string(up.epoch) + " for attempt " + up.attempt_id,
                               "尝试 " + up.attempt_id + " 的 epoch " + std::to_string(up.epoch) + " 已过期");
    e.code = "stale_epoch";
    return e;
  }
  if (up.data.empty()) return {};
  CP_ASSIGN(auto info, objects_.put(log_chunk_key(a->task_id, a->id, up.replica, up.offset), up.data));
  (void)info;
  log_signal_.notify();
  return {};
}

}  // namespace cp
