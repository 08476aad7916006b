// The local executor against real processes. Every wait polls with a
// deadline; commands that must outlive a step block on a file the test
// creates ("go"), never on a timer.
#include "agent/executors/local_executor.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <thread>

#include "agent/executors/host_probe.h"
#include "agent/executors/shim.h"
#include "agent/executors/supervised_process.h"
#include "test_util.h"

namespace cp {
namespace {

using testing::process_gone;
using testing::read_pid;
using testing::slurp;
using testing::TempDir;
using testing::touch;
using testing::wait_until;

StartOrder order_for(const std::string& task, int number, std::vector<std::string> command) {
  StartOrder o;
  o.task_id = task;
  o.attempt_number = number;
  o.attempt_id = task + "." + std::to_string(number);
  o.epoch = number;
  o.command = std::move(command);
  o.placements = {ReplicaPlacement{0, "node-a", {}}};
  o.grace_s = 5;
  return o;
}

std::vector<std::string> sh(const std::string& script) { return {"sh", "-c", script}; }

std::optional<AttemptReport> report(LocalExecutor& ex, const std::string& id) {
  for (auto& r : ex.poll()) {
    if (r.attempt_id == id) return r;
  }
  return std::nullopt;
}

// Polls until the attempt is terminal and returns its report.
AttemptReport wait_terminal(LocalExecutor& ex, const std::string& id, int timeout_ms = 15000) {
  std::optional<AttemptReport> last;
  wait_until(
      [&] {
        last = report(ex, id);
        return last && is_terminal(last->state);
      },
      timeout_ms);
  EXPECT_TRUE(last.has_value()) << id << " is unknown";
  if (!last) return {};
  EXPECT_TRUE(is_terminal(last->state)) << id << " still " << boost::describe::enum_to_string(last->state, "?");
  return *last;
}

std::string all_logs(LocalExecutor& ex, const std::string& id, int replica = 0) {
  std::string out;
  for (const auto& p : ex.read_new_logs(1 << 20)) {
    if (p.attempt_id == id && p.replica == replica) out += p.data;
  }
  return out;
}

// Every test runs twice: with the cubeplane-shim program as the supervisor
// (what `cubeplane` uses, the program being beside it) and with a fork of
// the agent (without the program).
class LocalExecutorTest : public ::testing::TestWithParam<bool> {
 protected:
  LocalExecutorConfig config() {
    LocalExecutorConfig c;
    c.data_dir = dir_.path();
    c.nvml_library = "";
    c.shim_program = GetParam() ? CUBEPLANE_SHIM : "";
    return c;
  }
  // Leaves no process behind, whatever a test did.
  void TearDown() override {
    LocalExecutor ex(config());
    for (const auto& r : ex.poll()) {
      if (!is_terminal(r.state)) ex.stop(r.attempt_id, "cancel", 0);
    }
    wait_until([&] {
      auto rs = ex.poll();
      return std::all_of(rs.begin(), rs.end(), [](const AttemptReport& r) { return is_terminal(r.state); });
    });
  }
  std::string work(const std::string& attempt_id) { return dir_.path() + "/attempts/" + attempt_id + "/work"; }

  TempDir dir_;
};

// A failing command ends Failed with its exit code, and its output is in the log.
TEST_P(LocalExecutorTest, FailedCommandReportsExitCodeAndLog) {
  LocalExecutor ex(config());
  ASSERT_TRUE(ex.start(order_for("t-fail", 1, sh("echo hi; exit 3"))).ok());
  auto r = wait_terminal(ex, "t-fail.1");
  EXPECT_EQ(r.state, AttemptState::Failed);
  ASSERT_TRUE(r.exit_code.has_value());
  EXPECT_EQ(*r.exit_code, 3);
  EXPECT_EQ(r.message, "exited with code 3");
  EXPECT_EQ(r.epoch, 1);
  EXPECT_GT(r.finished_at, 0);
  auto pieces = ex.read_new_logs(1 << 20);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].data, "hi\n");
  EXPECT_EQ(pieces[0].offset, 0);
  EXPECT_EQ(pieces[0].task_id, "t-fail");
  EXPECT_TRUE(pieces[0].final);
}

// Each running replica's process group is sampled: CPU over the interval
// and resident memory, reported with every poll and in the final report.
// The command holds 64 MiB in a shell variable and spins on one core until
// the test creates "stop".
TEST_P(LocalExecutorTest, UseOfEachReplicaIsSampledFromItsProcessGroup) {
  auto cfg = config();
  cfg.use_sample_ms = 100;
  LocalExecutor ex(cfg);
  ASSERT_TRUE(ex.start(order_for("t-use", 1,
                                 sh("x=$(head -c 67108864 /dev/zero | tr '\\0' a); "
                                    "while [ ! -e stop ]; do :; done")))
                  .ok());
  ResourceUse live;
  ASSERT_TRUE(wait_until([&] {
    auto rep = report(ex, "t-use.1");  // polls, which samples
    EXPECT_TRUE(rep && rep->use.samples() == 0) << "only the end carries the figures";
    live = ex.use_so_far("t-use.1");
    return live.memory_mib.max >= 64 && live.samples() >= 8;
  })) << "samples: " << live.samples();
  touch(work("t-use.1") + "/stop");
  auto r = wait_terminal(ex, "t-use.1");
  EXPECT_EQ(r.state, AttemptState::Succeeded);
  EXPECT_GE(r.use.samples(), live.samples());
  EXPECT_GE(r.use.memory_mib.max, 64);
  EXPECT_LT(r.use.memory_mib.max, 512);
  // One spinning shell: about a core, if the machine lets it run; never two.
  EXPECT_GT(r.use.cpu_milli.quantile(0.95), 200);
  EXPECT_LT(r.use.cpu_milli.quantile(0.5), 1600);
  EXPECT_TRUE(r.use.gpu_util_pct.empty());  // no NVML here
  // It survives in the journal: a restarted executor reports the same.
  LocalExecutor again(cfg);
  auto adopted = report(again, "t-use.1");
  ASSERT_TRUE(adopted.has_value());
  EXPECT_EQ(adopted->use.samples(), r.use.samples());
}

