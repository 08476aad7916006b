// Small file helpers for the agent's on-disk state (journal, credential).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace cp::agent_files {

// Writes `data` to a temporary file beside `path` and renames it over
// `path`: a reader (or a restarted agent) sees the old file or the new one,
// never a torn one. `durable` fsyncs the file before the rename, for what
// must survive the machine's crash too (a renewed credential); without it
// the file survives the agent's crash (the page cache outlives a process),
// which is all that state describing processes on this machine needs.
enum class Durability { machine_crash, process_crash };
Status write_atomic(const std::string& path, std::string_view data, mode_t mode = 0644,
                    Durability durable = Durability::machine_crash);

// A file of records, each on a line of its own, appended: the latest whole
// record is the state. An append creates no file after the first one (a file
// creation costs about 1 ms of CPU on the 2-core VM of docs/benchmarks.md,
// an append microseconds). A process crash mid-write leaves a torn line,
// which readers skip; every record is written as "\n" + record + "\n", so
// the next record never joins a torn one. Past compact_bytes the file is
// rewritten (write_atomic) with the latest record alone. Survives the
// process's crash, not the machine's (no fsync). `record` holds no newline
// (JSON from dump() does not).
Status append_record(const std::string& path, std::string_view record, mode_t mode = 0644,
                     std::size_t compact_bytes = 64 * 1024);
// The file's records, latest first (torn ones included: the caller decodes);
// empty when the file cannot be read.
std::vector<std::string> read_records(const std::string& path);

// The whole file, or nullopt when it cannot be read (missing included).
std::optional<std::string> read_all(const std::string& path);

// mkdir -p.
Status make_dirs(const std::string& path);

}  // namespace cp::agent_files
