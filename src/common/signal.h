// A wake-up signal between threads without I/O libraries: the HTTP layer
// subscribes (e.g. to end a long-poll at once) and domain code notifies.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>

namespace cp {

class Signal {
 public:
  using Callback = std::function<void()>;
  // Returns an id for unsubscribe. Callbacks run on the notifying thread and
  // must be quick (post to an executor, set a flag).
  std::uint64_t subscribe(Callback cb) {
    std::lock_guard lock(mu_);
    subs_.emplace(++next_, std::move(cb));
    return next_;
  }
  void unsubscribe(std::uint64_t id) {
    std::lock_guard lock(mu_);
    subs_.erase(id);
  }
  void notify() {
    std::map<std::uint64_t, Callback> copy;
    {
      std::lock_guard lock(mu_);
      ++generation_;
      copy = subs_;
    }
    for (auto& [id, cb] : copy) cb();
  }
  std::uint64_t generation() const {
    std::lock_guard lock(mu_);
    return generation_;
  }

 private:
  mutable std::mutex mu_;
  std::map<std::uint64_t, Callback> subs_;
  std::uint64_t next_ = 0;
  std::uint64_t generation_ = 0;
};

}  // namespace cp
