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
};

// The gate's message: its length (4 bytes), then the spec as length-prefixed
// fields. spec_size tells from the first 4 bytes how long the whole message
// is (0: too short to tell); decode_spec refuses anything truncated or
// malformed.
std::string encode_spec(const ShimSpec& spec);
std::size_t spec_size(std::string_view head);
bool decode_spec(std::string_view bytes, ShimSpec& out);

// Everything the shim and the command need, prepared before fork().
struct ShimPlan {
  ShimSpec spec;
  std::vector<std::string> candidates;  // paths to try for argv[0]
  std::vector<char*> argv;              // into spec.argv
  std::vector<char*> envp;              // into spec.env
  std::string exit_tmp;
  std::string exec_error_prefix;  // "cubeplane: cannot execute sh: "
  int max_fd = 1024;
};
// Builds the plan in place (its pointers point into it: do not copy it after).
void prepare(ShimPlan& plan);

// Out of the agent's session, the signals the shim ignores: first thing in the shim.
void enter_shim();

// The gate has opened: forks the command, reports its pgid on report_fd,
// waits for it, kills what is left of its group, writes the exit file, _exit.
[[noreturn]] void supervise(const ShimPlan& plan, int report_fd);

}  // namespace cp::shim
