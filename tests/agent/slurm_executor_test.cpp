// The Slurm executor against a real Slurm: a throwaway single-host cluster
// from scripts/slurm-test-cluster.sh, found through CUBEPLANE_TEST_SLURM
// (its directory). Without it these tests skip and say how to start one;
// CUBEPLANE_TEST_SLURM=off skips them too.
//
// Every wait polls with a deadline; commands that must outlive a step block
// on a file the test creates ("go"), never on a timer. Attempt ids are unique
// per test run: the cluster remembers job names for MinJobAge (300 s).
#include "agent/executors/slurm_executor.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>

#include "agent/executors/run_command.h"
#include "test_util.h"

namespace cp {
namespace {

using testing::slurp;
using testing::TempDir;
using testing::touch;
using testing::wait_until;

constexpr const char* kHowToStart =
    "The Slurm executor tests need a Slurm cluster. Start a throwaway single-host one (as root) and point the "
    "tests at it:\n"
    "  eval \"$(scripts/slurm-test-cluster.sh env)\"     # exports CUBEPLANE_TEST_SLURM and SLURM_CONF\n"
    "  ... run the tests ...\n"
    "  scripts/slurm-test-cluster.sh stop\n"
    "(scripts/test.sh does this by itself); CUBEPLANE_TEST_SLURM=off skips them.";

// KEY=VALUE lines of the cluster's cluster.env.
std::map<std::string, std::string> read_env_file(const std::string& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return out;
}

std::string unique_task(const std::string& what) {
  static int counter = 0;
  return "t" + std::to_string(::getpid()) + "x" + std::to_string(++counter) + "-" + what;
}

std::vector<std::string> sh(const std::string& script) { return {"sh", "-c", script}; }

class SlurmExecutorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("CUBEPLANE_TEST_SLURM");
    if (env == nullptr || *env == '\0') GTEST_SKIP() << "CUBEPLANE_TEST_SLURM is not set.\n" << kHowToStart;
    if (std::string_view(env) == "off") GTEST_SKIP() << "CUBEPLANE_TEST_SLURM=off";
    cluster_ = env;
    conf_ = cluster_ + "/etc/slurm.conf";
    facts_ = read_env_file(cluster_ + "/cluster.env");
    ASSERT_TRUE(std::filesystem::exists(conf_)) << conf_ << " is missing.\n" << kHowToStart;
    ASSERT_FALSE(facts_["NODE"].empty()) << cluster_ << "/cluster.env has no NODE";
    node_ = facts_["NODE"];
  }
  void TearDown() override {
    // No job left behind, whatever a test did.
    for (const auto& id : submitted_) (void)slurm({"scancel", id});
  }

  SlurmExecutorConfig config() {
    SlurmExecutorConfig c;
    c.data_dir = dir_.path();
    c.slurm_conf = conf_;
    c.squeue_interval_ms = 200;
    return c;
  }

  StartOrder order_for(const std::string& what, std::vector<std::string> command) {
    StartOrder o;
    o.task_id = unique_task(what);
    o.attempt_number = 1;
    o.attempt_id = o.task_id + ".1";
    o.epoch = 1;
    o.command = std::move(command);
    o.placements = {ReplicaPlacement{0, node_, {}}};
    o.resources = Resources::parse_or_die("cpu:1,memory:64Mi");
    o.grace_s = 30;
    return o;
  }

  // A Slurm command as an operator would run it.
  CommandOutput slurm(std::vector<std::string> argv) {
    CommandSpec spec;
    spec.argv = std::move(argv);
    spec.env["SLURM_CONF"] = conf_;
    auto r = run_command(spec);
    EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : CommandOutput{};
  }

  void remember_jobs(SlurmExecutor& ex, const std::string& attempt_id) {
    for (const auto& id : ex.job_ids(attempt_id)) {
      if (!id.empty()) submitted_.push_back(id);
    }
  }

