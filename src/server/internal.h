// Helpers shared by the control plane's translation units; not part of its API.
#pragma once

#include <string>

#include "common/json.h"
#include "model/types.h"
#include "server/control_plane.h"
#include "store/store.h"

namespace cp::internal {

Event make_event(Millis at, std::string actor, std::string object_kind, std::string object_id, std::string type,
                 std::string from = "", std::string to = "", std::string message = "", json::object data = {});

// Moves a task to `to` (CHECKs the lifecycle), stamps times, writes it and
// its event in `tx`. The caller owns the transaction.
Status transition(Tx& tx, Task& task, TaskState to, Millis now, const std::string& actor,
                  const std::string& message = "", json::object data = {});

// Cancels every live task of the pipeline that (transitively) depends on `failed`.
Status cancel_dependents(Tx& tx, const Task& failed, Millis now, const std::string& actor);

// Resources held by an attempt (per replica x replicas).
Resources attempt_total(const Attempt& a);

Error unknown_reference(const std::string& field, const std::string& kind, const std::string& name);
Error forbidden_for(const Principal& p, const std::string& what_en, const std::string& what_zh);

}  // namespace cp::internal
