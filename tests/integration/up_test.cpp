// `cubeplane up` with the demo fleet, driven only through the CLI, as a user
// on one machine would (issue: foundation). Each test states its property.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <set>

#include "harness.h"

namespace cpit {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

const std::string kSource = CUBEPLANE_SOURCE_DIR;

std::string state_of(const Platform& p, const std::string& token, const std::string& task) {
  auto v = p.cli_json({"tasks", "get", task}, token);
  if (!v.is_object() || !v.as_object().contains("state")) return "";
  return std::string(v.at("state").as_string());
}

std::vector<std::string> submit(const Platform& p, const std::string& token, const std::string& file) {
  auto v = p.cli_json({"submit", "-f", file}, token);
  std::vector<std::string> ids;
  if (!v.is_object()) return ids;
  for (const auto& t : v.at("tasks").as_array()) ids.emplace_back(t.at("id").as_string());
  return ids;
}

bool all_in_state(const Platform& p, const std::string& token, const std::vector<std::string>& ids,
                  const std::string& state) {
  for (const auto& id : ids) {
    if (state_of(p, token, id) != state) return false;
  }
  return !ids.empty();
}

class UpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = make_temp_dir("cp-up");
    ::setenv("CUBEPLANE_USE_SAMPLE_MS", "200", 1);  // the agents measure use every 200 ms, not 5 s
    platform_ = new Platform(kSource + "/examples/demo-fleet.yaml", dir_);
    ASSERT_TRUE(platform_->start()) << platform_->log();
    token_ = platform_->admin_token();
    ASSERT_FALSE(token_.empty());
  }
  static void TearDownTestSuite() {
    delete platform_;
    platform_ = nullptr;
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  static inline Platform* platform_ = nullptr;
  static inline std::string dir_;
  static inline std::string token_;
};

TEST_F(UpTest, DemoClustersComeOnlineWithTheirNodes) {
  // Every cluster of the demo fleet is served by an embedded agent and goes online with its declared nodes.
  ASSERT_TRUE(eventually(
      [&] {
        auto v = platform_->cli_json({"clusters", "ls"}, token_);
        if (!v.is_object()) return false;
        int online = 0;
        for (const auto& c : v.at("items").as_array()) online += c.at("state").as_string() == "online";
        return online == 3;
      },
      30s))
      << platform_->log();
  auto nodes = platform_->cli_json({"nodes", "ls", "--cluster", "proj-b-gpu"}, token_);
  ASSERT_TRUE(nodes.is_object());
  EXPECT_EQ(nodes.at("items").as_array().size(), 2u);
}

TEST_F(UpTest, ExamplePipelinesSucceedAndTheirLogsAreReadable) {
  // The example pipelines run real commands to Succeeded, in DAG order, and their output is in the logs.
  auto hello = submit(*platform_, token_, kSource + "/examples/pipelines/hello.yaml");
  auto llama = submit(*platform_, token_, kSource + "/examples/pipelines/llama-finetune.yaml");
  ASSERT_EQ(hello.size(), 3u);
  ASSERT_EQ(llama.size(), 2u);
  ASSERT_TRUE(eventually([&] { return all_in_state(*platform_, token_, hello, "Succeeded"); }, 90s))
      << platform_->log();
  ASSERT_TRUE(eventually([&] { return all_in_state(*platform_, token_, llama, "Succeeded"); }, 90s))
      << platform_->log();
  auto logs = platform_->cli({"tasks", "logs", hello[2]}, token_);
  EXPECT_EQ(logs.exit_code, 0) << logs.err;
  EXPECT_NE(logs.out.find("accuracy=0.93"), std::string::npos) << logs.out;
  auto train_logs = platform_->cli({"tasks", "logs", llama[1]}, token_);
  EXPECT_NE(train_logs.out.find("GPUs="), std::string::npos) << train_logs.out;
  EXPECT_NE(train_logs.out.find("finished"), std::string::npos) << train_logs.out;
  // The training step started only after prepare had succeeded.
  auto prepare = platform_->cli_json({"tasks", "get", llama[0]}, token_);
  auto train = platform_->cli_json({"tasks", "get", llama[1]}, token_);
  EXPECT_LE(prepare.at("finished_at").as_int64(), train.at("started_at").as_int64());
}