  std::optional<AttemptReport> report(SlurmExecutor& ex, const std::string& id) {
    for (auto& r : ex.poll()) {
      if (r.attempt_id == id) return r;
    }
    return std::nullopt;
  }

  AttemptReport wait_state(SlurmExecutor& ex, const std::string& id, const std::function<bool(AttemptState)>& pred,
                           int timeout_ms = 120000) {
    std::optional<AttemptReport> last;
    wait_until(
        [&] {
          last = report(ex, id);
          return last && pred(last->state);
        },
        timeout_ms);
    EXPECT_TRUE(last.has_value()) << id << " is unknown";
    if (!last) return {};
    const AttemptReport& got = *last;
    EXPECT_TRUE(pred(got.state)) << id << " is " << boost::describe::enum_to_string(got.state, "?") << " "
                                 << got.message;
    return *last;
  }
  AttemptReport wait_terminal(SlurmExecutor& ex, const std::string& id, int timeout_ms = 120000) {
    return wait_state(ex, id, [](AttemptState s) { return is_terminal(s); }, timeout_ms);
  }
  AttemptReport wait_running(SlurmExecutor& ex, const std::string& id) {
    return wait_state(ex, id, [](AttemptState s) { return s == AttemptState::Running; });
  }

  std::string all_logs(SlurmExecutor& ex, const std::string& id, int replica = 0) {
    std::string out;
    for (const auto& p : ex.read_new_logs(1 << 20)) {
      if (p.attempt_id == id && p.replica == replica) out += p.data;
    }
    return out;
  }

  // `scontrol show job` of a job, as key -> value.
  std::map<std::string, std::string> show_job(const std::string& job_id) {
    auto out = slurm({"scontrol", "--oneliner", "show", "job", job_id});
    EXPECT_TRUE(out.ok()) << out.problem();
    return slurm::parse_scontrol_line(out.out);
  }

  TempDir dir_;
  TempDir files_;  // where test commands leave marks
  std::string cluster_, conf_, node_;
  std::map<std::string, std::string> facts_;
  std::vector<std::string> submitted_;
};

// A job runs to the end: Succeeded, exit code 0, its output shipped by offset,
// the platform's environment set.
TEST_F(SlurmExecutorTest, RunsAJobToSuccessAndShipsItsOutput) {
  SlurmExecutor ex(config());
  auto o = order_for("ok", sh("echo hello from $CUBEPLANE_TASK_ID replica $CUBEPLANE_REPLICA of $CUBEPLANE_REPLICAS; "
                              "echo ckpt=$CUBEPLANE_CHECKPOINT_DIR; echo user=$USER_VAR; echo to stderr >&2"));
  o.env["USER_VAR"] = "a, b; c";
  ASSERT_TRUE(ex.start(o).ok());
  remember_jobs(ex, o.attempt_id);
  ASSERT_FALSE(ex.job_ids(o.attempt_id).at(0).empty());
  auto rep = wait_terminal(ex, o.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Succeeded) << rep.message;
  EXPECT_EQ(rep.exit_code, 0);
  EXPECT_NE(rep.started_at, 0);
  EXPECT_GE(rep.finished_at, rep.started_at);
  EXPECT_EQ(rep.epoch, 1);

  auto pieces = ex.read_new_logs(1 << 20);
  ASSERT_EQ(pieces.size(), 1u);
  const auto& p = pieces[0];
  EXPECT_EQ(p.offset, 0);
  EXPECT_TRUE(p.final);
  EXPECT_NE(p.data.find("hello from " + o.task_id + " replica 0 of 1"), std::string::npos) << p.data;
  EXPECT_NE(p.data.find("ckpt=" + dir_.path() + "/checkpoints/" + o.task_id), std::string::npos) << p.data;
  EXPECT_NE(p.data.find("user=a, b; c"), std::string::npos) << p.data;
  EXPECT_NE(p.data.find("to stderr"), std::string::npos) << p.data;
  // Shipped part of it: the rest comes again from that offset.
  ex.logs_shipped(o.attempt_id, 0, 6);
  auto rest = ex.read_new_logs(1 << 20);
  ASSERT_EQ(rest.size(), 1u);
  EXPECT_EQ(rest[0].offset, 6);
  EXPECT_EQ(rest[0].data, p.data.substr(6));

  // Acked and shipped: the attempt and its files go.
  ex.forget(o.attempt_id);
  ex.logs_shipped(o.attempt_id, 0, static_cast<std::int64_t>(p.data.size()));
  EXPECT_FALSE(report(ex, o.attempt_id));
  EXPECT_FALSE(std::filesystem::exists(ex.attempt_dir(o.attempt_id)));
  // A late start order of a forgotten attempt is not run again.
  const int before = ex.submissions();
  EXPECT_TRUE(ex.start(o).ok());
  EXPECT_EQ(ex.submissions(), before);
}

