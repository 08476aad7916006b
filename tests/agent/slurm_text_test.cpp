// What the Slurm executor writes for and reads from the Slurm CLI, on
// captured text (no Slurm needed), and the subprocess runner it uses.
#include "agent/executors/slurm_text.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "agent/executors/run_command.h"
#include "agent/executors/supervised_process.h"
#include "test_util.h"

namespace cp {
namespace {

using testing::slurp;
using testing::TempDir;

// `scontrol show node --oneliner` of the test cluster (slurm-wlm 22.05).
constexpr const char* kIdleNode =
    "NodeName=vm Arch=x86_64 CoresPerSocket=1  CPUAlloc=0 CPUEfctv=8 CPUTot=8 CPULoad=4.26 "
    "AvailableFeatures=(null) ActiveFeatures=(null) Gres=gpu:a100:2 NodeAddr=127.0.0.1 NodeHostName=vm "
    "Version=22.05.8 OS=Linux 6.18.44-fc-v782 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=8192 AllocMem=0 FreeMem=17511 "
    "Sockets=8 Boards=1 State=IDLE ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A Partitions=test  "
    "BootTime=2026-11-30T12:41:30 SlurmdStartTime=2026-12-01T04:38:53 LastBusyTime=2026-12-01T04:38:53 "
    "CfgTRES=cpu=8,mem=8G,billing=8 AllocTRES= CapWatts=n/a CurrentWatts=0 AveWatts=0 ExtSensorsJoules=n/s "
    "ExtSensorsWatts=0 ExtSensorsTemp=n/s\n";
// A drained node that stopped answering, with specialized cores and
// socket-bound GPUs of two types.
constexpr const char* kDrainedNode =
    "NodeName=gpu-07 Arch=x86_64 CoresPerSocket=32 CPUAlloc=0 CPUEfctv=60 CPUTot=64 CPULoad=0.00 "
    "Gres=gpu:h100:4(S:0-1),gpu:l4:2(S:1) NodeAddr=gpu-07 NodeHostName=gpu-07 Version=23.02.7 "
    "OS=Linux 5.15.0-91-generic #101-Ubuntu SMP Tue Nov 14 13:30:08 UTC 2023 RealMemory=515000 "
    "State=IDLE+DRAIN* Partitions=gpu,debug Reason=bad DIMM, replaced soon [admin@2026-11-30T10:00:00]\n";

TEST(SlurmText, ParsesNodesOfScontrol) {
  auto nodes = slurm::parse_nodes(std::string(kIdleNode) + kDrainedNode);
  ASSERT_EQ(nodes.size(), 2u);
  const auto& a = nodes[0];
  EXPECT_EQ(a.name, "vm");
  EXPECT_EQ(a.cpus, 8);
  EXPECT_EQ(a.real_memory_mb, 8192);
  ASSERT_EQ(a.gpus.size(), 1u);
  EXPECT_EQ(a.gpus[0].type, "a100");
  EXPECT_EQ(a.gpus[0].count, 2);
  EXPECT_EQ(a.state, "IDLE");
  EXPECT_EQ(a.partitions, std::vector<std::string>{"test"});
  EXPECT_EQ(a.kernel, "Linux 6.18.44-fc-v782");
  EXPECT_EQ(a.version, "22.05.8");

  const auto& b = nodes[1];
  EXPECT_EQ(b.cpus, 64);
  EXPECT_EQ(b.cpus_usable, 60);
  EXPECT_EQ(b.reason, "bad DIMM, replaced soon");
  EXPECT_EQ(b.state, "IDLE+DRAIN*");
  EXPECT_EQ(b.partitions, (std::vector<std::string>{"gpu", "debug"}));
  ASSERT_EQ(b.gpus.size(), 2u);
  EXPECT_EQ(b.gpus[0].type, "h100");
  EXPECT_EQ(b.gpus[0].count, 4);
  EXPECT_EQ(b.gpus[1].type, "l4");
  EXPECT_EQ(b.gpus[1].count, 2);
}

TEST(SlurmText, NodeReportCarriesCapacityLabelsAndReadiness) {
  auto nodes = slurm::parse_nodes(std::string(kIdleNode) + kDrainedNode);
  ASSERT_EQ(nodes.size(), 2u);
  NodeReport a = slurm::node_report(nodes[0], "");
  EXPECT_EQ(a.name, "vm");
  EXPECT_EQ(a.capacity.cpu_milli(), 8000);
  EXPECT_EQ(a.capacity.memory_bytes(), std::int64_t{8192} * 1024 * 1024);
  EXPECT_EQ(a.capacity.get("gpu/a100"), 2);
  EXPECT_TRUE(a.ready);
  EXPECT_EQ(a.labels.at(std::string(kLabelGpuType)), "a100");
  EXPECT_EQ(a.labels.at(std::string(slurm::kLabelPartition)), "test");
  ASSERT_EQ(a.gpus.size(), 2u);
  EXPECT_EQ(a.gpus[1].index, 1);
  EXPECT_EQ(a.gpus[1].model, "a100");
  EXPECT_EQ(a.gpus[1].utilization, -1);
  EXPECT_EQ(a.facts.runtime, "slurm 22.05.8");

  NodeReport b = slurm::node_report(nodes[1], "gpu");
  EXPECT_FALSE(b.ready);
  EXPECT_EQ(b.reason, "bad DIMM, replaced soon (IDLE+DRAIN*)");
  EXPECT_EQ(b.capacity.cpu_milli(), 64000);
  EXPECT_EQ(b.allocatable.cpu_milli(), 60000);  // specialized cores are not for jobs
  EXPECT_EQ(b.capacity.get("gpu/h100"), 4);
  EXPECT_EQ(b.capacity.get("gpu/l4"), 2);
  EXPECT_EQ(b.labels.at(std::string(slurm::kLabelPartition)), "gpu");
  EXPECT_EQ(b.gpus.size(), 6u);
}

TEST(SlurmText, NodeStatesThatTakeJobs) {
  for (const char* s : {"IDLE", "MIXED", "ALLOCATED", "MIXED+COMPLETING", "IDLE+CLOUD", "idle"}) {
    EXPECT_TRUE(slurm::node_ready(s)) << s;
  }
  for (const char* s : {"DOWN", "DOWN*", "IDLE*", "IDLE+DRAIN", "MIXED+DRAIN", "ALLOCATED+DRAINING", "DRAINED",
                        "IDLE+NOT_RESPONDING", "IDLE+POWERED_DOWN", "IDLE+MAINTENANCE", "IDLE+REBOOT_REQUESTED",
                        "FUTURE", "UNKNOWN", "", "IDLE+FAIL"}) {
    EXPECT_FALSE(slurm::node_ready(s)) << s;
  }
}

TEST(SlurmText, GpuGresForms) {
  auto g = slurm::parse_gpu_gres("gpu:4");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].type, "");
  EXPECT_EQ(g[0].count, 4);
  EXPECT_TRUE(slurm::parse_gpu_gres("(null)").empty());
  EXPECT_TRUE(slurm::parse_gpu_gres("mps:100,shard:8").empty());
  g = slurm::parse_gpu_gres("gpu:a100:no_consume:2,mps:200,gpu:a100:1(S:0,1)");
  ASSERT_EQ(g.size(), 1u);
  EXPECT_EQ(g[0].type, "a100");
  EXPECT_EQ(g[0].count, 3);
  // Untyped GPUs become gpu/untyped, and go back to Slurm as gpu:N.
  auto nodes = slurm::parse_nodes("NodeName=n1 CPUTot=4 RealMemory=1000 Gres=gpu:2 State=MIXED Partitions=p\n");
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(slurm::node_report(nodes[0], "").capacity.get("gpu/untyped"), 2);
  auto args = slurm::resource_args(Resources::parse_or_die("gpu/untyped:2"));
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args, std::vector<std::string>{"--gres=gpu:2"});
}