TEST_F(UpTest, WhatAStepReallyUsesBecomesAdviceAgainstItsRequest) {
  // The agent samples the step's processes while it spins one core for about 6 s
  // with 4 CPUs requested; when it ends, `usage advice` says fewer would do.
  const std::string file = dir_ + "/spin.yaml";
  write_file(file,
             "apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: spin-check, project_group: proj-c}\n"
             "spec:\n  steps:\n    - name: spin\n      command: [\"/bin/sh\", \"-c\", \"end=$(($(date +%s) + 6)); "
             "while [ $(date +%s) -lt $end ]; do :; done\"]\n      resources: {cpu: \"4\", memory: 8Gi}\n");
  auto ids = submit(*platform_, token_, file);
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(eventually([&] { return all_in_state(*platform_, token_, ids, "Succeeded"); }, 90s))
      << platform_->log();
  auto advice = platform_->cli_json({"usage", "advice", "--project-group", "proj-c"}, token_);
  ASSERT_TRUE(advice.is_object()) << platform_->log();
  const json::object* step = nullptr;
  for (const auto& s : advice.at("items").as_array()) {
    if (s.at("step").as_string() == "spin-check/spin") step = &s.as_object();
  }
  ASSERT_NE(step, nullptr) << json::serialize(advice);
  EXPECT_GE(step->at("samples").as_int64(), 12) << json::serialize(*step);
  EXPECT_GT(step->at("cpu").at("p95_milli").as_int64(), 100) << json::serialize(*step);
  EXPECT_EQ(step->at("request").at("cpu_milli").as_int64(), 4000);
  bool lower_cpu = false, lower_memory = false;
  for (const auto& a : step->at("advice").as_array()) {
    lower_cpu = lower_cpu || (a.at("resource").as_string() == "cpu" && a.at("kind").as_string() == "lower");
    lower_memory = lower_memory || (a.at("resource").as_string() == "memory" && a.at("kind").as_string() == "lower");
  }
  EXPECT_TRUE(lower_cpu) << json::serialize(*step);
  EXPECT_TRUE(lower_memory) << json::serialize(*step);  // a shell needs far less than 8 GiB
  // The attempt shows what it used too.
  auto task = platform_->cli({"tasks", "get", ids[0]}, token_);
  EXPECT_NE(task.out.find(" cpu, "), std::string::npos) << task.out;
}

TEST_F(UpTest, OverQuotaTaskWaitsAndSaysWhy) {
  // A task asking more GPUs than its group's quota stays Queued with reason quota_exceeded.
  auto ids = submit(*platform_, token_, kSource + "/examples/pipelines/over-quota.yaml");
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(eventually(
      [&] {
        auto v = platform_->cli_json({"tasks", "explain", ids[0]}, token_);
        if (!v.is_object() || v.at("reasons").as_array().empty()) return false;
        return v.at("reasons").as_array()[0].at("code").as_string() == "quota_exceeded";
      },
      30s))
      << platform_->log();
  EXPECT_EQ(state_of(*platform_, token_, ids[0]), "Queued");
  auto text = platform_->cli({"tasks", "explain", ids[0]}, token_);
  EXPECT_NE(text.out.find("quota"), std::string::npos) << text.out;
}

