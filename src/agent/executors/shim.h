// The supervisor shim's own code (supervised_process.h draws the picture):
// what runs in the shim process, both when the agent forks it and when it is
// the small `cubeplane-shim` program (src/shim_main.cpp) that the agent
// starts with posix_spawn. Depends on libc only, so that program stays small
// and starts in about a millisecond; the agent, a server in the same
// process, can be hundreds of MiB, and forking it twice per replica (the
// shim, then the command from the shim) was most of a short task's start.
//
// Between fork and exec, and in a forked shim, only async-signal-safe calls
// are made: ShimPlan holds everything, built before fork().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace cp::shim {

// The fds of the exec'd shim: the agent dup2s its pipe ends onto them.
inline constexpr int kReportFd = 3;  // write end: the command's pgid (an int), or 0 when it could not fork
inline constexpr int kGateFd = 4;    // read end: the spec (encode_spec); EOF before all of it = do not run

struct ShimSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of `env` when it has no '/'
  std::vector<std::string> env;   // "NAME=value", the complete environment
  std::string work_dir;
  std::string log_path;
  std::string exit_path;
  // Made (one level each, an existing one is fine) before the command is
  // forked: its work and checkpoint directories. A directory costs about as
  // much as a file to create, and here it is off the agent's path.
  std::vector<std::string> dirs;
  // The agent's lease file and the lease chain this replica runs under
  // (below). Empty: no deadline (the replica runs until it ends).
  std::string lease_path;
  std::string lease_chain;
};

// The gate's message: its length (4 bytes), then the spec as length-prefixed
// fields. spec_size tells from the first 4 bytes how long the whole message
// is (0: too short to tell); decode_spec refuses anything truncated or
// malformed.
std::string encode_spec(const ShimSpec& spec);
std::size_t spec_size(std::string_view head);
bool decode_spec(std::string_view bytes, ShimSpec& out);

// ---- The agent's lease, as the shim reads it (DESIGN.md "Fencing and outages")
//
// <data>/lease.json holds one record of a fixed size, overwritten in place
// by the agent (no new blocks: it is written on a full disk too) and read by
// every shim of the agent's replicas:
//
//   {"version":1,"boot_id":"<36>","chain":"<16 hex>","deadline_ms":<20>,
//    "grace_ms":<10>,"ttl_s":<10>,"check":"<16 hex>"}\n      (numbers space-padded)
//
// deadline_ms is CLOCK_BOOTTIME in milliseconds (wall-clock steps do not move
// it, suspend does not stop it), valid only in the boot boot_id names; check
// is FNV-1a 64 of everything before ',"check"', so that a read torn by a
// concurrent write is told from a record. A chain is one unbroken run of
// leases: the agent starts a new one whenever it takes a lease after the old
// one ran out (a restart too late, a fence), so that a replica of an old
// chain never counts a later extension as its own. A shim stops its command
// (SIGTERM, grace_ms, SIGKILL) once the record is missing, unreadable, of
// another boot or chain, or past its deadline.
inline constexpr std::size_t kBootIdSize = 36;
inline constexpr std::size_t kChainSize = 16;

struct LeaseRecord {
  char boot_id[kBootIdSize + 1] = {};
  char chain[kChainSize + 1] = {};
  std::int64_t deadline_ms = 0;  // CLOCK_BOOTTIME
  std::int64_t grace_ms = 0;     // SIGTERM to SIGKILL, when the shim stops its command
  std::int64_t ttl_s = 0;        // the server's lease TTL when it was written (for a restarted agent)
};

// The record's text (always kLeaseRecordSize bytes); "" when boot_id or
// chain is not of its fixed size.
std::string encode_lease(const LeaseRecord& lease);
inline constexpr std::size_t kLeaseRecordSize = 193;
// Async-signal-safe: parses and checks a record (false: torn, truncated, malformed).
bool parse_lease(const char* text, std::size_t size, LeaseRecord& out);
// Async-signal-safe: reads and parses the file, reading again (up to a few
// times, 1 ms apart) while a concurrent write tears it. False when missing
// or unreadable.
bool read_lease(const char* path, LeaseRecord& out);
// Async-signal-safe: CLOCK_BOOTTIME in milliseconds.
std::int64_t boottime_ms();
// Async-signal-safe: this boot's id (/proc/sys/kernel/random/boot_id) into
// out (kBootIdSize + 1 bytes); false when unreadable.
bool read_boot_id(char* out);

// Everything the shim and the command need, prepared before fork().
struct ShimPlan {
  ShimSpec spec;
  std::vector<std::string> candidates;  // paths to try for argv[0]
  std::vector<char*> argv;              // into spec.argv
  std::vector<char*> envp;              // into spec.env
  std::string exit_tmp;
  std::string exec_error_prefix;  // "cubeplane: cannot execute sh: "
  int max_fd = 1024;
  bool leased = false;                // spec.lease_path is set: the command runs under the agent's lease
  char boot_id[kBootIdSize + 1] = {};  // this boot's, read by prepare(); "" = unknown (every lease reads as passed)
};
// Builds the plan in place (its pointers point into it: do not copy it after).
void prepare(ShimPlan& plan);

// Out of the agent's session, the signals the shim ignores: first thing in the shim.
void enter_shim();

// The gate has opened: forks the command, reports its pgid on report_fd,
// waits for it, kills what is left of its group, writes the exit file, _exit.
// Under a lease it also holds the lease's deadline: when it passes, the
// command's group is stopped (SIGTERM, the lease's grace, SIGKILL), a line
// says why in the log, and the exit file reads "fenced exit N" / "fenced
// signal N". A lease that has already run out when the gate opens runs
// nothing ("fenced exit 127").
[[noreturn]] void supervise(const ShimPlan& plan, int report_fd);

}  // namespace cp::shim