TEST(SlurmText, ScontrolValuesWithSpacesAndKeyLikeWords) {
  auto kv = slurm::parse_scontrol_line(
      "JobId=42 JobName=cp_t.1_r0 JobState=FAILED Reason=NonZeroExitCode ExitCode=3:0 AllocNode:Sid=head:123 "
      "CPUs/Task=2 Command=/data/attempts/t.1/r0.sh TresPerNode=gres:gpu:a100:1 Comment=a b=c d");
  EXPECT_EQ(kv["JobId"], "42");
  EXPECT_EQ(kv["JobState"], "FAILED");
  EXPECT_EQ(kv["AllocNode:Sid"], "head:123");
  EXPECT_EQ(kv["CPUs/Task"], "2");
  EXPECT_EQ(kv["TresPerNode"], "gres:gpu:a100:1");
  EXPECT_EQ(kv["Comment"], "a");  // "b=c" looks like a key: the limit of the format
  auto ex = slurm::parse_job_exit(kv["ExitCode"]);
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->exit_code, 3);
  EXPECT_EQ(ex->signal, 0);
  ex = slurm::parse_job_exit("0:9");
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->signal, 9);
  EXPECT_FALSE(slurm::parse_job_exit("n/a"));
}

TEST(SlurmText, SqueueRowsAndPhases) {
  auto rows = slurm::parse_squeue(
      "17|PENDING|JobHeldUser|cp_t.1_r0\n"
      "18|RUNNING|None|cp_t.2_r1\n"
      "\n"
      "19|COMPLETED|None|odd|name\n"
      "garbage\n");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].job_id, "17");
  EXPECT_EQ(rows[0].reason, "JobHeldUser");
  EXPECT_EQ(rows[1].name, "cp_t.2_r1");
  EXPECT_EQ(rows[2].name, "odd|name");
  using P = slurm::JobPhase;
  EXPECT_EQ(slurm::job_phase("PENDING"), P::Pending);
  EXPECT_EQ(slurm::job_phase("CONFIGURING"), P::Pending);
  EXPECT_EQ(slurm::job_phase("REQUEUED"), P::Pending);
  EXPECT_EQ(slurm::job_phase("RUNNING"), P::Running);
  EXPECT_EQ(slurm::job_phase("COMPLETING"), P::Running);
  EXPECT_EQ(slurm::job_phase("SUSPENDED"), P::Running);
  for (const char* s : {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED",
                        "BOOT_FAIL", "DEADLINE", "CANCELLED by 0"}) {
    EXPECT_EQ(slurm::job_phase(s), P::Ended) << s;
  }
}