TEST_F(UpTest, ServerRunsOnTheAllocatorTheBuildChose) {
  // CUBEPLANE_MALLOC=jemalloc (the default) links jemalloc into `cubeplane`:
  // the running server has the library mapped; with `system` (and under the
  // sanitizers) it has not.
  const std::string maps = read_file("/proc/" + std::to_string(platform_->pid()) + "/maps");
  ASSERT_FALSE(maps.empty());
  const bool mapped = maps.find("libjemalloc") != std::string::npos;
  EXPECT_EQ(mapped, std::string(CUBEPLANE_MALLOC_USED) == "jemalloc") << CUBEPLANE_MALLOC_USED;
}

TEST_F(UpTest, CancellingARunningTaskKillsItsProcesses) {
  // Cancel stops a running task's whole process group, and the task ends Cancelled.
  std::string work = make_temp_dir("cp-cancel");
  std::string file = work + "/cancel.yaml";
  write_file(file, R"(apiVersion: cubeplane/v1
kind: Pipeline
metadata: {name: cancel-me, project_group: proj-c}
spec:
  steps:
    - name: serve
      command: ["/bin/sh", "-c", "echo $$ > )" + work + R"(/shell.pid; sleep 3600 & echo $! > )" + work +
                        R"(/child.pid; wait"]
      resources: {cpu: 100m, memory: 64Mi}
)");
  auto ids = submit(*platform_, token_, file);
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(eventually([&] { return read_file(work + "/child.pid").size() > 1; }, 30s)) << platform_->log();
  pid_t shell = std::stoi(read_file(work + "/shell.pid"));
  pid_t child = std::stoi(read_file(work + "/child.pid"));
  ASSERT_TRUE(process_alive(child));
  ASSERT_TRUE(eventually([&] { return state_of(*platform_, token_, ids[0]) == "Running"; }, 30s));
  auto r = platform_->cli({"tasks", "cancel", ids[0]}, token_);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(eventually([&] { return !process_alive(child) && !process_alive(shell); }, 30s));
  EXPECT_TRUE(eventually([&] { return state_of(*platform_, token_, ids[0]) == "Cancelled"; }, 30s));
}

TEST_F(UpTest, MembersSeeAndSubmitOnlyIntoTheirOwnProjectGroups) {
  // A user outside a project group can neither submit into it nor see its tasks; carol (proj-c) can.
  auto made = platform_->cli({"users", "create", "dave"}, token_);
  ASSERT_EQ(made.exit_code, 0) << made.err;
  auto tok = platform_->cli_json({"tokens", "create", "--user", "dave"}, token_);
  ASSERT_TRUE(tok.is_object());
  std::string dave(tok.at("token").as_string());
  auto refused = platform_->cli({"submit", "-f", kSource + "/examples/pipelines/hello.yaml"}, dave);
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("may not"), std::string::npos) << refused.err;
  auto list = platform_->cli_json({"tasks", "ls"}, dave);
  ASSERT_TRUE(list.is_object());
  EXPECT_TRUE(list.at("items").as_array().empty());

  auto ctok = platform_->cli_json({"tokens", "create", "--user", "carol"}, token_);
  std::string carol(ctok.at("token").as_string());
  auto ids = submit(*platform_, carol, kSource + "/examples/pipelines/hello.yaml");
  EXPECT_EQ(ids.size(), 3u);
  // carol may not change resource groups.
  auto rg = platform_->cli({"resource-groups", "apply", "-f", kSource + "/examples/demo-fleet.yaml"}, carol);
  EXPECT_EQ(rg.exit_code, 1);
}

