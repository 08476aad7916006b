// Software prefetch of queued tasks. A cycle reads the queue in processing
// order (priority, fair share, submit time), far from the order the tasks lie
// in memory: a resource group's tasks are spread over the whole queue, and
// each Task keeps its strings and amounts on the heap. Read cold, every task
// waits for memory several times; the loops over the queue ask for the tasks
// a few places ahead instead, in stages, each stage reading only what the
// stage before fetched, so that none of them waits either.
#pragma once

#include <cstddef>
#include <iterator>
#include <string>

#include "sched/scheduler.h"

namespace cp::sched::prefetch {

// A loop over tasks[i] calls lines() for tasks[i + 3], heap() for
// tasks[i + 2] and names() for tasks[i + 1] (decide() reads most of a task);
// fair_run, which reads less, holders() and holder_names().

// What OrderKey reads: priority and the two times.
inline void order_fields(const Task& t) {
  __builtin_prefetch(&t.priority);
  __builtin_prefetch(&t.queued_at);
  __builtin_prefetch(&t.created_at);
}

// What fair_run reads of a task (then holder_names(), two tasks later): its
// holders' strings and its amounts.
inline void holders(const Task& t) {
  __builtin_prefetch(&t.project_group);
  __builtin_prefetch(&t.user);
  __builtin_prefetch(&t.step.resources);
  __builtin_prefetch(&t.step.replicas);
}
inline void holder_names(const Task& t) {
  __builtin_prefetch(t.project_group.data());
  __builtin_prefetch(t.user.data());
  if (!t.step.resources.empty()) __builtin_prefetch(&*t.step.resources.amounts().begin());
}

// Stage 1: every cache line of the struct.
inline void lines(const QueuedTask& q) {
  const char* p = reinterpret_cast<const char*>(&q);
  for (std::size_t at = 0; at < sizeof(QueuedTask); at += 64) __builtin_prefetch(p + at);
}

// Stage 2 (reads the struct): the bytes of the strings the cycle reads, and
// the first and last entries of the amounts (one array, see Resources).
inline void heap(const Task& t) {
  for (const std::string* s : {&t.id, &t.project_group, &t.resource_group, &t.user, &t.priority_class}) {
    __builtin_prefetch(s->data());
  }
  const auto& amounts = t.step.resources.amounts();
  if (!amounts.empty()) {
    __builtin_prefetch(&*amounts.begin());
    __builtin_prefetch(&*std::prev(amounts.end()));
  }
}

// Stage 3 (reads the amounts' entries): the bytes of the resource names.
inline void names(const Task& t) {
  for (const auto& [name, amount] : t.step.resources.amounts()) __builtin_prefetch(name.data());
}

}  // namespace cp::sched::prefetch