TEST(SlurmText, SbatchParsableOutput) {
  EXPECT_EQ(slurm::parse_sbatch_job_id("123\n"), "123");
  EXPECT_EQ(slurm::parse_sbatch_job_id("456;cluster-a\n"), "456");
  EXPECT_EQ(slurm::parse_sbatch_job_id("sbatch: warning: something\n789\n"), "789");
  EXPECT_FALSE(slurm::parse_sbatch_job_id(""));
  EXPECT_FALSE(slurm::parse_sbatch_job_id("Submitted batch job 5"));
}

TEST(SlurmText, ResourcesBecomeSbatchOptions) {
  auto args = slurm::resource_args(Resources::parse_or_die("cpu:1500m,memory:1.5Gi,gpu/a100:2"));
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args, (std::vector<std::string>{"--cpus-per-task=2", "--mem=1536M", "--gres=gpu:a100:2"}));
  // Rounded up: Slurm must give at least what was asked.
  args = slurm::resource_args(Resources::parse_or_die("cpu:100m,memory:1000"));
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args, (std::vector<std::string>{"--cpus-per-task=1", "--mem=1M"}));
  args = slurm::resource_args(Resources::parse_or_die("gpu/a100:1,gpu/v100:3"));
  ASSERT_TRUE(args.ok());
  EXPECT_EQ(*args, std::vector<std::string>{"--gres=gpu:a100:1,gpu:v100:3"});
  EXPECT_TRUE(slurm::resource_args(Resources{})->empty());
  auto bad = slurm::resource_args(Resources::parse_or_die("cpu:1,fpga:1"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("fpga"), std::string::npos);
}

TEST(SlurmText, FilenamePatternsAreEscaped) {
  EXPECT_EQ(slurm::escape_filename_pattern("/data/100%/r0.log"), "/data/100%%/r0.log");
  EXPECT_EQ(slurm::escape_filename_pattern("/data/r0.log"), "/data/r0.log");
}