TEST_F(UpTest, BadInputIsRefusedWithAClearMessageInEitherLanguage) {
  // Malformed YAML, unknown fields and unknown references exit 1 with a message, in English or Chinese.
  std::string work = make_temp_dir("cp-bad");
  write_file(work + "/bad.yaml", "apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: x\n");
  auto r = platform_->cli({"submit", "-f", work + "/bad.yaml"}, token_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_FALSE(r.err.empty());
  write_file(work + "/unknown.yaml", R"(apiVersion: cubeplane/v1
kind: Pipeline
metadata: {name: x, project_group: proj-c}
spec:
  steps: [{name: a, command: [echo], colour: blue}]
)");
  r = platform_->cli({"submit", "-f", work + "/unknown.yaml"}, token_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("spec.steps[0].colour"), std::string::npos) << r.err;
  write_file(work + "/ref.yaml", R"(apiVersion: cubeplane/v1
kind: Pipeline
metadata: {name: x, project_group: no-such-group}
spec:
  steps: [{name: a, command: [echo]}]
)");
  r = platform_->cli({"--lang", "zh", "submit", "-f", work + "/ref.yaml"}, token_);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("不存在"), std::string::npos) << r.err;
  auto usage = platform_->cli({"tasks", "get"}, token_);
  EXPECT_EQ(usage.exit_code, 2);
}

TEST(UpRestartTest, KillNineMidRunLosesNothingAndRunsNothingTwice) {
  // SIGKILL of `up` (server and agents) mid-run, then a restart: every accepted task finishes, each exactly once.
  std::string dir = make_temp_dir("cp-kill");
  std::string marks = dir + "/marks";
  ASSERT_EQ(system(("mkdir -p " + marks).c_str()), 0);
  Platform p(kSource + "/examples/demo-fleet.yaml", dir);
  ASSERT_TRUE(p.start()) << p.log();
  std::string token = p.admin_token();
  std::string yaml = R"(apiVersion: cubeplane/v1
kind: Pipeline
metadata: {name: crash, project_group: proj-c}
spec:
  steps:
)";
  for (int i = 0; i < 4; ++i) {
    std::string step = "s" + std::to_string(i);
    yaml += "    - name: " + step + "\n      command: [\"/bin/sh\", \"-c\", \"echo run >> " + marks + "/" + step +
            "; sleep 3; echo ok\"]\n      resources: {cpu: 100m, memory: 64Mi}\n";
  }
  write_file(dir + "/crash.yaml", yaml);
  std::vector<std::string> ids;
  for (int round = 0; round < 2; ++round) {
    auto got = submit(p, token, dir + "/crash.yaml");
    ASSERT_EQ(got.size(), 4u);
    ids.insert(ids.end(), got.begin(), got.end());
  }
  // Killed as soon as the first command runs (its mark is written first
  // thing), with the others starting or about to. Watching the marks, not
  // `tasks get`: under the sanitizers a CLI call can take longer than the
  // 3 s the command runs.
  ASSERT_TRUE(eventually([&] { return !read_file(marks + "/s0").empty(); }, 60s, 10ms)) << p.log();
  p.kill_hard();
  ASSERT_TRUE(p.start()) << p.log();
  EXPECT_TRUE(eventually([&] { return all_in_state(p, token, ids, "Succeeded"); }, 120s)) << p.log();
  for (const auto& id : ids) {
    auto t = p.cli_json({"tasks", "get", id}, token);
    ASSERT_TRUE(t.is_object()) << id;
    // An attempt journaled but not yet spawned when the agent died is Lost
    // and run anew; every attempt but the last must be such a Lost one.
    const auto& attempts = t.at("attempts").as_array();
    ASSERT_FALSE(attempts.empty()) << id;
    for (std::size_t i = 0; i + 1 < attempts.size(); ++i) {
      EXPECT_EQ(attempts[i].at("state").as_string(), "Lost") << id;
    }
    EXPECT_EQ(attempts.back().at("state").as_string(), "Succeeded") << id;
    if (attempts.size() > 1) std::cerr << id << " attempts: " << boost::json::serialize(attempts) << "\n";
  }
  for (int i = 0; i < 4; ++i) {
    std::string content = read_file(marks + "/s" + std::to_string(i));
    // two pipelines share a step name: each ran exactly once
    EXPECT_EQ(std::count(content.begin(), content.end(), '\n'), 2) << "step s" << i << ": " << content << p.log();
  }
  p.stop();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace cpit
