// What the benchmark does to the database beside the Store interface: ANALYZE,
// query plans, sizes and row counts, and for PostgreSQL the bulk load (COPY).
// Nothing here is used to answer a measured query.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "generator.h"
#include "store/shared_sql.h"

namespace cp::bench {

// One write() worth of what the server would have written.
struct Batch {
  std::vector<Task> tasks;
  std::vector<Attempt> attempts;
  std::vector<TimedEvent> events;  // in the order their ids are given
  void clear() {
    tasks.clear();
    attempts.clear();
    events.clear();
  }
};

class Database {
 public:
  // Its own connection to the store's database (same URL as open_store).
  static Result<std::unique_ptr<Database>> open(const std::string& url);
  virtual ~Database() = default;

  virtual std::string backend() const = 0;
  virtual Status analyze() = 0;
  // The plan of one statement as the store would send it: SQLite's EXPLAIN
  // QUERY PLAN, PostgreSQL's EXPLAIN (ANALYZE, BUFFERS).
  virtual Result<std::string> explain(const sql::Statement& s) = 0;
  virtual Result<std::int64_t> count(const std::string& table) = 0;
  // Lines describing the size on disk (files, or database and relations).
  virtual Result<std::vector<std::string>> sizes(bool per_table) = 0;
  virtual Result<std::int64_t> total_bytes() = 0;
  // The process ids of the server processes serving this database's other
  // client connections (PostgreSQL; none for SQLite, which runs in-process).
  virtual Result<std::vector<int>> server_pids() { return std::vector<int>(); }

  // PostgreSQL only: loads a batch with COPY in one transaction. Columns and
  // documents are those of PostgresTx::insert_task / insert_attempt /
  // append_event (encode_row), and the ledger rows are summed into
  // usage_daily and usage_monthly with add_usage's upserts; event ids are
  // given in order from 1.
  virtual Status copy_batch(const Batch& b);
  // After the last copy_batch: moves events_id_seq past the last id.
  virtual Status finish_copy();
};

}  // namespace cp::bench
