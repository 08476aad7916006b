// What one queued task asks for, read once from its step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "model/types.h"

namespace cp::sched {

struct Request {
  Resources per_replica;  // as asked: may hold "gpu/any"
  int replicas = 1;
  // "" when no GPU is asked for, "any" for "gpu/any", else the concrete type.
  std::string gpu_type;
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
};

inline constexpr int kMaxReplicas = 1024;

// The request of a task, or why it cannot be scheduled at all (replicas out
// of 1..kMaxReplicas, negative or oversized amounts, two GPU types). Submit
// validation rejects all of these; the scheduler still must not trust it.
Result<Request> request_of(const Task& task, int shape = 0);

// The shapes a task may use now: 0, then each fallback whose wait has passed
// (`waited_ms` in the queue), in order.
std::vector<int> shapes_open(const Task& task, Millis waited_ms);

}  // namespace cp::sched