TEST_F(SlurmExecutorTest, AFailingCommandReportsItsExitCode) {
  SlurmExecutor ex(config());
  auto o = order_for("fail", sh("echo failing; exit 3"));
  ASSERT_TRUE(ex.start(o).ok());
  remember_jobs(ex, o.attempt_id);
  auto rep = wait_terminal(ex, o.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Failed);
  EXPECT_EQ(rep.exit_code, 3);
  EXPECT_EQ(rep.message, "exited with code 3");
  EXPECT_NE(all_logs(ex, o.attempt_id).find("failing"), std::string::npos);
  // What Slurm says agrees.
  EXPECT_EQ(show_job(ex.job_ids(o.attempt_id).at(0))["ExitCode"], "3:0");
}

TEST_F(SlurmExecutorTest, CommandNotFoundAndBadOrdersFail) {
  SlurmExecutor ex(config());
  auto o = order_for("missing", {"cubeplane-no-such-command-xyz"});
  ASSERT_TRUE(ex.start(o).ok());
  remember_jobs(ex, o.attempt_id);
  auto rep = wait_terminal(ex, o.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Failed);
  EXPECT_EQ(rep.exit_code, 127);

  // Slurm refuses the job (no such node): Failed with sbatch's word, nothing queued.
  auto bad = order_for("nonode", sh("true"));
  bad.placements[0].node = "no-such-node-xyz";
  ASSERT_TRUE(ex.start(bad).ok());
  rep = wait_terminal(ex, bad.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Failed);
  EXPECT_NE(rep.message.find("sbatch"), std::string::npos) << rep.message;
  EXPECT_EQ(ex.job_ids(bad.attempt_id).at(0), "");

  // A resource Slurm has no word for: Failed before sbatch.
  auto odd = order_for("fpga", sh("true"));
  odd.resources.set("fpga", 1);
  const int before = ex.submissions();
  ASSERT_TRUE(ex.start(odd).ok());
  rep = wait_terminal(ex, odd.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Failed);
  EXPECT_NE(rep.message.find("fpga"), std::string::npos) << rep.message;
  EXPECT_EQ(ex.submissions(), before);

  // Ids that cannot be file names are refused outright.
  auto evil = order_for("evil", sh("true"));
  evil.attempt_id = "../x";
  EXPECT_FALSE(ex.start(evil).ok());
}