// A zero exit of every replica is Succeeded with exit code 0.
TEST_P(LocalExecutorTest, SuccessfulCommand) {
  LocalExecutor ex(config());
  ASSERT_TRUE(ex.start(order_for("t-ok", 1, {"true"})).ok());
  auto r = wait_terminal(ex, "t-ok.1");
  EXPECT_EQ(r.state, AttemptState::Succeeded);
  EXPECT_EQ(r.exit_code, 0);
}

// A command killed by a signal reports 128+N and says which signal.
TEST_P(LocalExecutorTest, KilledBySignalIsReportedAsShellDoes) {
  LocalExecutor ex(config());
  ASSERT_TRUE(ex.start(order_for("t-sig", 1, sh("kill -KILL $$"))).ok());
  auto r = wait_terminal(ex, "t-sig.1");
  EXPECT_EQ(r.state, AttemptState::Failed);
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_EQ(r.message, "killed by signal 9");
}

// A command that cannot be found fails with 127 and says why in its log.
TEST_P(LocalExecutorTest, MissingCommandFailsWith127) {
  LocalExecutor ex(config());
  ASSERT_TRUE(ex.start(order_for("t-missing", 1, {"cubeplane-no-such-command"})).ok());
  auto r = wait_terminal(ex, "t-missing.1");
  EXPECT_EQ(r.state, AttemptState::Failed);
  EXPECT_EQ(r.exit_code, 127);
  EXPECT_NE(all_logs(ex, "t-missing.1").find("cannot execute cubeplane-no-such-command"), std::string::npos);
}

// Ids that cannot be directory names are refused; a bad order becomes a Failed attempt.
TEST_P(LocalExecutorTest, BadOrders) {
  LocalExecutor ex(config());
  auto bad = order_for("t-x", 1, {"true"});
  bad.attempt_id = "../escape";
  EXPECT_FALSE(ex.start(bad).ok());
  auto empty = order_for("t-empty", 1, {});
  ASSERT_TRUE(ex.start(empty).ok());
  auto r = wait_terminal(ex, "t-empty.1");
  EXPECT_EQ(r.state, AttemptState::Failed);
  EXPECT_EQ(r.message, "empty command");
}

// The orders of one sync start together: one status per order, in order;
// a refused one and a bad one do not hold up the others, a repeat is a
// no-op, and every replica of a gang runs in its own process group.
TEST_P(LocalExecutorTest, OrdersOfOneSyncStartTogether) {
  LocalExecutor ex(config());
  auto gang = order_for("t-gang", 1, sh("echo $CUBEPLANE_REPLICA > \"$CUBEPLANE_CHECKPOINT_DIR/r$CUBEPLANE_REPLICA\""));
  gang.placements = {ReplicaPlacement{0, "node-a", {}}, ReplicaPlacement{1, "node-a", {}}};
  auto refused = order_for("t-x", 1, {"true"});
  refused.attempt_id = "../escape";
  auto ok = order_for("t-batch-ok", 1, {"true"});
  auto empty = order_for("t-batch-empty", 1, {});
  auto st = ex.start_all({gang, refused, ok, empty, ok});
  ASSERT_EQ(st.size(), 5u);
  EXPECT_TRUE(st[0].ok());
  EXPECT_FALSE(st[1].ok());
  EXPECT_TRUE(st[2].ok());
  EXPECT_TRUE(st[3].ok());
  EXPECT_TRUE(st[4].ok()) << "the repeat is idempotent";
  EXPECT_EQ(wait_terminal(ex, "t-gang.1").state, AttemptState::Succeeded);
  EXPECT_EQ(wait_terminal(ex, "t-batch-ok.1").state, AttemptState::Succeeded);
  EXPECT_EQ(wait_terminal(ex, "t-batch-empty.1").message, "empty command");
  EXPECT_EQ(slurp(dir_.path() + "/checkpoints/t-gang/r0"), "0\n");
  EXPECT_EQ(slurp(dir_.path() + "/checkpoints/t-gang/r1"), "1\n");
  std::size_t reports = 0;
  for (const auto& r : ex.poll()) reports += r.attempt_id == "t-batch-ok.1";
  EXPECT_EQ(reports, 1u) << "started once";
}

// A running replica has a descriptor that becomes readable when it ends
// (the agent waits on it during a long-poll); once the end is seen, it is gone.
TEST_P(LocalExecutorTest, ARunningReplicasExitDescriptorBecomesReadableWhenItEnds) {
  LocalExecutor ex(config());
  ASSERT_TRUE(ex.start(order_for("t-fd", 1, sh("while [ ! -f go ]; do sleep 0.01; done"))).ok());
  auto fds = ex.exit_fds();
  ASSERT_EQ(fds.size(), 1u);
  pollfd p{fds[0], POLLIN, 0};
  EXPECT_EQ(::poll(&p, 1, 0), 0) << "still running";
  touch(work("t-fd.1") + "/go");
  EXPECT_EQ(::poll(&p, 1, 15000), 1) << "readable once the shim is gone";
  EXPECT_EQ(wait_terminal(ex, "t-fd.1").state, AttemptState::Succeeded);
  EXPECT_TRUE(ex.exit_fds().empty());
}

