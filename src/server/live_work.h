// The scheduler's live work, kept between cycles: every task that is Queued
// or holds resources (Admitted, Dispatched, Running, Preempting) and every
// active attempt (Dispatched, Running, Stopping), decoded once.
//
// A cycle used to read and decode all of them from the store (about 20 µs a
// row: at 10,000 running tasks, 400 ms a cycle before deciding anything).
// Now it reads only the rows that the store's change journal
// (store/change_journal.h) names since the last cycle, so its cost follows
// what changed, not what exists. Everything is read again:
// - at the first cycle, and after a refresh that failed half-way;
// - when the store keeps no journal, or the journal dropped ids (full);
// - every kFullReadEveryMs, a safety net for rows written behind this
//   process's back (another process sharing the database).
//
// The apply step (scheduling.cpp) refreshes it again inside its write
// transaction and re-checks the plan against it: that is the store as of
// that transaction, since every write that committed before it has been
// published by then (SQLite: one writer, which publishes before the next
// transaction starts). On PostgreSQL a write that has committed but not yet
// published could be missed; attempts, the rows a re-check must not miss,
// are created only by scheduling cycles, one at a time, each published
// before the next cycle starts.
//
// Not thread-safe: used under the scheduler's lock.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "model/types.h"
#include "sched/tally.h"
#include "store/store.h"

namespace cp {

class LiveWork {
 public:
  static constexpr Millis kFullReadEveryMs = 5 * 60 * 1000;

  // The journal mark to pass to refresh(): taken BEFORE the read
  // transaction opens, so that every write published up to it is visible
  // to that transaction (0 for a store without a journal).
  static std::uint64_t mark(Store& store);

  // Brings the live work up to date in `tx`, a transaction opened after
  // `mark` was taken. `periodic`: false where a full read would hold up
  // others (inside the apply's write transaction); it then reads everything
  // only when it must.
  Status refresh(Tx& tx, ChangeJournal* journal, std::uint64_t mark, Millis now, bool periodic = true);

  // The rows a write of this process committed (Tx::keep_written), applied
  // as a refresh would read them back, and touched alike. The caller then
  // drops the write's journal entry (ChangeJournal::forget), so that the
  // next refresh does not read them again: a cycle's apply writes as many
  // rows as it places, twice over (task and attempt). Rows that another
  // writer changed after it are named by that writer's entry, read by the
  // next refresh. Call it before that refresh, under the same lock.
  void apply(const WrittenRows& rows);
  // The same, moving the rows in (none copied): `rows` is left empty, its
  // writer kept.
  void apply(WrittenRows&& rows);
  // `rows` as stored now against the kept copies: "" when they agree (for
  // ServerConfig::verify_warm_scheduler and the tests; no other writer may
  // have changed them since).
  Result<std::string> check_rows(Tx& tx, const WrittenRows& rows) const;

  // Queued tasks by (created_at, id), as the store lists them.
  std::vector<const Task*> queued() const;
  // A live task (Queued or holding), or nullptr.
  const Task* task(const std::string& id) const;
  // Active attempts by (cluster, id), as the store lists them.
  std::vector<const Attempt*> attempts() const;
  // An active attempt, or nullptr.
  const Attempt* attempt(const std::string& id) const;
  // Each active attempt, in no particular order (nothing sorted).
  template <typename Fn>
  void for_each_attempt(Fn&& fn) const {
    for (const auto& [id, a] : attempts_) fn(a);
  }

  // What the active attempts hold, kept as they come and go, so that the
  // apply's re-check (holdings.h) costs what its plan touches, not every
  // active attempt (a hash lookup of its task each, at every cycle):
  // - per resource group, per replica x replicas, each attempt charged to
  //   the group of its task as it was when the attempt was read;
  // - per node, its resources and GPU indices (whatever its task).
  // An attempt read while its task was not live has no group here; it is
  // listed by ungrouped_attempts() for the caller to look up.
  struct NodeUse {
    sched::Tally used;
    std::multiset<int> gpus;  // an index twice if two attempts claim it
  };
  const std::map<std::string, sched::Tally, std::less<>>& group_use() const { return sums_.groups; }
  const NodeUse* node_use(std::string_view cluster, std::string_view node) const;
  const std::set<std::string>& ungrouped_attempts() const { return ungrouped_; }
  // The kept sums against a count from scratch: "" when they agree, else
  // what differs (for the checks of verify_warm_scheduler and the tests).
  std::string check_sums() const;

  // The rows read again since the last take_touched(): what the kept
  // scheduler (warm_schedule.h) must look at. `everything`: a full read
  // happened (or too many ids piled up), so every row may have changed.
  struct Touched {
    bool everything = true;
    std::vector<std::string> tasks;
    std::vector<std::string> attempts;
  };
  Touched take_touched();
  std::size_t attempt_count() const { return attempts_.size(); }

  // Counters for the debug log and the tests.
  struct Stats {
    std::int64_t full_reads = 0;
    std::int64_t rows_read = 0;  // by the last refresh
  };
  const Stats& stats() const { return stats_; }

 private:
  Status read_everything(Tx& tx, Millis now);
  Status read_changed(Tx& tx, const ChangedRows& changed);
  void touch(std::vector<std::string>& ids, const std::string& id);

  static constexpr std::size_t kMaxTouched = 200'000;

  bool loaded_ = false;
  Touched touched_;
  Millis full_at_ = 0;
  // Keep queued_ in step with tasks_.
  void put(Task t);
  // One row of apply(): touched, then kept if still live.
  void keep_written(Task t);
  void keep_written(Attempt a);
  void erase(const std::string& id);
  // Keep the sums in step with attempts_.
  void put_attempt(Attempt a);
  void erase_attempt(const std::string& id);
  struct Sums {
    std::map<std::string, sched::Tally, std::less<>> groups;
    std::map<std::string, std::map<std::string, NodeUse, std::less<>>, std::less<>> nodes;
  };
  static void charge(Sums& sums, const Attempt& a, const std::string& group, std::int64_t sign);

  std::unordered_map<std::string, Task> tasks_;
  // The queued ones among tasks_, in queued() order: a cycle walks what
  // waits, not every task that runs.
  std::map<std::pair<Millis, std::string>, const Task*> queued_;
  // Active attempts, each with the group it is charged to ("" = none).
  std::unordered_map<std::string, Attempt> attempts_;
  std::unordered_map<std::string, std::string> group_of_attempt_;
  std::set<std::string> ungrouped_;
  Sums sums_;
  Stats stats_;
};

}  // namespace cp
