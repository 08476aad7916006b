#include "server/audit_batch.h"

#include <exception>
#include <string>

#include "common/error.h"

namespace cp {

Status AuditBatch::append(AuditEntry e) {
  Pending me{std::move(e), {}, false};
  std::vector<Pending*> batch;
  {
    std::unique_lock lock(mu_);
    queue_.push_back(&me);
    cv_.wait(lock, [&] { return me.done || !writing_; });
    if (me.done) return me.result;
    // Nobody is writing: write everything queued so far, this row included.
    writing_ = true;
    batch.swap(queue_);
  }
  try {
    write(batch);
  } catch (const std::exception& ex) {
    // Never leave the others waiting behind a batch that will not end.
    for (auto* p : batch) p->result = errors::internal(std::string("audit write threw: ") + ex.what());
  }
  {
    std::lock_guard lock(mu_);
    for (auto* p : batch) p->done = true;
    writing_ = false;
    stats_.batches++;
    stats_.rows += static_cast<std::int64_t>(batch.size());
  }
  cv_.notify_all();
  return me.result;
}

void AuditBatch::write(const std::vector<Pending*>& batch) {
  Status all = store_.write([&](Tx& tx) -> Status {
    for (auto* p : batch) CP_TRY(tx.append_audit(p->entry));
    return {};
  });
  if (all.ok() || batch.size() == 1) {
    for (auto* p : batch) p->result = all;
    return;
  }
  for (auto* p : batch) p->result = store_.write([&](Tx& tx) { return tx.append_audit(p->entry); });
}

std::size_t AuditBatch::queued() const {
  std::lock_guard lock(mu_);
  return queue_.size();
}

AuditBatch::Stats AuditBatch::stats() const {
  std::lock_guard lock(mu_);
  return stats_;
}

}  // namespace cp
