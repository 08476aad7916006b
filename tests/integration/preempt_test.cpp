// Preemption with checkpoint and resume, end to end: `cubeplane up` with a
// one-node fleet of its own, driven only through the CLI (issue: preemption,
// borrowing and plan apply). Each test states its property.
#include <gtest/gtest.h>

#include <filesystem>

#include "harness.h"

namespace cpit {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

// One cluster, one node with 2 (declared) A100s; batch may be preempted and
// has 5 s to checkpoint, urgent preempts at once and is never preempted.
constexpr const char* kFleet = R"(apiVersion: cubeplane/v1
kind: Server
spec: {lease_ttl_s: 30, lost_after_s: 40}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: gpu-one}
spec:
  executor: local
  storage_pool: pool-a
  nodes:
    - name: g1
      labels: {gpu-type: nvidia-a100-80gb}
      cpu: "4"
      memory: 8Gi
      gpus: {type: nvidia-a100-80gb, count: 2}
---
apiVersion: cubeplane/v1
kind: User
metadata: {name: alice}
spec: {role: user}
---
apiVersion: cubeplane/v1
kind: PriorityClass
metadata: {name: batch}
spec: {value: 100, preemptible: true, may_preempt: false, grace: 20s}
---
apiVersion: cubeplane/v1
kind: PriorityClass
metadata: {name: urgent}
spec: {value: 1000, preemptible: false, may_preempt: true, preempt_after: 0s, grace: 5s}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-gpu}
spec:
  clusters: [gpu-one]
  quota:
    gpu/nvidia-a100-80gb: {guaranteed: 2}
    cpu: {guaranteed: "4"}
    memory: {guaranteed: 8Gi}
  default_request: {cpu: 100m, memory: 64Mi}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: proj}
spec:
  members: [{user: alice, role: member}]
  default_resource_group: rg-gpu
)";

// Counts to 60, one step per 0.1 s, keeping the count in its checkpoint
// directory. On SIGTERM it takes a moment to checkpoint (as real training
// does), writes the count and exits 143; started again, it resumes.
constexpr const char* kTrainScript = R"sh(f="$CUBEPLANE_CHECKPOINT_DIR/progress"
          n=$(cat "$f" 2>/dev/null || echo 0)
          if [ "$CUBEPLANE_RESUME" = 1 ]; then echo "resumed at $n (restart $CUBEPLANE_RESTART_COUNT)"; fi
          trap 'sleep 15; echo "$n" > "$f"; echo "checkpointed at $n"; exit 143' TERM
          while [ "$n" -lt 60 ]; do n=$((n+1)); echo "$n" > "$f"; sleep 0.1; done
          echo "finished at $n")sh";

std::string state_of(const Platform& p, const std::string& token, const std::string& task) {
  auto v = p.cli_json({"tasks", "get", task}, token);
  if (!v.is_object() || !v.as_object().contains("state")) return "";
  return std::string(v.at("state").as_string());
}

std::string submit(const Platform& p, const std::string& token, const std::string& file) {
  auto v = p.cli_json({"submit", "-f", file}, token);
  if (!v.is_object() || v.at("tasks").as_array().size() != 1) return "";
  return std::string(v.at("tasks").as_array()[0].at("id").as_string());
}

int progress(const std::string& file) {
  std::string s = read_file(file);
  try {
    return s.empty() ? 0 : std::stoi(s);
  } catch (...) {
    return 0;  // caught mid-write
  }
}

bool has_reason(const json::value& explain, std::string_view code) {
  if (!explain.is_object() || !explain.as_object().contains("reasons")) return false;
  for (const auto& r : explain.at("reasons").as_array()) {
    if (r.at("code").as_string() == code) return true;
  }
  return false;
}

