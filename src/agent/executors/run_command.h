// Runs a program (an engine's CLI: sbatch, squeue, scontrol...) and collects
// what it says. The argv goes to the program as is, never through a shell,
// so user data inside it (a job name, a path) cannot be interpreted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"

namespace cp {

struct CommandSpec {
  std::vector<std::string> argv;  // argv[0]: a path, or a name looked up in PATH
  // Set on top of this process's environment (e.g. SLURM_CONF).
  std::map<std::string, std::string> env;
  // The program, and whatever it started in its process group, is killed
  // after this long.
  std::int64_t timeout_ms = 15000;
  // Most bytes kept of each of stdout and stderr; the rest is read and dropped.
  std::size_t max_output = 8 << 20;
};

struct CommandOutput {
  int exit_code = -1;  // the program's exit code; -1 when killed by a signal
  int signal = 0;      // the signal that killed it; 0 when it exited
  bool timed_out = false;
  std::string out;
  std::string err;

  bool ok() const { return exit_code == 0 && !timed_out; }
  // What went wrong, for messages: stderr's last line, else stdout's, else
  // "exit code N" / "killed by signal N" / "timed out after N ms".
  std::string problem() const;
};

// An error only when the program could not be started at all (not found,
// not executable); its own failures come back as a CommandOutput.
Result<CommandOutput> run_command(const CommandSpec& spec);

}  // namespace cp
