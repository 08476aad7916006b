#include "store/change_journal.h"

namespace cp {

std::uint64_t ChangeJournal::last() const {
  std::lock_guard lock(mu_);
  return last_;
}

void ChangeJournal::publish(ChangedRows rows) {
  std::lock_guard lock(mu_);
  ++last_;
  if (rows.empty()) return;
  ids_ += rows.size();
  entries_.push_back(Entry{last_, std::move(rows)});
  while (ids_ > max_ids_ && !entries_.empty()) {
    ids_ -= entries_.front().rows.size();
    entries_.pop_front();
    dropped_ = true;
  }
}

bool ChangeJournal::take(std::uint64_t upto, ChangedRows& out) {
  std::lock_guard lock(mu_);
  while (!entries_.empty() && entries_.front().seq <= upto) {
    auto& rows = entries_.front().rows;
    ids_ -= rows.size();
    out.tasks.insert(out.tasks.end(), std::make_move_iterator(rows.tasks.begin()),
                     std::make_move_iterator(rows.tasks.end()));
    out.attempts.insert(out.attempts.end(), std::make_move_iterator(rows.attempts.begin()),
                        std::make_move_iterator(rows.attempts.end()));
    entries_.pop_front();
  }
  const bool complete = !dropped_;
  dropped_ = false;
  return complete;
}

std::uint64_t ChangeJournal::new_writer() {
  std::lock_guard lock(mu_);
  return ++writers_;
}

void ChangeJournal::forget(std::uint64_t writer) {
  if (writer == 0) return;
  std::lock_guard lock(mu_);
  std::erase_if(entries_, [&](const Entry& e) {
    if (e.rows.writer != writer) return false;
    ids_ -= e.rows.size();
    return true;
  });
}

void ChangeJournal::lost_track() {
  std::lock_guard lock(mu_);
  ++last_;
  dropped_ = true;
}

}  // namespace cp