// cpu, memory and GPUs of the order become the job's allocation.
TEST_F(SlurmExecutorTest, ResourcesBecomeTheJobsAllocation) {
  SlurmExecutor ex(config());
  const std::string go = files_.path() + "/go";
  auto o = order_for("res", sh("echo gpus=$CUDA_VISIBLE_DEVICES; while [ ! -e " + go + " ]; do sleep 0.1; done"));
  o.resources = Resources::parse_or_die("cpu:1500m,memory:300Mi,gpu/" + facts_["GPU_TYPE"] + ":1");
  ASSERT_TRUE(ex.start(o).ok());
  remember_jobs(ex, o.attempt_id);
  wait_running(ex, o.attempt_id);
  auto job = show_job(ex.job_ids(o.attempt_id).at(0));
  EXPECT_EQ(job["JobName"], "cp_" + o.attempt_id + "_r0");
  EXPECT_EQ(job["NumCPUs"], "2");  // 1500m, rounded up
  EXPECT_EQ(job["NodeList"], node_);
  EXPECT_NE(job["TRES"].find("mem=300M"), std::string::npos) << job["TRES"];
  EXPECT_NE(job["TresPerNode"].find("gpu:" + facts_["GPU_TYPE"] + ":1"), std::string::npos) << job["TresPerNode"];
  EXPECT_EQ(job["Requeue"], "0");
  EXPECT_EQ(job["StdOut"], ex.attempt_dir(o.attempt_id) + "/r0.log");
  EXPECT_EQ(job["WorkDir"], ex.attempt_dir(o.attempt_id) + "/work");
  touch(go);
  auto rep = wait_terminal(ex, o.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Succeeded) << rep.message;
  // Slurm chose the GPU; the job sees exactly one.
  auto logs = all_logs(ex, o.attempt_id);
  EXPECT_TRUE(logs.find("gpus=0\n") != std::string::npos || logs.find("gpus=1\n") != std::string::npos) << logs;
}

// Preempt: the job gets TERM first (its trap leaves a mark and it ends
// cleanly), well before the grace runs out; the attempt ends Preempted.
TEST_F(SlurmExecutorTest, PreemptSendsTermFirstAndEndsPreempted) {
  SimulatedClock clock;
  SlurmExecutor ex(config(), clock);
  const std::string started = files_.path() + "/started", termed = files_.path() + "/termed";
  auto o = order_for("preempt", sh("trap 'echo term > " + termed + "; exit 0' TERM; touch " + started +
                                   "; while :; do sleep 0.1; done"));
  ASSERT_TRUE(ex.start(o).ok());
  remember_jobs(ex, o.attempt_id);
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(started); }, 120000));
  wait_running(ex, o.attempt_id);
  ex.stop(o.attempt_id, "preempt", 30);
  // The clock stands still: only the TERM can end it.
  auto rep = wait_terminal(ex, o.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Preempted);
  EXPECT_EQ(rep.message, "preempted");
  EXPECT_EQ(rep.exit_code, 0);
  EXPECT_EQ(slurp(termed), "term\n");
}

