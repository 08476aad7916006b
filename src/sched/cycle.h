// One cycle on a state built elsewhere: what decide() and Scheduler::decide()
// share (scheduler.cpp). Internal to sched/.
#pragma once

#include <vector>

#include "sched/cycle_state.h"
#include "sched/queue_order.h"
#include "sched/scheduler.h"

namespace cp::sched {

// Plans `queue` against `state`, changing it as it goes (placements charged,
// holds, victims marked stopping): the caller throws the state away, or puts
// it back (CycleState::begin_cycle / end_cycle).
Plan run_cycle(CycleState& state, const SchedulerConfig& config, const std::vector<QueuedTask>& queue, Millis now,
               const QueueOrder& order);

}  // namespace cp::sched