// Each replica sees the platform's variables; attempt 2 of a task resumes in the
// same checkpoint directory and is told so.
TEST_P(LocalExecutorTest, EnvironmentAndSharedCheckpointDir) {
  LocalExecutor ex(config());
  auto first =
      order_for("t-env", 1, sh("env > \"$CUBEPLANE_CHECKPOINT_DIR/env.1\"; pwd > \"$CUBEPLANE_CHECKPOINT_DIR/pwd\""));
  first.placements = {ReplicaPlacement{0, "node-a", {1, 3}}};
  first.env = {{"FOO", "bar"}, {"CUDA_VISIBLE_DEVICES", "7"}};
  ASSERT_TRUE(ex.start(first).ok());
  EXPECT_EQ(wait_terminal(ex, "t-env.1").state, AttemptState::Succeeded);

  auto second = order_for("t-env", 2,
                          sh("test -f \"$CUBEPLANE_CHECKPOINT_DIR/env.1\" || exit 9; "
                             "env > \"$CUBEPLANE_CHECKPOINT_DIR/env.2\""));
  ASSERT_TRUE(ex.start(second).ok());
  auto r2 = wait_terminal(ex, "t-env.2");
  EXPECT_EQ(r2.state, AttemptState::Succeeded) << "attempt 2 did not see attempt 1's checkpoint dir";

  const std::string ckpt = dir_.path() + "/checkpoints/t-env";
  std::string env1 = slurp(ckpt + "/env.1");
  for (const char* want : {"CUDA_VISIBLE_DEVICES=1,3\n", "FOO=bar\n", "CUBEPLANE_TASK_ID=t-env\n",
                           "CUBEPLANE_ATTEMPT=1\n", "CUBEPLANE_ATTEMPT_ID=t-env.1\n", "CUBEPLANE_REPLICA=0\n",
                           "CUBEPLANE_REPLICAS=1\n", "CUBEPLANE_NODE=node-a\n", "PATH="}) {
    EXPECT_NE(env1.find(want), std::string::npos) << "missing " << want << " in\n" << env1;
  }
  EXPECT_NE(env1.find("CUBEPLANE_CHECKPOINT_DIR=" + ckpt + "\n"), std::string::npos) << env1;
  EXPECT_EQ(env1.find("CUBEPLANE_RESUME"), std::string::npos);
  EXPECT_EQ(env1.find("CUBEPLANE_RESTART_COUNT"), std::string::npos);
  EXPECT_EQ(slurp(ckpt + "/pwd"), std::filesystem::canonical(work("t-env.1")).string() + "\n");

  std::string env2 = slurp(ckpt + "/env.2");
  for (const char* want : {"CUDA_VISIBLE_DEVICES=\n", "CUBEPLANE_ATTEMPT=2\n", "CUBEPLANE_RESUME=1\n",
                           "CUBEPLANE_RESTART_COUNT=1\n", "CUBEPLANE_CHECKPOINT_DIR="}) {
    EXPECT_NE(env2.find(want), std::string::npos) << "missing " << want << " in\n" << env2;
  }
}

// stop() ends the whole process group: a child the command spawned dies too.
TEST_P(LocalExecutorTest, StopKillsTheProcessGroup) {
  LocalExecutor ex(config());
  ASSERT_TRUE(ex.start(order_for("t-stop", 1, sh("sleep 300 & echo $! > child.pid; wait"))).ok());
  int child = 0;
  ASSERT_TRUE(wait_until([&] { return (child = read_pid(work("t-stop.1") + "/child.pid")) > 0; }));
  ASSERT_FALSE(process_gone(child));
  EXPECT_EQ(report(ex, "t-stop.1")->state, AttemptState::Running);

  ex.stop("t-stop.1", "cancel", 10);
  auto r = wait_terminal(ex, "t-stop.1");
  EXPECT_EQ(r.state, AttemptState::Cancelled);
  EXPECT_EQ(r.message, "cancelled");
  EXPECT_TRUE(wait_until([&] { return process_gone(child); })) << "the command's child " << child << " survived";
}

// A command that ignores SIGTERM is SIGKILLed once the grace is over.
TEST_P(LocalExecutorTest, SigtermIgnoredIsKilledAfterGrace) {
  LocalExecutor ex(config());
  ASSERT_TRUE(ex.start(order_for("t-stubborn", 1, sh("trap '' TERM; echo ready; while :; do sleep 0.05; done"))).ok());
  ASSERT_TRUE(wait_until([&] { return slurp(dir_.path() + "/attempts/t-stubborn.1/r0.log") == "ready\n"; }));

  auto stopped_at = std::chrono::steady_clock::now();
  ex.stop("t-stubborn.1", "preempt", 1);
  EXPECT_EQ(report(ex, "t-stubborn.1")->state, AttemptState::Stopping);
  auto r = wait_terminal(ex, "t-stubborn.1");
  auto took = std::chrono::steady_clock::now() - stopped_at;
  EXPECT_EQ(r.state, AttemptState::Preempted);
  EXPECT_EQ(r.exit_code, 137);
  EXPECT_EQ(r.message, "preempted; grace expired, killed");
  EXPECT_GE(took, std::chrono::milliseconds(900)) << "killed before the grace was over";
}

// start() of an attempt it already runs is a no-op: one process, not two.
TEST_P(LocalExecutorTest, StartTwiceRunsOnce) {
  LocalExecutor ex(config());
  auto o = order_for("t-twice", 1,
                     sh("echo started >> \"$CUBEPLANE_CHECKPOINT_DIR/count\"; "
                        "while [ ! -f go ]; do sleep 0.02; done"));
  ASSERT_TRUE(ex.start(o).ok());
  auto groups = ex.process_groups("t-twice.1");
  ASSERT_TRUE(ex.start(o).ok());
  EXPECT_EQ(ex.process_groups("t-twice.1"), groups);
  EXPECT_EQ(ex.poll().size(), 1u);
  touch(work("t-twice.1") + "/go");
  EXPECT_EQ(wait_terminal(ex, "t-twice.1").state, AttemptState::Succeeded);
  ASSERT_TRUE(ex.start(o).ok());  // even after it ended
  EXPECT_EQ(report(ex, "t-twice.1")->state, AttemptState::Succeeded);
  EXPECT_EQ(slurp(dir_.path() + "/checkpoints/t-twice/count"), "started\n");
}

