// The log side shared by the executors that keep each replica's output in a
// file of their own and a journal per attempt (local, Slurm): logs are read
// by offset from those files, and an attempt's directory goes once the server
// has its terminal report and every byte of its logs (or refuses them).
//
// `Attempts` is a map from attempt id to a value whose `rec` has
// `order` (task_id, epoch), `logs_refused`, `acked` and `replicas` (each with
// `replica`, `outcome` — "" while it runs — and `log_shipped`).
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "agent/executor.h"

namespace cp::file_logs {

// The size of the file at `path`; 0 when it is missing.
std::int64_t file_size(const std::string& path);

// Up to `max_bytes` of the file at `path` from byte `offset`; "" when nothing
// could be read.
std::string read_at(const std::string& path, std::int64_t offset, std::size_t max_bytes);

// Executor::read_new_logs over `attempts`: at most `chunk` bytes a piece and
// `max_bytes` in all, oldest offset first per replica.
template <class Attempts, class LogPath>
std::vector<LogPiece> read_new(Attempts& attempts, const LogPath& log_path, std::size_t chunk, std::size_t max_bytes) {
  std::vector<LogPiece> out;
  std::size_t budget = max_bytes;
  for (auto& [id, a] : attempts) {
    if (a.rec.logs_refused) continue;
    for (const auto& r : a.rec.replicas) {
      if (budget == 0) return out;
      const std::string path = log_path(id, r.replica);
      const std::int64_t size = file_size(path);
      if (size <= r.log_shipped) continue;
      std::string data =
          read_at(path, r.log_shipped, std::min({static_cast<std::size_t>(size - r.log_shipped), chunk, budget}));
      if (data.empty()) continue;
      LogPiece piece;
      piece.attempt_id = id;
      piece.task_id = a.rec.order.task_id;
      piece.epoch = a.rec.order.epoch;
      piece.replica = r.replica;
      piece.offset = r.log_shipped;
      piece.final = !r.outcome.empty() && r.log_shipped + static_cast<std::int64_t>(data.size()) >= size;
      piece.data = std::move(data);
      budget -= piece.data.size();
      out.push_back(std::move(piece));
    }
  }
  return out;
}

// Executor::logs_shipped on one attempt's record: whether anything moved
// (the caller then journals it).
template <class Record>
bool mark_shipped(Record& rec, int replica, std::int64_t new_offset) {
  bool moved = false;
  for (auto& r : rec.replicas) {
    if (r.replica != replica || new_offset <= r.log_shipped) continue;
    r.log_shipped = new_offset;
    moved = true;
  }
  return moved;
}

// Whether an acknowledged attempt's directory may go: its logs are all
// shipped, or the server refuses them.
template <class Record, class LogPath>
bool done_with(const std::string& attempt_id, const Record& rec, const LogPath& log_path) {
  if (!rec.acked) return false;
  if (rec.logs_refused) return true;
  return std::all_of(rec.replicas.begin(), rec.replicas.end(),
                     [&](const auto& r) { return r.log_shipped >= file_size(log_path(attempt_id, r.replica)); });
}

}  // namespace cp::file_logs