// A command that ignores TERM is killed once the grace (injected clock) is over.
TEST_F(SlurmExecutorTest, GraceExpiredKillsTheJob) {
  SimulatedClock clock;
  SlurmExecutor ex(config(), clock);
  const std::string started = files_.path() + "/started";
  auto o = order_for("stubborn", sh("trap '' TERM; touch " + started + "; while :; do sleep 0.1; done"));
  ASSERT_TRUE(ex.start(o).ok());
  remember_jobs(ex, o.attempt_id);
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(started); }, 120000));
  wait_running(ex, o.attempt_id);
  ex.stop(o.attempt_id, "cancel", 10);
  // Still there a while after the TERM: it ignores it.
  for (int i = 0; i < 10; ++i) {
    EXPECT_EQ(report(ex, o.attempt_id)->state, AttemptState::Stopping);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  clock.advance_ms(10'001);
  auto rep = wait_terminal(ex, o.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Cancelled);
  EXPECT_EQ(rep.message, "cancelled; grace expired, killed");
}

// A job still pending in Slurm is cancelled at once, without waiting for
// any grace (the clock never moves); until then it is only Dispatched.
TEST_F(SlurmExecutorTest, StoppingAPendingJobCancelsItAtOnce) {
  SimulatedClock clock;
  auto c = config();
  c.sbatch_args = {"--hold"};  // stays pending until released
  SlurmExecutor ex(c, clock);
  auto o = order_for("pending", sh("echo should not run"));
  ASSERT_TRUE(ex.start(o).ok());
  remember_jobs(ex, o.attempt_id);
  const std::string job = ex.job_ids(o.attempt_id).at(0);
  ASSERT_FALSE(job.empty());
  // Queued, nothing started.
  ASSERT_TRUE(wait_until([&] { return show_job(job)["JobState"] == "PENDING"; }, 10000));
  auto rep = report(ex, o.attempt_id);
  ASSERT_TRUE(rep);
  EXPECT_EQ(rep->state, AttemptState::Dispatched);
  EXPECT_EQ(rep->started_at, 0);
  ex.stop(o.attempt_id, "cancel", 600);
  auto end = wait_terminal(ex, o.attempt_id, 20000);
  EXPECT_EQ(end.state, AttemptState::Cancelled);
  EXPECT_EQ(end.message, "cancelled");
  EXPECT_EQ(show_job(job)["JobState"], "CANCELLED");
  EXPECT_EQ(all_logs(ex, o.attempt_id), "");
}

// A new executor on the same data dir finds the running job and does not
// submit it again, not even when the server repeats the start order.
TEST_F(SlurmExecutorTest, ARestartedExecutorAdoptsItsJobs) {
  const std::string go = files_.path() + "/go";
  auto o = order_for("adopt", sh("echo before; while [ ! -e " + go + " ]; do sleep 0.1; done; echo after; exit 5"));
  std::string job;
  {
    SlurmExecutor first(config());
    ASSERT_TRUE(first.start(o).ok());
    remember_jobs(first, o.attempt_id);
    job = first.job_ids(o.attempt_id).at(0);
    wait_running(first, o.attempt_id);
  }
  SlurmExecutor second(config());
  EXPECT_EQ(second.job_ids(o.attempt_id), std::vector<std::string>{job});
  auto rep = wait_running(second, o.attempt_id);
  EXPECT_NE(rep.started_at, 0);
  ASSERT_TRUE(second.start(o).ok());
  EXPECT_EQ(second.submissions(), 0);
  // One job of that name in Slurm.
  auto q = slurm({"squeue", "--noheader", "--states=all", "--name=cp_" + o.attempt_id + "_r0", "--format=%i"});
  EXPECT_EQ(q.out, job + "\n");
  touch(go);
  rep = wait_terminal(second, o.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Failed);
  EXPECT_EQ(rep.exit_code, 5);
  auto logs = all_logs(second, o.attempt_id);
  EXPECT_NE(logs.find("before\n"), std::string::npos) << logs;
  EXPECT_NE(logs.find("after\n"), std::string::npos) << logs;
}

// The agent died inside sbatch: the journal has the replica but no job id.
// The next executor finds the job by name instead of submitting it twice.
TEST_F(SlurmExecutorTest, AJobSubmittedButNotJournaledIsFoundByName) {
  const std::string go = files_.path() + "/go";
  auto o = order_for("byname", sh("while [ ! -e " + go + " ]; do sleep 0.1; done"));
  std::string job;
  {
    SlurmExecutor first(config());
    ASSERT_TRUE(first.start(o).ok());
    remember_jobs(first, o.attempt_id);
    job = first.job_ids(o.attempt_id).at(0);
    ASSERT_FALSE(job.empty());
  }
  // Rewrite the journal as it was before sbatch answered.
  const std::string journal = dir_.path() + "/attempts/" + o.attempt_id + "/journal.json";
  std::string text = slurp(journal);
  const std::string field = "\"job_id\":\"" + job + "\"";
  auto at = text.find(field);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, field.size(), "\"job_id\":\"\"");
  std::ofstream(journal, std::ios::trunc) << text;

  SlurmExecutor second(config());
  EXPECT_EQ(second.job_ids(o.attempt_id), std::vector<std::string>{""});
  ASSERT_TRUE(wait_until([&] {
    (void)second.poll();
    return second.job_ids(o.attempt_id).at(0) == job;
  }));
  EXPECT_EQ(second.submissions(), 0);
  touch(go);
  auto rep = wait_terminal(second, o.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Succeeded) << rep.message;
  EXPECT_EQ(second.submissions(), 0);
}

