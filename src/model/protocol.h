// The agent protocol (DESIGN.md "Agent protocol"): HTTP/JSON, always started
// by the agent. These structs are the bodies of
//   POST /api/v1/agent/register   RegisterRequest  -> RegisterResponse
//   POST /api/v1/agent/sync       SyncRequest      -> SyncResponse
//   POST /api/v1/agent/logs       LogUpload        -> {}
// Decoded leniently (unknown fields ignored) so that agent and server may
// differ by a version.
#pragma once

#include <boost/describe.hpp>

#include <map>
#include <string>
#include <vector>

#include "model/resource_use.h"
#include "model/types.h"

namespace cp {

struct RegisterRequest {
  std::string cluster_id;
  std::string bootstrap_token;  // one-time; or empty when renewing with the current credential
  std::string agent_instance;   // random per agent process
  std::string agent_version;
};
BOOST_DESCRIBE_STRUCT(RegisterRequest, (), (cluster_id, bootstrap_token, agent_instance, agent_version))

struct RegisterResponse {
  std::string credential;  // bearer token scoped to cluster_id
  Millis expires_at = 0;
  Millis server_time = 0;
  std::int64_t lease_ttl_s = 30;
  std::int64_t sync_interval_ms = 2000;
};
BOOST_DESCRIBE_STRUCT(RegisterResponse, (), (credential, expires_at, server_time, lease_ttl_s, sync_interval_ms))

struct NodeReport {
  std::string name;
  Labels labels;
  Resources capacity;
  Resources allocatable;
  bool ready = true;
  std::string reason;
  HostFacts facts;
  std::vector<GpuDevice> gpus;
};
BOOST_DESCRIBE_STRUCT(NodeReport, (), (name, labels, capacity, allocatable, ready, reason, facts, gpus))

// The live figures of one node's GPUs, in the order of its `gpus`: what moves
// between two inventory reads while the rest of the node stays the same.
struct NodeGpuFigures {
  std::string node;
  std::vector<int> utilization;           // percent; -1 not measured
  std::vector<std::int64_t> memory_used;  // bytes
};
BOOST_DESCRIBE_STRUCT(NodeGpuFigures, (), (node, utilization, memory_used))

struct AttemptReport {
  std::string attempt_id;
  std::int64_t epoch = 0;
  AttemptState state = AttemptState::Running;
  std::optional<int> exit_code;
  Millis started_at = 0;
  Millis finished_at = 0;
  std::string message;  // e.g. "killed by signal 9", "preempted: grace expired"
  ResourceUse use;      // terminal reports: what it used, per replica (model/resource_use.h); empty when not measured
};
BOOST_DESCRIBE_STRUCT(AttemptReport, (), (attempt_id, epoch, state, exit_code, started_at, finished_at, message, use))

struct EngineStatus {
  bool ok = true;
  std::string message;
};
BOOST_DESCRIBE_STRUCT(EngineStatus, (), (ok, message))

struct SyncRequest {
  std::string cluster_id;
  std::string agent_instance;
  std::int64_t seq = 0;
  Millis sent_at = 0;  // agent clock
  // The agent's clock minus the server's, measured over earlier syncs
  // (model/clock_estimate.h), and that measurement's delay; -1: not measured
  // yet (then the server takes sent_at minus its own time).
  Millis clock_offset_ms = 0;
  Millis clock_delay_ms = -1;
  // The whole inventory, when it changed since the server last took it (or
  // the server asked for it); otherwise empty, with nodes_unchanged set and
  // only the GPU figures that moved (model/inventory.h).
  std::vector<NodeReport> nodes;
  std::string inventory;  // fingerprint of the inventory, live GPU figures left out
  bool nodes_unchanged = false;
  std::vector<NodeGpuFigures> gpu_figures;
  std::vector<AttemptReport> attempts;
  EngineStatus engine;
  std::int64_t wait_ms = 0;  // long-poll: hold the answer up to this long when there is nothing to say
};
BOOST_DESCRIBE_STRUCT(SyncRequest, (),
                      (cluster_id, agent_instance, seq, sent_at, clock_offset_ms, clock_delay_ms, nodes, inventory,
                       nodes_unchanged, gpu_figures, attempts, engine, wait_ms))

struct StartOrder {
  std::string attempt_id;
  std::int64_t epoch = 0;
  std::string task_id;
  int attempt_number = 1;
  std::vector<ReplicaPlacement> placements;
  std::vector<std::string> command;
  std::string image;
  std::map<std::string, std::string> env;
  Resources resources;  // per replica
  std::string checkpoint_key;  // object-store prefix of the task's checkpoint; "" when none
  std::int64_t grace_s = 30;
};
BOOST_DESCRIBE_STRUCT(StartOrder, (),
                      (attempt_id, epoch, task_id, attempt_number, placements, command, image, env, resources,
                       checkpoint_key, grace_s))

struct StopOrder {
  std::string attempt_id;
  std::string reason;  // cancel | preempt | superseded | lost
  std::int64_t grace_s = 30;
};
BOOST_DESCRIBE_STRUCT(StopOrder, (), (attempt_id, reason, grace_s))

struct SyncResponse {
  std::int64_t lease_ttl_s = 30;
  // Server clock: when it took the request up, and when it answered (after
  // any long-poll hold). With the agent's send and receive times they make
  // one NTP exchange (model/clock_estimate.h).
  Millis received_at = 0;
  Millis server_time = 0;
  std::vector<StartOrder> start;
  std::vector<StopOrder> stop;
  std::vector<std::string> ack;  // terminal reports stored; the agent may forget them
  // The server does not hold the inventory the request named: send the nodes.
  bool send_inventory = false;
  // The witness (DESIGN.md "Fencing and outages"): where the agent reads the
  // leader's beacon when its syncs fail ("" = no witness: it fences at
  // L - m as before), the beacon's mark as of this answer, F (a chain that
  // holds moves the seq at least this often) and how often to read it.
  std::string beacon_url;
  std::int64_t beacon_term = 0;
  std::int64_t beacon_seq = 0;
  Millis beacon_window_ms = 0;
  Millis beacon_poll_ms = 0;
};
BOOST_DESCRIBE_STRUCT(SyncResponse, (),
                      (lease_ttl_s, received_at, server_time, start, stop, ack, send_inventory, beacon_url,
                       beacon_term, beacon_seq, beacon_window_ms, beacon_poll_ms))

struct LogUpload {
  std::string attempt_id;
  std::int64_t epoch = 0;
  int replica = 0;
  std::string stream = "combined";
  std::int64_t offset = 0;  // byte offset of `data` in the replica's log; resending is harmless
  std::string data;
};
BOOST_DESCRIBE_STRUCT(LogUpload, (), (attempt_id, epoch, replica, stream, offset, data))

}  // namespace cp