// A new executor on the same data dir adopts a running attempt (the agent
// died, its processes did not) and reports its end; it does not rerun it.
TEST_P(LocalExecutorTest, AdoptsRunningAttemptAfterRestart) {
  auto o = order_for("t-adopt", 1, sh("while [ ! -f go ]; do sleep 0.02; done; echo done"));
  std::vector<int> groups;
  {
    LocalExecutor first(config());
    ASSERT_TRUE(first.start(o).ok());
    groups = first.process_groups("t-adopt.1");
  }  // "agent death": the object goes, the processes stay

  LocalExecutor second(config());
  EXPECT_EQ(second.process_groups("t-adopt.1"), groups);
  EXPECT_EQ(report(second, "t-adopt.1")->state, AttemptState::Running);
  ASSERT_TRUE(second.start(o).ok());  // the server resends the order: still one process
  EXPECT_EQ(second.process_groups("t-adopt.1"), groups);

  touch(work("t-adopt.1") + "/go");
  auto r = wait_terminal(second, "t-adopt.1");
  EXPECT_EQ(r.state, AttemptState::Succeeded);
  EXPECT_EQ(all_logs(second, "t-adopt.1"), "done\n");
}

// An attempt that ended while no executor was around is found finished.
TEST_P(LocalExecutorTest, FindsAttemptThatEndedWhileAway) {
  auto o = order_for("t-away", 1, sh("while [ ! -f go ]; do sleep 0.02; done; exit 5"));
  {
    LocalExecutor first(config());
    ASSERT_TRUE(first.start(o).ok());
  }
  touch(work("t-away.1") + "/go");
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(dir_.path() + "/attempts/t-away.1/r0.exit"); }));
  LocalExecutor second(config());
  auto r = wait_terminal(second, "t-away.1");
  EXPECT_EQ(r.state, AttemptState::Failed);
  EXPECT_EQ(r.exit_code, 5);
}

// A journaled replica whose supervisor is gone and left no exit file is
// lost (the server runs the task again), and what is left of its process group is killed (no orphans).
TEST_P(LocalExecutorTest, ReplicaGoneWithoutExitFileIsLost) {
  auto o = order_for("t-lost", 1, sh("sleep 300 & echo $! > child.pid; wait"));
  {
    LocalExecutor first(config());
    ASSERT_TRUE(first.start(o).ok());
  }
  int child = 0;
  ASSERT_TRUE(wait_until([&] { return (child = read_pid(work("t-lost.1") + "/child.pid")) > 0; }));
  auto journal = LocalExecutor::read_journal(dir_.path() + "/attempts/t-lost.1/journal.json");
  ASSERT_TRUE(journal.ok());
  ASSERT_EQ(journal->replicas.size(), 1u);
  const int shim = journal->replicas[0].shim_pid;
  const int leader = journal->replicas[0].pgid;
  ASSERT_GT(shim, 0);
  ASSERT_EQ(::kill(shim, SIGKILL), 0);  // the supervisor dies; the leader follows (PR_SET_PDEATHSIG)
  ASSERT_TRUE(wait_until([&] { return process_gone(shim) && process_gone(leader); }));
  ASSERT_FALSE(process_gone(child)) << "the leader's child is expected to outlive it";

  LocalExecutor second(config());
  auto r = wait_terminal(second, "t-lost.1");
  EXPECT_EQ(r.state, AttemptState::Lost);
  EXPECT_FALSE(r.exit_code.has_value());
  EXPECT_EQ(r.message, "lost: agent restarted and the process is gone");
  EXPECT_TRUE(wait_until([&] { return process_gone(child); })) << "orphan " << child << " left running";
}

// The agent died after releasing the shim but before it took the command's
// pgid: the journal has none. When the shim dies too, the command's
// children are found by the attempt id in their environment, and killed.
TEST_P(LocalExecutorTest, OrphanOfAReplicaWithoutAJournaledPgidIsFound) {
  // The attempt id is the marker looked for in every process: one per variant (CTest runs them side by side).
  const std::string task = GetParam() ? "t-nopg-prog" : "t-nopg-fork";
  auto o = order_for(task, 1, sh("sleep 300 & echo $! > child.pid; wait"));
  {
    LocalExecutor first(config());
    ASSERT_TRUE(first.start(o).ok());
  }
  int child = 0;
  ASSERT_TRUE(wait_until([&] { return (child = read_pid(work(task + ".1") + "/child.pid")) > 0; }));
  const std::string journal_path = dir_.path() + "/attempts/" + task + ".1/journal.json";
  auto journal = LocalExecutor::read_journal(journal_path);
  ASSERT_TRUE(journal.ok());
  const int shim = journal->replicas.at(0).shim_pid;
  journal->replicas[0].pgid = 0;
  {
    std::ofstream out(journal_path, std::ios::app);  // as the agent appends, a torn line first
    out << "{\"version\":1,\"order\":{\"attem\n" << dump(to_json(*journal)) << "\n";
  }
  ASSERT_EQ(::kill(shim, SIGKILL), 0);
  ASSERT_TRUE(wait_until([&] { return process_gone(shim); }));
  ASSERT_FALSE(process_gone(child));

  LocalExecutor second(config());
  EXPECT_EQ(wait_terminal(second, task + ".1").state, AttemptState::Lost);
  EXPECT_TRUE(wait_until([&] { return process_gone(child); })) << "orphan " << child << " left running";
}

// A stop that comes right after the start, before any poll took the pgid,
// still reaches the command.
TEST_P(LocalExecutorTest, StopRightAfterStartReachesTheCommand) {
  LocalExecutor ex(config());
  ASSERT_TRUE(ex.start(order_for("t-quick", 1, sh("exec sleep 300"))).ok());
  ex.stop("t-quick.1", "cancel", 30);
  auto r = wait_terminal(ex, "t-quick.1");
  EXPECT_EQ(r.state, AttemptState::Cancelled);
  EXPECT_EQ(r.exit_code, 128 + SIGTERM) << r.message;
}

