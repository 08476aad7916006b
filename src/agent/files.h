// Small file helpers for the agent's on-disk state (journal, credential).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

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

// The whole file, or nullopt when it cannot be read (missing included).
std::optional<std::string> read_all(const std::string& path);

// mkdir -p.
Status make_dirs(const std::string& path);

}  // namespace cp::agent_files
