// A command run under a supervisor "shim" whose exit status outlives the
// agent (Linux only: /proc, setsid, PR_SET_PDEATHSIG, close_range).
//
//   agent ──fork──> shim: setsid(), ignores TERM/INT/HUP, chdir("/")
//                    │
//                    ├──fork──> command: setpgid(0,0) (pgid = its pid),
//                    │          stdout+stderr -> log, stdin </dev/null,
//                    │          chdir(work_dir), execve(argv, env)
//                    │
//                    ├─ waitid(command, WNOWAIT)   the command ended, not reaped:
//                    ├─ kill(-pgid, SIGKILL)       its pgid cannot be reused yet, so
//                    │                             stragglers of the group die with it
//                    ├─ waitpid(command)
//                    └─ write "<exit>.tmp", rename to "<exit>" ("exit N" | "signal N"), _exit
//
// The shim is either the small `cubeplane-shim` program (SpawnSpec::
// shim_program; posix_spawn, so nothing of the agent is copied, and the
// command is forked from a process of a few MiB), or, without one, a fork of
// the agent itself (the whole process, page tables included, twice per
// replica: about 3-4 ms a start in `cubeplane up`). The shim's code is
// shim.h's either way.
//
// The agent may die and come back at any point: the exit file tells how the
// command ended; the shim's pid plus its start time (field 22 of
// /proc/<pid>/stat) tell whether it still runs, even if the pid was reused.
// Between fork and exec (and in a forked shim) only async-signal-safe calls
// are made: everything is prepared before fork().
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/result.h"

namespace cp {

struct SpawnSpec {
  std::vector<std::string> argv;  // argv[0] is looked up in the PATH of `env` when it has no '/'
  std::vector<std::string> env;   // "NAME=value", the complete environment
  std::string work_dir;           // absolute
  std::string log_path;           // absolute; appended to
  std::string exit_path;          // absolute
  std::string shim_program;       // cubeplane-shim; "" = fork this process as the shim
  std::vector<std::string> dirs;  // made by the shim before the command (mkdir, one level each)
  // The agent's lease file and chain (shim.h): the shim stops the command
  // when that lease runs out. "" = no deadline.
  std::string lease_path;
  std::string lease_chain;
};

// cubeplane-shim beside this process's executable, when it is there and
// executable; "" otherwise (the local executor then forks itself).
std::string default_shim_program();

struct SpawnedProcess {
  int shim_pid = 0;
  int pgid = 0;  // the command's process group (= its pid); 0 until released, or when the shim could not fork it
  std::int64_t shim_start_ticks = 0;
  int go_fd = -1;      // the agent's end of the shim's start gate
  int report_fd = -1;  // read end on which the shim reports the pgid
  std::string gate_message;  // what opens the gate of cubeplane-shim: the spec
};

// Starts the shim, which then waits at a gate: the command is not forked
// until open_supervised_gate(). The caller journals the shim first, so that a
// command never runs without a journal entry that a restarted agent can
// adopt. (Timeline: fork shim -> journal {shim pid} -> release -> the shim
// forks the command. An agent dying before the release closes the gate's
// pipe; the shim then exits without running anything and without an exit
// file, and the replica is Lost, which is true: it never ran.)
Result<SpawnedProcess> spawn_supervised(const SpawnSpec& spec);

// Releasing a shim is two calls, so that many shims can be let go at once
// and fork their commands side by side: open the gate, then take the
// command's pgid when the shim reports it. Failures after the fork (command
// not found, bad work dir) end in an exit file with 127 (126: not
// executable) and a line in the log, as a shell would.
void open_supervised_gate(SpawnedProcess& process);
// Waits up to timeout_ms (-1: as long as it takes, 0: not at all) for the
// report; true once settled: `pgid` is the command's, or 0 when the shim
// ended without forking it.
bool await_supervised_pgid(SpawnedProcess& process, int timeout_ms = -1);

// The pid of the shim's child (the command, whose pid is its pgid), read from
// /proc; 0 when there is none. For adopting a shim released but not journaled.
int supervised_child(int shim_pid);

struct ProcStat {
  char state = '?';              // R, S, D, Z, X, ...
  int pgrp = 0;                  // field 5: process group
  std::int64_t cpu_ticks = 0;    // fields 14-17: utime + stime + cutime + cstime (its reaped children's too)
  std::int64_t start_ticks = 0;  // field 22: start time in clock ticks after boot
  std::int64_t rss_pages = 0;    // field 24: resident set
};
std::optional<ProcStat> read_proc_stat(int pid);

// CPU time and resident memory of the live processes of some process
// groups, from one walk over /proc. The CPU time of a group only grows
// while its processes live and are reaped inside it; a member reaped by a
// parent outside the group takes its time along (a reading may then go
// down: callers clamp).
struct GroupUsage {
  std::int64_t cpu_ticks = 0;
  std::int64_t rss_bytes = 0;
  int processes = 0;
};
std::map<int, GroupUsage> read_group_usage(const std::set<int>& pgids);
std::int64_t clock_ticks_per_second();

// Whether the process `pid` that started at `start_ticks` still runs. Reaps
// it when it is a zombie child of ours.
bool supervised_alive(int pid, std::int64_t start_ticks);

struct ExitRecord {
  bool signaled = false;
  int number = 0;  // exit code, or signal number
  bool fenced = false;  // the shim stopped it because the agent's lease ran out
  // Exit code as a shell reports it: N, or 128+N for "killed by signal N".
  int exit_code() const { return signaled ? 128 + number : number; }
  std::string text() const;  // "exit 3", "signal 9", "fenced signal 15"
};
// Parses "exit N" / "signal N", either after "fenced " (trailing newline allowed).
std::optional<ExitRecord> parse_exit_record(std::string_view text);
std::optional<ExitRecord> read_exit_file(const std::string& path);

// kill(-pgid, sig); false when the group is gone (ESRCH) or pgid <= 1.
bool signal_group(int pgid, int sig);

// Whether a live process of group `pgid` has `marker` ("NAME=value") in its
// environment: proof that the group is still the one we started, for the
// case where its supervisor is gone and the pgid alone proves nothing.
bool group_has_marker(int pgid, std::string_view marker);
// The process groups of the live processes with `marker` in their
// environment. A walk over all of /proc: for a replica whose pgid was never
// recorded.
std::set<int> groups_with_marker(std::string_view marker);

}  // namespace cp
