// Which task and attempt rows each committed write changed, in commit order:
// what lets the server keep the scheduler's live state in memory and read
// only what changed since its last cycle (server/live_work.h), instead of
// every queued and running task at every cycle.
//
// A backend collects the ids a write transaction inserts, updates or
// deletes (Tx::noted_task, noted_attempt) and publishes them here once the
// transaction has ended, before write() returns, whether it committed or not
// (a COMMIT whose connection was lost may have committed). Ids only, never
// rows: a reader fetches the rows in a transaction of its own, so an id of a
// rolled-back write costs it one read, and two commits published in the
// other order than they committed (PostgreSQL, concurrent writers) cannot
// mislead it.
//
// One consumer takes what was published. The journal holds at most
// `max_ids` ids (no consumer, or one that fell behind); past that it drops
// the oldest and tells the consumer, which then reads everything again.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace cp {

struct ChangedRows {
  std::vector<std::string> tasks;
  std::vector<std::string> attempts;
  // Non-zero: the writer that will apply these rows to the consumer's copy
  // itself (Tx::keep_written), and may forget() them once it has.
  std::uint64_t writer = 0;
  // The clusters of the attempts above (each once): who a change may wake
  // (a long-poll parked on another server). Not kept by the journal.
  std::vector<std::string> clusters;
  bool empty() const { return tasks.empty() && attempts.empty(); }
  std::size_t size() const { return tasks.size() + attempts.size(); }
};

class ChangeJournal {
 public:
  static constexpr std::size_t kDefaultMaxIds = 200'000;
  explicit ChangeJournal(std::size_t max_ids = kDefaultMaxIds) : max_ids_(max_ids) {}

  // The number of the last publish() (0 before the first).
  std::uint64_t last() const;
  // After a commit: the ids it wrote (an empty set is not kept).
  void publish(ChangedRows rows);
  // Moves into `out` everything published up to `upto` (a last() taken
  // earlier) and forgets it. False when ids were dropped since the last
  // take (the journal was full): `out` is then incomplete, read everything.
  bool take(std::uint64_t upto, ChangedRows& out);

  // A number for ChangedRows::writer, never handed out before.
  std::uint64_t new_writer();
  // Drops what `writer` published: its rows committed, and the consumer has
  // applied them to its copy already. Only the consumer calls it, before its
  // next take(), so the entries are still here (unless the journal was full,
  // which take() reports anyway). Entries of other writers that name the
  // same rows stay, and make the consumer read those rows again.
  void forget(std::uint64_t writer);
  // Something may have been written that nobody published (the feed of
  // other processes' writes was cut): the next take() reports incomplete,
  // and its consumer reads everything again.
  void lost_track();

 private:
  struct Entry {
    std::uint64_t seq;
    ChangedRows rows;
  };
  const std::size_t max_ids_;
  mutable std::mutex mu_;
  std::uint64_t last_ = 0;
  std::uint64_t writers_ = 0;
  std::deque<Entry> entries_;
  std::size_t ids_ = 0;
  bool dropped_ = false;
};

}  // namespace cp