// Gang semantics: when one replica fails, its siblings are stopped and the
// attempt reports the first failure.
TEST_P(LocalExecutorTest, GangFailureStopsSiblings) {
  LocalExecutor ex(config());
  auto o = order_for("t-gang", 1,
                     sh("if [ \"$CUBEPLANE_REPLICA\" = 1 ]; then "
                        "  while [ ! -f sleeper.0 ]; do sleep 0.02; done; exit 4; "
                        "fi; "
                        // Written whole, then renamed: replica 1 must not see the file before the pid is in it.
                        "sleep 300 & echo $! > sleeper.tmp; mv sleeper.tmp sleeper.$CUBEPLANE_REPLICA; wait"));
  o.placements = {ReplicaPlacement{0, "node-a", {0}}, ReplicaPlacement{1, "node-b", {0}}};
  ASSERT_TRUE(ex.start(o).ok());
  auto r = wait_terminal(ex, "t-gang.1");
  EXPECT_EQ(r.state, AttemptState::Failed);
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_EQ(r.message, "replica 1: exited with code 4");
  int sleeper = read_pid(work("t-gang.1") + "/sleeper.0");
  ASSERT_GT(sleeper, 0);
  EXPECT_TRUE(wait_until([&] { return process_gone(sleeper); })) << "replica 0's sleep survived";
}

// Logs are read from the last shipped offset; an acked attempt stays until
// its logs are shipped, then its directory goes and a late start is ignored.
TEST_P(LocalExecutorTest, LogOffsetsAndForget) {
  LocalExecutor ex(config());
  auto o = order_for("t-logs", 1, sh("printf 'one\\n'; while [ ! -f go ]; do sleep 0.02; done; printf 'two\\n'"));
  ASSERT_TRUE(ex.start(o).ok());
  std::vector<LogPiece> pieces;
  ASSERT_TRUE(wait_until([&] { return !(pieces = ex.read_new_logs(1 << 20)).empty(); }));
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].data, "one\n");
  EXPECT_FALSE(pieces[0].final);
  EXPECT_EQ(ex.read_new_logs(1 << 20).size(), 1u) << "not confirmed yet: read again from offset 0";
  ex.logs_shipped("t-logs.1", 0, 4);
  EXPECT_TRUE(ex.read_new_logs(1 << 20).empty());

  ex.forget("t-logs.1");  // not terminal: ignored
  EXPECT_EQ(ex.poll().size(), 1u);

  touch(work("t-logs.1") + "/go");
  EXPECT_EQ(wait_terminal(ex, "t-logs.1").state, AttemptState::Succeeded);
  ex.forget("t-logs.1");
  EXPECT_TRUE(ex.poll().empty());
  pieces = ex.read_new_logs(1 << 20);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].offset, 4);
  EXPECT_EQ(pieces[0].data, "two\n");
  EXPECT_TRUE(pieces[0].final);
  EXPECT_TRUE(std::filesystem::exists(ex.attempt_dir("t-logs.1")));
  ex.logs_shipped("t-logs.1", 0, 8);
  EXPECT_FALSE(std::filesystem::exists(ex.attempt_dir("t-logs.1")));
  ASSERT_TRUE(ex.start(o).ok());
  EXPECT_TRUE(ex.poll().empty()) << "a forgotten attempt was started again";
}

// Read sizes are bounded by the chunk size and the caller's budget.
TEST_P(LocalExecutorTest, LogChunksAreBounded) {
  auto c = config();
  c.log_chunk_bytes = 1000;
  LocalExecutor ex(c);
  ASSERT_TRUE(ex.start(order_for("t-big", 1, sh("head -c 5000 /dev/zero | tr '\\0' x"))).ok());
  wait_terminal(ex, "t-big.1");
  auto pieces = ex.read_new_logs(1 << 20);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].data.size(), 1000u);
  EXPECT_FALSE(pieces[0].final);
  EXPECT_EQ(ex.read_new_logs(300)[0].data.size(), 300u);
  ex.logs_shipped("t-big.1", 0, 4500);
  pieces = ex.read_new_logs(1 << 20);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].data.size(), 500u);
  EXPECT_TRUE(pieces[0].final);
}

// Declared nodes: the demo fleet of two 4-GPU nodes on one machine.
TEST_P(LocalExecutorTest, InventoryOfDeclaredNodes) {
  auto c = config();
  for (const char* name : {"gpu-node-1", "gpu-node-2"}) {
    DeclaredNode n;
    n.name = name;
    n.labels = {{"pool", "demo"}};
    n.cpu_milli = 16000;
    n.memory_bytes = std::int64_t{64} << 30;
    n.gpus = {"nvidia-a100-80gb", 4, std::int64_t{80} << 30};
    c.nodes.push_back(n);
  }
  LocalExecutor ex(c);
  auto nodes = ex.inventory();
  ASSERT_EQ(nodes.size(), 2u);
  const auto& n = nodes[1];
  EXPECT_EQ(n.name, "gpu-node-2");
  EXPECT_EQ(n.capacity.get("gpu/nvidia-a100-80gb"), 4);
  EXPECT_EQ(n.capacity.cpu_milli(), 16000);
  EXPECT_EQ(n.capacity.memory_bytes(), std::int64_t{64} << 30);
  EXPECT_EQ(n.allocatable, n.capacity);
  EXPECT_EQ(n.labels.at("gpu-type"), "nvidia-a100-80gb");
  EXPECT_EQ(n.labels.at("pool"), "demo");
  ASSERT_EQ(n.gpus.size(), 4u);
  EXPECT_EQ(n.gpus[3].index, 3);
  EXPECT_EQ(n.gpus[3].uuid, "declared-gpu-node-2-3");
  EXPECT_EQ(n.gpus[3].model, "nvidia-a100-80gb");
  EXPECT_EQ(n.facts.runtime, "process");
}

