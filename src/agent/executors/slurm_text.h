// What the Slurm executor says to and reads from the Slurm CLI, as pure
// functions over text (unit tested with captured output, no Slurm needed):
// the batch script and sbatch options it submits, and the output of
// `scontrol show node|job --oneliner` and `squeue` it parses.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "model/protocol.h"

namespace cp::slurm {

// Node labels the Slurm executor reports besides kLabelGpuType.
inline constexpr std::string_view kLabelPartition = "slurm-partition";
// The Cubeplane GPU type of Slurm GPUs declared without a type ("gpu:4"):
// "gpu/untyped", submitted back as --gres=gpu:N.
inline constexpr std::string_view kUntypedGpu = "untyped";

// ------------------------------------------------------------------ scontrol

// The Key=Value pairs of one line of `scontrol show ... --oneliner`. Values
// may hold spaces (OS=Linux 6.1.0 #1 SMP ..., Reason=Not responding [...]):
// a word without '=' (or whose part before '=' is not key-like) belongs to
// the value before it.
std::map<std::string, std::string> parse_scontrol_line(std::string_view line);

struct GpuGres {
  std::string type;  // "" when Slurm has no type for them
  std::int64_t count = 0;
};
// The GPUs of a Gres= value ("gpu:a100:2(S:0-1),gpu:v100:1,mps:100",
// "gpu:4", "(null)"); other generic resources are left out.
std::vector<GpuGres> parse_gpu_gres(std::string_view gres);

struct NodeInfo {
  std::string name;
  std::int64_t cpus = 0;        // CPUTot
  std::int64_t cpus_usable = 0;  // CPUEfctv (22.05+; without specialized cores), else CPUTot
  std::int64_t real_memory_mb = 0;
  std::vector<GpuGres> gpus;
  std::string state;      // IDLE, MIXED, IDLE+DRAIN, DOWN*, ...
  std::string reason;     // Reason= without the "[user@time]" suffix
  std::vector<std::string> partitions;
  std::string kernel;     // "Linux 6.1.0-18-amd64", from OS=
  std::string version;    // slurmd's version
};
// Every node of `scontrol show node --oneliner`.
std::vector<NodeInfo> parse_nodes(std::string_view text);

// Whether a node in this state takes jobs: IDLE, MIXED, ALLOCATED or
// COMPLETING, and none of DRAIN, DOWN, FAIL, NOT_RESPONDING ('*'),
// POWERED_DOWN, MAINTENANCE, REBOOT..., INVALID_REG...
bool node_ready(std::string_view state);

// The NodeReport of a node: cpu (millicores) and memory (bytes) capacity,
// gpu/<type> counts, ready + reason from its state, labels gpu-type and
// slurm-partition (`partition` when the executor is pinned to one, else
// the node's partitions joined by ','), declared GPU devices.
NodeReport node_report(const NodeInfo& node, const std::string& partition);

// ExitCode=E:S of `scontrol show job`: the exit code, and the signal that
// ended the batch script (0 when none).
struct JobExit {
  int exit_code = 0;
  int signal = 0;
};
std::optional<JobExit> parse_job_exit(std::string_view text);

// -------------------------------------------------------------------- squeue

// The format the executor asks squeue for: id|state|reason|name (the name
// last: it is the only field that might hold a '|').
inline constexpr std::string_view kSqueueFormat = "%i|%T|%r|%j";

struct JobRow {
  std::string job_id;
  std::string state;  // PENDING, RUNNING, COMPLETED, ... (squeue %T)
  std::string reason;
  std::string name;
};
std::vector<JobRow> parse_squeue(std::string_view text);

enum class JobPhase { Pending, Running, Ended };
// PENDING, CONFIGURING, REQUEUED... -> Pending (no process yet);
// RUNNING, COMPLETING, SUSPENDED, STOPPED... -> Running;
// COMPLETED, FAILED, CANCELLED, TIMEOUT, OUT_OF_MEMORY, NODE_FAIL,
// PREEMPTED, BOOT_FAIL, DEADLINE, ... -> Ended. Unknown states count as
// Running: the job exists and has not said it ended.
JobPhase job_phase(std::string_view state);

// --------------------------------------------------------------------- sbatch

// The job id of `sbatch --parsable` ("123" or "123;cluster"); nullopt when
// the output is not one.
std::optional<std::string> parse_sbatch_job_id(std::string_view out);

// The resource options of one replica: --cpus-per-task (ceil of the
// millicores), --mem in MiB (rounded up), --gres=gpu:<type>:<n> per GPU
// type. Any other resource is an error: Slurm could not honour it.
Result<std::vector<std::string>> resource_args(const Resources& per_replica);

// '...' quoting for /bin/sh: safe for any bytes but NUL.
std::string shell_quote(std::string_view s);

// A path for --output/--error, where Slurm expands %j and friends.
std::string escape_filename_pattern(std::string_view path);

struct BatchScript {
  std::string attempt_id;
  int replica = 0;
  std::vector<std::string> command;                        // argv
  std::vector<std::pair<std::string, std::string>> env;     // set for the command
  std::string exit_path;                                    // "exit N" lands here
};
// The batch script of one replica. The command runs as a child of the
// script, so that its exit status is written to exit_path (temp + rename)
// where the agent finds it after slurmctld has forgotten the job; the
// script only notes TERM/INT/HUP (scancel --signal=TERM --full sends them
// to the command as well) and keeps waiting for the command.
std::string batch_script(const BatchScript& b);

}  // namespace cp::slurm