// The batch script, run by /bin/sh as Slurm would: the argv arrives intact
// whatever it holds, the environment is set, and the exit status is recorded.
TEST(SlurmText, BatchScriptRunsTheCommandVerbatimAndRecordsItsExit) {
  TempDir dir;
  slurm::BatchScript b;
  b.attempt_id = "t.1";
  b.replica = 0;
  const std::vector<std::string> tricky = {"it's", "$HOME", "`id`", "a b", "line1\nline2", "\\", "*", ""};
  b.command = {"sh", "-c", "for a in \"$@\"; do printf '<%s>' \"$a\"; done; printf '%s|%s' \"$X_SPACE\" \"$Y\"; exit 3",
               "argv0"};
  b.command.insert(b.command.end(), tricky.begin(), tricky.end());
  b.env = {{"X_SPACE", "with space, and comma"}, {"Y", "'quoted'"}};
  b.exit_path = dir.path() + "/r0.exit";
  const std::string script = dir.path() + "/r0.sh";
  std::ofstream(script) << slurm::batch_script(b);

  CommandSpec spec;
  spec.argv = {"/bin/sh", script};
  auto out = run_command(spec);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->exit_code, 3);
  std::string expected;
  for (const auto& t : tricky) expected += "<" + t + ">";
  expected += "with space, and comma|'quoted'";
  EXPECT_EQ(out->out, expected);
  auto ex = read_exit_file(b.exit_path);
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->text(), "exit 3");
  EXPECT_FALSE(std::filesystem::exists(b.exit_path + ".tmp"));
}

// TERM to the script and the command (what scancel --signal=TERM --full
// does): the command handles it, the script still records how it ended.
TEST(SlurmText, BatchScriptSurvivesTermAndRecordsTheCommandsExit) {
  TempDir dir;
  slurm::BatchScript b;
  b.attempt_id = "t.1";
  b.command = {"sh", "-c", "trap 'echo term; exit 7' TERM; echo $$ > " + dir.path() + "/pid; while :; do sleep 0.05; done"};
  b.exit_path = dir.path() + "/r0.exit";
  const std::string script = dir.path() + "/r0.sh";
  std::ofstream(script) << slurm::batch_script(b);
  // setsid: the script and the command in a group of their own, signalled together.
  CommandSpec spec;
  spec.argv = {"sh", "-c", "sh " + script + " & s=$!; while [ ! -s " + dir.path() +
                               "/pid ]; do sleep 0.02; done; kill -TERM $s $(cat " + dir.path() + "/pid); wait $s"};
  auto out = run_command(spec);
  ASSERT_TRUE(out.ok()) << out.error().message;
  EXPECT_EQ(out->exit_code, 7) << out->out << out->err;
  EXPECT_EQ(out->out, "term\n");
  auto ex = read_exit_file(b.exit_path);
  ASSERT_TRUE(ex);
  EXPECT_EQ(ex->text(), "exit 7");
}

TEST(RunCommand, CollectsOutputAndExitCode) {
  CommandSpec spec;
  spec.argv = {"sh", "-c", "echo out; echo err >&2; echo \"$CP_X\"; exit 4"};
  spec.env["CP_X"] = "from env";
  auto r = run_command(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 4);
  EXPECT_EQ(r->out, "out\nfrom env\n");
  EXPECT_EQ(r->err, "err\n");
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->problem(), "err");
}

TEST(RunCommand, KillsWhatOutlivesItsTimeout) {
  TempDir dir;
  CommandSpec spec;
  // The child's child keeps the pipe open: the whole group must die.
  spec.argv = {"sh", "-c", "sleep 30 & echo $! > " + dir.path() + "/pid; wait"};
  spec.timeout_ms = 300;
  auto started = std::chrono::steady_clock::now();
  auto r = run_command(spec);
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->timed_out);
  EXPECT_EQ(r->problem(), "timed out");
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
  const int pid = testing::read_pid(dir.path() + "/pid");
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(testing::wait_until([&] { return testing::process_gone(pid); }, 5000));
}

TEST(RunCommand, MissingProgramIsAnError) {
  CommandSpec spec;
  spec.argv = {"/nonexistent/sbatch"};
  auto r = run_command(spec);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("/nonexistent/sbatch"), std::string::npos);
  spec.argv = {"cubeplane-no-such-program-xyz"};
  EXPECT_FALSE(run_command(spec).ok());
}

}  // namespace
}  // namespace cp