// Undeclared: this machine as one node, named after the host.
TEST_P(LocalExecutorTest, InventoryOfThisMachine) {
  LocalExecutor ex(config());
  auto nodes = ex.inventory();
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].name, host_name());
  EXPECT_GE(nodes[0].capacity.cpu_milli(), 1000);
  EXPECT_GT(nodes[0].capacity.memory_bytes(), 0);
  EXPECT_TRUE(nodes[0].gpus.empty());
  EXPECT_EQ(nodes[0].facts.runtime, "process");
  EXPECT_EQ(nodes[0].facts.kernel.rfind("Linux ", 0), 0u) << nodes[0].facts.kernel;
  EXPECT_TRUE(ex.engine().ok);
}

TEST(HostProbe, GpuTypeFromName) {
  EXPECT_EQ(gpu_type_from_name("NVIDIA A100-SXM4-80GB"), "nvidia-a100-sxm4-80gb");
  EXPECT_EQ(gpu_type_from_name("NVIDIA H200"), "nvidia-h200");
  EXPECT_EQ(gpu_type_from_name("  Tesla V100  "), "tesla-v100");
  EXPECT_EQ(gpu_type_from_name(""), "unknown");
}

TEST(HostProbe, MissingNvmlIsNormal) {
  Nvml nvml("libcubeplane-no-such-nvml.so.1");
  EXPECT_FALSE(nvml.available());
  EXPECT_EQ(nvml.problem(), "not installed");
  EXPECT_TRUE(nvml.devices().empty());
}

// ---- the agent's lease, held by the shims (executors/shim.h)

std::string this_boot() {
  char b[shim::kBootIdSize + 1];
  EXPECT_TRUE(shim::read_boot_id(b));
  return b;
}

constexpr const char* kChainA = "aaaaaaaaaaaaaaaa";
constexpr const char* kChainB = "bbbbbbbbbbbbbbbb";

// Writes the lease record as the agent does: in place, one write.
void write_lease(const std::string& path, const std::string& chain, Millis deadline_ms, Millis grace_ms = 1000,
                 const std::string& boot = this_boot()) {
  shim::LeaseRecord r;
  std::snprintf(r.boot_id, sizeof r.boot_id, "%s", boot.c_str());
  std::snprintf(r.chain, sizeof r.chain, "%s", chain.c_str());
  r.deadline_ms = deadline_ms;
  r.grace_ms = grace_ms;
  r.ttl_s = 30;
  const std::string text = shim::encode_lease(r);
  ASSERT_EQ(text.size(), shim::kLeaseRecordSize);
  std::ofstream(path, std::ios::binary | std::ios::in | std::ios::out | std::ios::trunc) << text;
}

// A command that appends a mark every 50 ms until it is stopped; its pid is in work/pid.
std::vector<std::string> marking() { return sh("echo $$ > pid; while true; do date +%s%N >> marks; sleep 0.05; done"); }

std::int64_t last_mark_ns(const std::string& marks) {
  std::istringstream in(slurp(marks));
  std::int64_t v = 0, last = 0;
  while (in >> v) last = v;
  return last;
}

std::int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

// Nobody extends the lease (the agent died): at its deadline the shim stops
// the command by itself (SIGTERM; the grace; SIGKILL for the group), says why
// in the log and in the exit file, and the attempt reads Lost.
TEST_P(LocalExecutorTest, TheShimStopsItsCommandWhenTheLeaseRunsOut) {
  const std::string lease = dir_.path() + "/lease.json";
  const Millis deadline = shim::boottime_ms() + 1500;
  write_lease(lease, kChainA, deadline, 300);
  auto o = order_for("t-lease", 1, sh("trap '' TERM; " + marking()[2]));  // ignores TERM: killed after the grace
  {
    LocalExecutor ex(config());
    ex.set_lease(lease, kChainA);
    ASSERT_TRUE(ex.start(o).ok());
    ASSERT_TRUE(wait_until([&] { return read_pid(work("t-lease.1") + "/pid") > 0; }));
  }  // the agent is gone: nothing polls, nothing extends
  const int pid = read_pid(work("t-lease.1") + "/pid");
  ASSERT_TRUE(wait_until([&] { return process_gone(pid); }, 10000)) << "the shim did not fence";
  const Millis gone_at = shim::boottime_ms();
  EXPECT_GE(gone_at, deadline + 300) << "stopped before its deadline and grace";
  EXPECT_LT(gone_at, deadline + 300 + 1500) << "stopped long after its deadline";
  const std::int64_t last = last_mark_ns(work("t-lease.1") + "/marks");
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(dir_.path() + "/attempts/t-lease.1/r0.exit"); }));
  EXPECT_EQ(slurp(dir_.path() + "/attempts/t-lease.1/r0.exit"), "fenced signal 9\n");
  EXPECT_EQ(last, last_mark_ns(work("t-lease.1") + "/marks")) << "marks after the fence";

  LocalExecutor next(config());
  next.set_lease(lease, kChainB);
  auto r = wait_terminal(next, "t-lease.1");
  EXPECT_EQ(r.state, AttemptState::Lost);
  EXPECT_NE(r.message.find("lease ran out"), std::string::npos) << r.message;
  EXPECT_NE(all_logs(next, "t-lease.1").find("the agent's lease ran out"), std::string::npos);
}