TEST(PreemptTest, UrgentWorkPreemptsBatchWhichResumesFromItsCheckpoint) {
  // An urgent task that needs the GPUs a batch task holds preempts it: the batch task checkpoints within its
  // grace, is requeued, and after the urgent task resumes from its checkpoint as attempt 2 and finishes.
  std::string dir = make_temp_dir("cp-preempt");
  write_file(dir + "/fleet.yaml", kFleet);
  Platform p(dir + "/fleet.yaml", dir);
  ASSERT_TRUE(p.start()) << p.log();
  const std::string admin = p.admin_token();
  auto tok = p.cli_json({"tokens", "create", "--user", "alice"}, admin);
  ASSERT_TRUE(tok.is_object());
  const std::string alice(tok.at("token").as_string());

  write_file(dir + "/train.yaml", std::string(R"(apiVersion: cubeplane/v1
kind: Pipeline
metadata: {name: train, project_group: proj}
spec:
  priority: batch
  steps:
    - name: train
      checkpoint: true
      resources: {cpu: 100m, memory: 64Mi, gpu: 2, gpu_type: nvidia-a100-80gb}
      command:
        - /bin/sh
        - -c
        - |
          )") + kTrainScript + "\n");
  write_file(dir + "/urgent.yaml", R"(apiVersion: cubeplane/v1
kind: Pipeline
metadata: {name: hotfix, project_group: proj}
spec:
  priority: urgent
  steps:
    - name: eval
      resources: {cpu: 100m, memory: 64Mi, gpu: 2, gpu_type: nvidia-a100-80gb}
      command: ["/bin/sh", "-c", "echo urgent on GPUs $CUDA_VISIBLE_DEVICES; sleep 1; echo urgent done"]
)");

  const std::string batch = submit(p, alice, dir + "/train.yaml");
  ASSERT_FALSE(batch.empty()) << p.log();
  const std::string progress_file = dir + "/agents/gpu-one/checkpoints/" + batch + "/progress";
  ASSERT_TRUE(eventually([&] { return progress(progress_file) >= 5; }, 60s))
      << state_of(p, alice, batch) << "\n" << p.log();

  const std::string urgent = submit(p, alice, dir + "/urgent.yaml");
  ASSERT_FALSE(urgent.empty()) << p.log();

  // While the victim checkpoints (its trap takes 15 s, inside the 20 s grace: room for three CLI calls even
  // under a sanitizer on a busy machine),
  // the urgent task says what it waits for, in the API and in the CLI's text in both languages.
  json::value waiting;
  EXPECT_TRUE(eventually(
      [&] {
        waiting = p.cli_json({"tasks", "explain", urgent}, alice);
        return has_reason(waiting, "waiting_for_preemption");
      },
      30s))
      << json::serialize(waiting) << "\n" << p.log();
  EXPECT_TRUE(eventually(
      [&] {
        auto text = p.cli({"tasks", "explain", urgent}, alice).out;
        return text.find("Why it waits:") != std::string::npos && text.find(batch) != std::string::npos;
      },
      10s, 20ms));
  EXPECT_TRUE(eventually(
      [&] {
        auto text = p.cli({"--lang", "zh", "tasks", "explain", urgent}, alice).out;
        return text.find("等待原因") != std::string::npos && text.find(batch) != std::string::npos;
      },
      10s, 20ms));

  ASSERT_TRUE(eventually([&] { return state_of(p, alice, urgent) == "Succeeded"; }, 60s)) << p.log();
  ASSERT_TRUE(eventually([&] { return state_of(p, alice, batch) == "Succeeded"; }, 90s)) << p.log();

  // Two attempts: the first preempted, the second resumed and succeeded.
  auto t = p.cli_json({"tasks", "get", batch}, alice);
  ASSERT_TRUE(t.is_object());
  const auto& attempts = t.at("attempts").as_array();
  ASSERT_EQ(attempts.size(), 2u) << json::serialize(t);
  EXPECT_EQ(attempts[0].at("state").as_string(), "Preempted") << json::serialize(attempts[0]);
  EXPECT_EQ(attempts[0].at("stop_reason").as_string(), "preempt");
  EXPECT_NE(std::string(attempts[0].at("message").as_string()).find(urgent), std::string::npos)
      << json::serialize(attempts[0]);
  EXPECT_EQ(attempts[1].at("state").as_string(), "Succeeded");
  EXPECT_EQ(attempts[1].at("number").as_int64(), 2);

  // The urgent task ran only once the victim had let go of the GPUs: never two on them at once.
  auto u = p.cli_json({"tasks", "get", urgent}, alice);
  ASSERT_TRUE(u.is_object());
  ASSERT_EQ(u.at("attempts").as_array().size(), 1u);
  EXPECT_GE(u.at("attempts").as_array()[0].at("started_at").as_int64(), attempts[0].at("finished_at").as_int64());

  // The history says so: batch went through Preempting, named the preemptor; urgent names its victim.
  auto ev = p.cli_json({"events", "--object-kind", "task", "--object-id", batch, "--all"}, admin);
  ASSERT_TRUE(ev.is_object());
  bool preempting = false;
  for (const auto& e : ev.at("items").as_array()) {
    if (e.at("type").as_string() == "task.state" && e.at("to").as_string() == "Preempting") {
      preempting = true;
      EXPECT_EQ(std::string(e.at("data").at("preemptor").as_string()), urgent) << json::serialize(e);
    }
  }
  EXPECT_TRUE(preempting) << json::serialize(ev);
  auto uev = p.cli_json({"events", "--object-kind", "task", "--object-id", urgent, "--all"}, admin);
  ASSERT_TRUE(uev.is_object());
  bool preempting_for = false;
  for (const auto& e : uev.at("items").as_array()) preempting_for |= e.at("type").as_string() == "task.preempting_for";
  EXPECT_TRUE(preempting_for) << json::serialize(uev);

  // Resumed, not restarted: attempt 2 started from the checkpoint of attempt 1 and counted on to 60.
  std::string logs2;
  EXPECT_TRUE(eventually(
      [&] {
        logs2 = p.cli({"tasks", "logs", batch, "--attempt", "2"}, alice).out;
        return logs2.find("finished at 60") != std::string::npos;
      },
      30s))
      << logs2;
  auto at = logs2.find("resumed at ");
  ASSERT_NE(at, std::string::npos) << logs2;
  const int resumed_at = std::stoi(logs2.substr(at + 11));
  EXPECT_GE(resumed_at, 5) << logs2;
  EXPECT_EQ(progress(progress_file), 60);
  std::string logs1;
  EXPECT_TRUE(eventually(
      [&] {
        logs1 = p.cli({"tasks", "logs", batch, "--attempt", "1"}, alice).out;
        return logs1.find("checkpointed at ") != std::string::npos;
      },
      30s))
      << logs1;
  EXPECT_EQ(logs1.find("resumed at"), std::string::npos) << logs1;
  if (auto c = logs1.find("checkpointed at "); c != std::string::npos) {
    EXPECT_EQ(std::stoi(logs1.substr(c + 16)), resumed_at) << logs1;
  }

  p.stop();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace cpit