// The real Slurm program `name`, from PATH.
std::string real_program(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/bin:/bin";
  for (std::size_t at = 0; at <= dirs.size();) {
    auto end = dirs.find(':', at);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(at, end - at) + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    at = end + 1;
  }
  return "";
}

// sbatch answers "Unable to contact slurm controller" once, in one of two
// ways: the job went through anyway (the answer was lost), or it did not.
// Either way the replica is submitted exactly once.
TEST_F(SlurmExecutorTest, AnSbatchThatCouldNotReachTheControllerIsNeitherLostNorDoubled) {
  // A bin dir of the real programs, with sbatch wrapped.
  TempDir bin;
  for (const char* p : {"squeue", "scontrol", "scancel"}) {
    const std::string real = real_program(p);
    ASSERT_FALSE(real.empty()) << p << " is not in PATH";
    std::filesystem::create_symlink(real, bin.path() + "/" + p);
  }
  const std::string sbatch = real_program("sbatch");
  ASSERT_FALSE(sbatch.empty());
  const std::string calls = files_.path() + "/calls";
  {
    std::ofstream w(bin.path() + "/sbatch");
    w << "#!/bin/sh\n"
      << "echo \"$*\" >> " << calls << "\n"
      << "if [ -e " << files_.path() << "/lie ]; then rm " << files_.path() << "/lie; " << sbatch
      << " \"$@\" >/dev/null; fi\n"
      << "if [ -e " << files_.path() << "/fail ]; then rm " << files_.path() << "/fail; else exec " << sbatch
      << " \"$@\"; fi\n"
      << "echo 'sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)' "
         ">&2\n"
      << "exit 1\n";
  }
  std::filesystem::permissions(bin.path() + "/sbatch", std::filesystem::perms::owner_all);
  auto c = config();
  c.bin_dir = bin.path();
  SlurmExecutor ex(c);
  auto count_calls = [&] {
    std::string text = slurp(calls);
    return std::count(text.begin(), text.end(), '\n');
  };

  // Submitted, but sbatch said it was not: found by name, not submitted again.
  touch(files_.path() + "/lie");
  touch(files_.path() + "/fail");
  auto lied = order_for("lied", sh("echo ran"));
  ASSERT_TRUE(ex.start(lied).ok());
  EXPECT_EQ(ex.job_ids(lied.attempt_id), std::vector<std::string>{""});
  auto rep = wait_terminal(ex, lied.attempt_id);
  remember_jobs(ex, lied.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Succeeded) << rep.message;
  EXPECT_FALSE(ex.job_ids(lied.attempt_id).at(0).empty());
  EXPECT_EQ(count_calls(), 1);
  EXPECT_EQ(all_logs(ex, lied.attempt_id), "ran\n");

  // Not submitted: submitted again once squeue shows no such job.
  touch(files_.path() + "/fail");
  auto failed = order_for("retried", sh("echo ran too"));
  ASSERT_TRUE(ex.start(failed).ok());
  EXPECT_EQ(ex.job_ids(failed.attempt_id), std::vector<std::string>{""});
  rep = wait_terminal(ex, failed.attempt_id);
  remember_jobs(ex, failed.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Succeeded) << rep.message;
  EXPECT_EQ(count_calls(), 3);
  EXPECT_EQ(all_logs(ex, failed.attempt_id), "ran too\n");
}

