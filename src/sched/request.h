// What one queued task asks for, read once from its step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "model/types.h"

namespace cp::sched {

inline const Resources kNoResources;

struct Request {
  // The step's resources (or a fallback's) as asked: may hold "gpu/any". A
  // view, not a copy (a copy of the names costs more than the rest of a
  // task's gates): valid while the task it was read from lives.
  const Resources& per_replica() const { return *asked; }
  const Resources* asked = &kNoResources;
  int replicas = 1;
  // "" when no GPU is asked for, "any" for "gpu/any", else the concrete type
  // (a view of the name in *asked).
  std::string_view gpu_type;
  std::int64_t gpus = 0;  // per replica
  int shape = 0;          // 0: the step's own resources; i: step.fallbacks[i - 1]
  std::int64_t cpu = 0;     // per_replica's cpu and memory, read once
  std::int64_t memory = 0;
  bool others = false;      // per_replica names something besides cpu, memory and GPUs
  bool any = false;         // gpu_type is "any"
  // The cycle's id of gpu_type (CycleState::gpu_type_id), so that node filters
  // compare ints: kGpuTypeUnresolved until the cycle sets it.
  int gpu_type_id = kGpuTypeUnresolved;
  static constexpr int kGpuTypeUnresolved = -2;
  static constexpr int kGpuTypeNowhere = -1;  // no node of the cycle offers it

  bool wants_gpus() const { return gpus > 0; }
  bool any_gpu() const { return any; }
  // per_replica with "gpu/any" replaced by "gpu/<type>".
  Resources resolved(std::string_view type) const;
  // per_replica without "gpu/any": the part whose quota is known before a
  // node (and so a GPU type) is chosen.
  Resources typed_part() const;
  // The same without a copy when there is no "gpu/any" to drop: per_replica
  // itself, else typed_part() kept in `copy`.
  const Resources& typed(std::optional<Resources>& copy) const {
    return any_gpu() ? copy.emplace(typed_part()) : per_replica();
  }
};

inline constexpr int kMaxReplicas = 1024;

// The request of a task (a view of it: see Request::asked), or why it cannot be scheduled at all (replicas out
// of 1..kMaxReplicas, negative or oversized amounts, two GPU types). Submit
// validation rejects all of these; the scheduler still must not trust it.
Result<Request> request_of(const Task& task, int shape = 0);

// The resources shape `shape` of `step` asks per replica (0: the step's
// own, i: fallbacks[i - 1]); nullptr when the step has no such shape.
const Resources* shape_resources(const Step& step, int shape);

// Whether a task may use one of its shapes now: 0 always, a fallback once
// its wait has passed (`waited_ms` in the queue).
bool shape_open(const Task& task, int shape, Millis waited_ms);

}  // namespace cp::sched
