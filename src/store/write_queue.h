// The queue of group commit, shared by SqliteStore::write and
// PostgresStore::write_shared. A writer queues its write and waits: either
// another writer's group carries it, or it may lead a group itself (while
// fewer than `max_leaders` groups run), and then everything queued so far,
// its own write included, is its group. The leader runs the group as one
// transaction and finish()es it.
#pragma once

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <vector>

#include "store/store.h"

namespace cp {

class WriteQueue {
 public:
  // One write waiting for its group to commit.
  struct Pending {
    const std::function<Status(Tx&)>* body = nullptr;
    Status result;
    std::exception_ptr thrown;  // rethrown on the caller's thread
    ChangedRows changed;        // published once the group has committed
    bool taken = false;         // in a leader's group
    bool done = false;
    std::condition_variable wake;  // its group committed, or it may lead one
  };

  explicit WriteQueue(int max_leaders) : max_leaders_(max_leaders) {}
  int max_leaders() const { return max_leaders_; }

  // Queues `me` and waits. Returns the group `me` now leads (it holds
  // `me`), or an empty one once another's group has carried `me`.
  std::vector<Pending*> join(Pending& me) {
    std::unique_lock lock(mu_);
    queue_.push_back(&me);
    me.wake.wait(lock, [&] { return me.done || (!me.taken && leaders_ < max_leaders_); });
    std::vector<Pending*> group;
    if (me.done) return group;
    ++leaders_;
    group.swap(queue_);
    for (auto* w : group) w->taken = true;
    return group;
  }

  // After leading `group`: each write is done. Wakes exactly those, and the
  // first one queued since, to lead the next group; the rest of the queue
  // sleeps on. Under the lock: a done writer returns, and its Pending is
  // gone, as soon as it can take the lock.
  void finish(const std::vector<Pending*>& group, const Pending& me) {
    std::lock_guard lock(mu_);
    for (auto* w : group) {
      w->done = true;
      if (w != &me) w->wake.notify_one();
    }
    --leaders_;
    if (!queue_.empty()) queue_.front()->wake.notify_one();
  }

  // Writes waiting for a leader.
  std::size_t queued() const {
    std::lock_guard lock(mu_);
    return queue_.size();
  }

 private:
  mutable std::mutex mu_;
  std::vector<Pending*> queue_;
  int leaders_ = 0;
  const int max_leaders_;
};

}  // namespace cp
