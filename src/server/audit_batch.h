// AuditBatch: audit rows of concurrent requests written together. Every
// change made through the API adds a row to the audit log after the change
// itself (http/routes_monitoring.cpp), and the request waits for it. One
// transaction per row made the audit a third of a submit's round trips on
// PostgreSQL (BEGIN, INSERT, COMMIT, and a WAL flush of its own). Here the
// first caller to find no batch being written writes every row queued so far
// in one transaction; the others wait for the batch that carries theirs.
// Nothing is written later than the request returns: a caller returns once
// its row committed, or with the error that kept it out.
#pragma once

#include <condition_variable>
#include <mutex>
#include <vector>

#include "common/result.h"
#include "model/monitoring.h"
#include "store/store.h"

namespace cp {

class AuditBatch {
 public:
  explicit AuditBatch(Store& store) : store_(store) {}

  // Returns once `e` is in the store, or with why it is not. A batch that
  // fails is written again row by row, so that one bad row keeps no other
  // out.
  Status append(AuditEntry e);

  struct Stats {
    std::int64_t batches = 0;  // transactions written
    std::int64_t rows = 0;     // rows in them
  };
  Stats stats() const;
  // Rows waiting for the batch being written (for tests).
  std::size_t queued() const;

 private:
  struct Pending {
    AuditEntry entry;
    Status result;
    bool done = false;
  };
  void write(const std::vector<Pending*>& batch);

  Store& store_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Pending*> queue_;
  bool writing_ = false;
  Stats stats_;
};

}  // namespace cp