// Gang semantics: the first failing replica fails the attempt and its
// sibling is stopped (it gets TERM).
TEST_F(SlurmExecutorTest, AFailingReplicaStopsItsSiblings) {
  SlurmExecutor ex(config());
  const std::string termed = files_.path() + "/termed", started = files_.path() + "/started";
  auto o = order_for("gang", sh("if [ \"$CUBEPLANE_REPLICA\" = 0 ]; then while [ ! -e " + started +
                                "  ]; do sleep 0.1; done; exit 4; fi; trap 'touch " + termed + "; exit 0' TERM; touch " +
                                started + "; while :; do sleep 0.1; done"));
  o.placements = {ReplicaPlacement{0, node_, {}}, ReplicaPlacement{1, node_, {}}};
  ASSERT_TRUE(ex.start(o).ok());
  remember_jobs(ex, o.attempt_id);
  EXPECT_EQ(ex.job_ids(o.attempt_id).size(), 2u);
  auto rep = wait_terminal(ex, o.attempt_id);
  EXPECT_EQ(rep.state, AttemptState::Failed);
  EXPECT_EQ(rep.exit_code, 4);
  EXPECT_EQ(rep.message, "replica 0: exited with code 4");
  EXPECT_TRUE(std::filesystem::exists(termed));
}

TEST_F(SlurmExecutorTest, InventoryShowsTheNode) {
  SlurmExecutor ex(config());
  auto nodes = ex.inventory();
  ASSERT_EQ(nodes.size(), 1u);
  const auto& n = nodes[0];
  EXPECT_EQ(n.name, node_);
  EXPECT_TRUE(n.ready) << n.reason;
  EXPECT_EQ(n.capacity.cpu_milli(), std::stoll(facts_["CPUS"]) * 1000);
  EXPECT_EQ(n.capacity.memory_bytes(), std::stoll(facts_["MEMORY_MB"]) * 1024 * 1024);
  EXPECT_EQ(n.capacity.get("gpu/" + facts_["GPU_TYPE"]), std::stoll(facts_["GPU_COUNT"]));
  EXPECT_EQ(n.gpus.size(), static_cast<std::size_t>(std::stoll(facts_["GPU_COUNT"])));
  EXPECT_EQ(n.labels.at(std::string(kLabelGpuType)), facts_["GPU_TYPE"]);
  EXPECT_EQ(n.labels.at(std::string(slurm::kLabelPartition)), facts_["PARTITION"]);
  EXPECT_NE(n.facts.runtime.find("slurm "), std::string::npos);

  // Pinned to a partition the node is not in: no nodes.
  auto c = config();
  c.partition = "no-such-partition";
  SlurmExecutor other(c);
  EXPECT_TRUE(other.inventory().empty());
}

TEST_F(SlurmExecutorTest, EngineReportsSlurmsOwnWord) {
  SlurmExecutor ex(config());
  auto st = ex.engine();
  EXPECT_TRUE(st.ok) << st.message;
  EXPECT_NE(st.message.find("UP"), std::string::npos) << st.message;

  auto c = config();
  c.bin_dir = "/nonexistent/slurm/bin";
  SlurmExecutor wrong_bin(c);
  st = wrong_bin.engine();
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("/nonexistent/slurm/bin/scontrol"), std::string::npos) << st.message;

  // A controller nobody answers for: the same cluster, another port.
  TempDir dead;
  std::string conf = slurp(conf_);
  auto at = conf.find("SlurmctldPort=");
  ASSERT_NE(at, std::string::npos);
  conf.insert(at, "SlurmctldPort=1\n#");
  std::ofstream(dead.path() + "/slurm.conf") << conf;
  std::filesystem::copy_file(cluster_ + "/etc/gres.conf", dead.path() + "/gres.conf");
  c = config();
  c.slurm_conf = dead.path() + "/slurm.conf";
  SlurmExecutor dead_ctld(c);
  st = dead_ctld.engine();
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("DOWN"), std::string::npos) << st.message;
}

}  // namespace
}  // namespace cp
