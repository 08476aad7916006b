// What the benchmarks that run the real server in process share: failing
// loudly on an error, the rows one submit writes, and a simulated agent.
// Header only: bench/CMakeLists.txt adds the folders that have a
// CMakeLists.txt, and this one has none.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/result.h"
#include "server/control_plane.h"
#include "store/store.h"

namespace cp::bench {

// The value, or the error on stderr and exit 1.
template <class T>
T must(Result<T> r, const char* what) {
  if (!r.ok()) {
    std::fprintf(stderr, "ERROR %s: %s\n", what, r.error().to_string().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}
inline void must(const Status& s, const char* what) {
  if (!s.ok()) {
    std::fprintf(stderr, "ERROR %s: %s\n", what, s.error().to_string().c_str());
    std::exit(1);
  }
}

// One pipeline of one step ("step", command `true`) as submitted at `at`.
struct Submitted {
  Millis at = 0;
  std::string project_group, resource_group, user;
  Resources resources;  // per replica
  int priority = 0;
};

// The rows one submit of it writes: the pipeline, its task (queued) and
// the task's first event.
inline Status insert_submitted(Tx& tx, const Submitted& s) {
  Pipeline p;
  p.id = new_id("p", s.at);
  p.name = "bench";
  p.project_group = s.project_group;
  p.resource_group = s.resource_group;
  p.submitted_by = s.user;
  p.created_at = s.at;
  Step step;
  step.name = "step";
  step.command = {"true"};
  step.resources = s.resources;
  p.steps = {step};
  Task t;
  t.id = new_id("t", s.at);
  t.pipeline_id = p.id;
  t.name = step.name;
  t.project_group = s.project_group;
  t.resource_group = s.resource_group;
  t.user = s.user;
  t.priority = s.priority;
  t.step = std::move(step);
  t.state = TaskState::Queued;
  t.created_at = t.updated_at = t.queued_at = s.at;
  CP_TRY(tx.insert_pipeline(p));
  CP_TRY(tx.insert_task(t));
  Event e;
  e.at = t.queued_at;
  e.actor = t.user;
  e.object_kind = "task";
  e.object_id = t.id;
  e.type = "task.state";
  e.to = "Queued";
  e.message = "submitted";
  e.data["pipeline_id"] = p.id;
  e.data["project_group"] = t.project_group;
  e.data["resource_group"] = t.resource_group;
  CP_ASSIGN(auto id, tx.append_event(e));
  (void)id;
  return {};
}

// A cluster's agent, simulated: registered with a bootstrap token, and its
// nodes reported once; `sync` is kept for later reports (bump its seq).
struct SimulatedAgent {
  Principal principal;
  SyncRequest sync;
};
inline SimulatedAgent connect_agent(ControlPlane& control, const Principal& admin, const std::string& cluster,
                                    std::vector<NodeReport> nodes) {
  auto boot = must(control.create_bootstrap_token(admin, cluster, json::value(nullptr)), "bootstrap token");
  RegisterRequest reg{cluster, std::string(boot.at("token").as_string()), cluster + "-agent", cluster};
  auto credential = must(control.agent_register(reg, ""), "register").credential;
  SimulatedAgent out{must(control.authenticate_agent(credential), "agent"), {}};
  out.sync.cluster_id = cluster;
  out.sync.agent_instance = cluster + "-agent";
  out.sync.nodes = std::move(nodes);
  must(control.agent_sync(out.principal, out.sync), "first sync");
  return out;
}

}  // namespace cp::bench