// While the agent extends the lease the command runs on; once it stops
// extending, the command ends within the grace (TERM honoured here).
TEST_P(LocalExecutorTest, AnExtendedLeaseKeepsTheCommandRunning) {
  const std::string lease = dir_.path() + "/lease.json";
  write_lease(lease, kChainA, shim::boottime_ms() + 400, 2000);
  LocalExecutor ex(config());
  ex.set_lease(lease, kChainA);
  ASSERT_TRUE(ex.start(order_for("t-extend", 1, marking())).ok());
  ASSERT_TRUE(wait_until([&] { return read_pid(work("t-extend.1") + "/pid") > 0; }));
  const int pid = read_pid(work("t-extend.1") + "/pid");
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(2000);
  while (std::chrono::steady_clock::now() < until) {
    write_lease(lease, kChainA, shim::boottime_ms() + 400, 2000);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_FALSE(process_gone(pid)) << "stopped although the lease was extended";
  EXPECT_EQ(report(ex, "t-extend.1")->state, AttemptState::Running);
  const std::int64_t stopped_extending = realtime_ns();
  auto r = wait_terminal(ex, "t-extend.1");
  EXPECT_EQ(r.state, AttemptState::Lost);
  EXPECT_EQ(slurp(dir_.path() + "/attempts/t-extend.1/r0.exit"), "fenced signal 15\n");
  EXPECT_LT(last_mark_ns(work("t-extend.1") + "/marks") - stopped_extending, 1'500'000'000LL);
}

// A record of another chain, of another boot, torn or missing is a lease
// that has run out.
TEST_P(LocalExecutorTest, ALeaseOfAnotherChainOrBootOrNoneAtAllHasRunOut) {
  const std::string lease = dir_.path() + "/lease.json";
  const std::vector<std::pair<std::string, std::function<void()>>> cases = {
      {"another chain", [&] { write_lease(lease, kChainB, shim::boottime_ms() + 60000); }},
      {"another boot",
       [&] { write_lease(lease, kChainA, shim::boottime_ms() + 60000, 0, "00000000-0000-0000-0000-000000000000"); }},
      {"torn", [&] { std::ofstream(lease, std::ios::binary | std::ios::in | std::ios::out) << "{\"version\":1,\"boo"; }},
      {"missing", [&] { std::filesystem::remove(lease); }},
  };
  int n = 0;
  for (const auto& [what, spoil] : cases) {
    const std::string task = "t-spoilt" + std::to_string(++n);
    write_lease(lease, kChainA, shim::boottime_ms() + 1200, 0);
    LocalExecutor ex(config());
    ex.set_lease(lease, kChainA);
    ASSERT_TRUE(ex.start(order_for(task, 1, marking())).ok()) << what;
    ASSERT_TRUE(wait_until([&] { return read_pid(work(task + ".1") + "/pid") > 0; })) << what;
    spoil();
    auto r = wait_terminal(ex, task + ".1", 5000);
    EXPECT_EQ(r.state, AttemptState::Lost) << what;
    EXPECT_TRUE(slurp(dir_.path() + "/attempts/" + task + ".1/r0.exit").starts_with("fenced signal ")) << what;
  }
}

// A lease that has already run out when the gate opens runs nothing.
TEST_P(LocalExecutorTest, NothingStartsUnderALeaseThatHasRunOut) {
  const std::string lease = dir_.path() + "/lease.json";
  write_lease(lease, kChainA, shim::boottime_ms() - 1);
  LocalExecutor ex(config());
  ex.set_lease(lease, kChainA);
  ASSERT_TRUE(ex.start(order_for("t-late", 1, sh("touch ran"))).ok());
  auto r = wait_terminal(ex, "t-late.1");
  EXPECT_EQ(r.state, AttemptState::Lost);
  EXPECT_FALSE(std::filesystem::exists(work("t-late.1") + "/ran"));
  EXPECT_NE(all_logs(ex, "t-late.1").find("not started"), std::string::npos);
}

// A restarted agent in the same chain adopts what runs; one that begins a
// new chain (its lease ran out meanwhile) stops at once what ran under the
// old one, and reports it Lost, never Running.
TEST_P(LocalExecutorTest, OnlyAttemptsOfTheCurrentChainAreAdopted) {
  const std::string lease = dir_.path() + "/lease.json";
  write_lease(lease, kChainA, shim::boottime_ms() + 60000);
  {
    LocalExecutor first(config());
    first.set_lease(lease, kChainA);
    ASSERT_TRUE(first.start(order_for("t-chain", 1, marking())).ok());
    ASSERT_TRUE(wait_until([&] { return read_pid(work("t-chain.1") + "/pid") > 0; }));
  }
  const int pid = read_pid(work("t-chain.1") + "/pid");
  {
    LocalExecutor same(config());
    same.set_lease(lease, kChainA);
    EXPECT_EQ(report(same, "t-chain.1")->state, AttemptState::Running);
    EXPECT_FALSE(process_gone(pid));
  }
  LocalExecutor next(config());
  next.set_lease(lease, kChainB);
  EXPECT_TRUE(process_gone(pid) || wait_until([&] { return process_gone(pid); }, 2000));
  auto r = wait_terminal(next, "t-chain.1");
  EXPECT_EQ(r.state, AttemptState::Lost);
  EXPECT_NE(r.message.find("not adopted"), std::string::npos) << r.message;
}

INSTANTIATE_TEST_SUITE_P(Supervisor, LocalExecutorTest, ::testing::Values(true, false),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "ShimProgram" : "ForkedShim";
                         });

TEST(SupervisedProcess, ShimSpecRoundTripsAndRefusesDamage) {
  shim::ShimSpec spec{{"sh", "-c", std::string("echo \0x", 8)}, {"A=1", "PATH=/bin"}, "/w", "/w/r0.log", "/w/r0.exit",
                      {"/w", "/c/t"}};
  const std::string bytes = shim::encode_spec(spec);
  EXPECT_EQ(shim::spec_size(bytes), bytes.size());
  EXPECT_EQ(shim::spec_size(bytes.substr(0, 3)), 0u);
  shim::ShimSpec back;
  ASSERT_TRUE(shim::decode_spec(bytes, back));
  EXPECT_EQ(back.argv, spec.argv);
  EXPECT_EQ(back.env, spec.env);
  EXPECT_EQ(back.work_dir, "/w");
  EXPECT_EQ(back.log_path, "/w/r0.log");
  EXPECT_EQ(back.exit_path, "/w/r0.exit");
  EXPECT_EQ(back.dirs, spec.dirs);
  for (std::size_t cut = 0; cut < bytes.size(); ++cut) {
    shim::ShimSpec partial;
    EXPECT_FALSE(shim::decode_spec(bytes.substr(0, cut), partial)) << "truncated at " << cut;
  }
  shim::ShimSpec extra;
  EXPECT_FALSE(shim::decode_spec(bytes + "x", extra));
  shim::ShimSpec empty_command;
  EXPECT_FALSE(shim::decode_spec(shim::encode_spec(shim::ShimSpec{{}, {}, "/w", "/l", "/e", {}}), empty_command));
}

// Run by hand (no gate on fd 4), the program says what it is for and runs nothing.
TEST(SupervisedProcess, ShimProgramRefusesToRunByHand) {
  TempDir dir;
  const std::string out = dir.path() + "/out";
  const std::string cmd = std::string(CUBEPLANE_SHIM) + " 4<&- >" + out + " 2>&1";
  const int status = std::system(cmd.c_str());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(slurp(out).find("started by the Cubeplane agent"), std::string::npos) << slurp(out);
}

TEST(SupervisedProcess, ExitRecords) {
  EXPECT_EQ(parse_exit_record("exit 3\n")->exit_code(), 3);
  EXPECT_EQ(parse_exit_record("signal 9")->exit_code(), 137);
  EXPECT_TRUE(parse_exit_record("signal 15")->signaled);
  EXPECT_FALSE(parse_exit_record("exit").has_value());
  EXPECT_FALSE(parse_exit_record("exit -1").has_value());
  EXPECT_FALSE(parse_exit_record("quit 1").has_value());
  EXPECT_EQ(parse_exit_record("exit 0")->text(), "exit 0");
  EXPECT_TRUE(parse_exit_record("fenced signal 15\n")->fenced);
  EXPECT_EQ(parse_exit_record("fenced signal 15")->exit_code(), 143);
  EXPECT_EQ(parse_exit_record("fenced exit 0")->text(), "fenced exit 0");
  EXPECT_FALSE(parse_exit_record("exit 0")->fenced);
  EXPECT_FALSE(parse_exit_record("fenced").has_value());
}

TEST(SupervisedProcess, LeaseRecordsRoundTripAndATornOneIsRefused) {
  shim::LeaseRecord r;
  std::snprintf(r.boot_id, sizeof r.boot_id, "%s", "0123456789abcdef0123456789abcdef0123");
  std::snprintf(r.chain, sizeof r.chain, "%s", "00ff00ff00ff00ff");
  r.deadline_ms = 123456789;
  r.grace_ms = 2500;
  r.ttl_s = 30;
  const std::string text = shim::encode_lease(r);
  ASSERT_EQ(text.size(), shim::kLeaseRecordSize);
  EXPECT_TRUE(parse_json(text).ok()) << "the record is JSON for whoever looks at it: " << text;
  shim::LeaseRecord back;
  ASSERT_TRUE(shim::parse_lease(text.data(), text.size(), back));
  EXPECT_STREQ(back.boot_id, r.boot_id);
  EXPECT_STREQ(back.chain, r.chain);
  EXPECT_EQ(back.deadline_ms, 123456789);
  EXPECT_EQ(back.grace_ms, 2500);
  EXPECT_EQ(back.ttl_s, 30);
  for (std::size_t i = 0; i < text.size(); ++i) {
    std::string torn = text;
    torn[i] = torn[i] == '7' ? '8' : '7';
    EXPECT_FALSE(shim::parse_lease(torn.data(), torn.size(), back)) << "byte " << i;
  }
  EXPECT_FALSE(shim::parse_lease(text.data(), text.size() - 1, back));
  shim::LeaseRecord bad = r;
  bad.chain[3] = '\0';
  EXPECT_EQ(shim::encode_lease(bad), "");
}

TEST(SupervisedProcess, ProcStatOfSelf) {
  auto st = read_proc_stat(static_cast<int>(::getpid()));
  ASSERT_TRUE(st.has_value());
  EXPECT_GT(st->start_ticks, 0);
  EXPECT_TRUE(supervised_alive(static_cast<int>(::getpid()), st->start_ticks));
  EXPECT_FALSE(supervised_alive(static_cast<int>(::getpid()), st->start_ticks + 1)) << "pid reuse not detected";
}

TEST(HostProbe, MountPointsAreTheRealFilesystemsUnescapedAndSorted) {
  auto path = std::filesystem::temp_directory_path() / ("cp-mounts-" + std::to_string(::getpid()));
  {
    std::ofstream out(path);
    out << "proc /proc proc rw,nosuid 0 0\n"
           "/dev/vda1 / ext4 rw,relatime 0 0\n"
           "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n"
           "nfs.example:/export /mnt/shared nfs4 rw 0 0\n"
           "tmpfs /run tmpfs rw 0 0\n"
           "/dev/vdb /mnt/my\\040data ext4 rw 0 0\n";
  }
  EXPECT_EQ(real_mount_points(path.string()),
            (std::vector<std::string>{"/", "/mnt/my data", "/mnt/shared", "/run"}));
  std::filesystem::remove(path);
  // This machine's own: at least the root filesystem, never /proc.
  auto own = probe_host_facts().mounts;
  EXPECT_NE(std::find(own.begin(), own.end(), "/"), own.end());
  EXPECT_EQ(std::find(own.begin(), own.end(), "/proc"), own.end());
}

}  // namespace
}  // namespace cp
