// A cluster run by Slurm, through the real binaries: `cubeplane server` and
// `cubeplane agent --executor slurm` against the throwaway single-host Slurm
// of scripts/slurm-test-cluster.sh (CUBEPLANE_TEST_SLURM, SLURM_CONF; without
// them the test skips and says how to start one).
//
// What a user of such a cluster sees: the cluster comes online with the node
// and GPUs Slurm declares (gres.conf); a GPU step runs as a Slurm job and
// ends Succeeded with its output in the task's logs; a cancelled step's job
// leaves Slurm's queue. Slurm starts a job about a second after sbatch on an
// idle machine and much later on a loaded one, hence the long deadlines.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "harness.h"

namespace cpit {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;

constexpr const char* kFleet = R"(apiVersion: cubeplane/v1
kind: Server
spec: {lease_ttl_s: 30, lost_after_s: 40}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: cl-slurm}
spec: {executor: slurm, storage_pool: p1, embedded_agent: false}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg}
spec:
  clusters: [cl-slurm]
  quota:
    gpu/a100: {guaranteed: 2}
    cpu: {guaranteed: "8"}
    memory: {guaranteed: 8Gi}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: proj}
spec: {default_resource_group: rg}
)";

std::string pipeline(const std::string& name, const std::string& script) {
  json::object step{{"name", "main"},
                    {"command", json::array{"/bin/sh", "-c", json::string(script)}},
                    {"resources", json::object{{"cpu", "1"}, {"memory", "256Mi"}, {"gpu", 1}, {"gpu_type", "a100"}}}};
  json::object doc{{"apiVersion", "cubeplane/v1"},
                   {"kind", "Pipeline"},
                   {"metadata", json::object{{"name", name}, {"project_group", "proj"}}},
                   {"spec", json::object{{"steps", json::array{std::move(step)}}}}};
  return json::serialize(doc);
}

// Names of the jobs in Slurm's queue (pending or running).
std::string squeue_names() {
  std::string out;
  if (FILE* p = ::popen("squeue -h -o %j 2>/dev/null", "r")) {
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    ::pclose(p);
  }
  return out;
}

TEST(SlurmAgentTest, AGpuStepRunsAsASlurmJobAndACancelledOneLeavesTheQueue) {
  const char* slurm = std::getenv("CUBEPLANE_TEST_SLURM");
  if (!slurm || !*slurm || std::string(slurm) == "off") {
    GTEST_SKIP() << "needs a Slurm cluster: eval \"$(scripts/slurm-test-cluster.sh env)\" (as root; "
                    "scripts/test.sh does it), or CUBEPLANE_TEST_SLURM=off to skip on purpose";
  }
  std::string dir = make_temp_dir("cp-slurm-agent");
  ASSERT_FALSE(dir.empty());
  std::filesystem::create_directories(dir + "/server");
  write_file(dir + "/fleet.yaml", kFleet);

  Process server({"server", "--config", dir + "/fleet.yaml", "--data-dir", dir + "/server", "--listen",
                  "127.0.0.1:0", "--log-level", "info"},
                 dir + "/server.log");
  server.start();
  auto url = server.wait_for_line("UI and API:  ", 30s);
  ASSERT_TRUE(url.has_value()) << server.log();
  std::string base = *url;
  if (!base.empty() && base.back() == '/') base.pop_back();
  auto token = server.wait_for_line("admin token: ", 5s);
  ASSERT_TRUE(token.has_value()) << server.log();
  const Api api{base, token->substr(0, token->find(' '))};

  auto tok = api.call("POST", "/api/v1/clusters/cl-slurm/bootstrap-tokens", "{}");
  ASSERT_TRUE(tok.ok() && tok->status == 201) << (tok.ok() ? tok->body : tok.error().message);
  Process agent({"agent", "--server", base, "--token", std::string(json::parse(tok->body).at("token").as_string()),
                 "--cluster-id", "cl-slurm", "--executor", "slurm", "--data-dir", dir + "/agent", "--log-level", "info"},
                dir + "/agent.log");
  agent.start();
  auto logs = [&] { return server.log() + "\n--- agent\n" + agent.log(); };

  // Online, with the node Slurm declares and its two a100 GPUs.
  ASSERT_TRUE(eventually(
      [&] {
        auto c = api.get("/api/v1/clusters/cl-slurm");
        if (!c.is_object() || c.at("state").as_string() != "online") return false;
        auto nodes = api.get("/api/v1/nodes?cluster=cl-slurm");
        if (!nodes.is_object()) return false;
        for (const auto& n : nodes.at("items").as_array()) {
          const auto& cap = n.at("capacity").as_object();
          if (cap.contains("gpu/a100") && cap.at("gpu/a100").as_string() == "2") return true;
        }
        return false;
      },
      60s))
      << logs();

  auto submit = [&](const std::string& body) -> std::string {
    auto r = api.call("POST", "/api/v1/pipelines", body);
    EXPECT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.error().message);
    if (!r.ok() || r->status != 201) return "";
    return std::string(json::parse(r->body).at("tasks").as_array().at(0).at("id").as_string());
  };
  auto state_of = [&](const std::string& id) {
    auto t = api.get("/api/v1/tasks/" + id);
    return t.is_object() ? std::string(t.at("state").as_string()) : std::string();
  };

  // A GPU step: a Slurm job that sees its GPU and its task id; its output is the task's log.
  const std::string hello = submit(pipeline("hello", "echo hello from $CUBEPLANE_TASK_ID on $SLURM_JOB_ID"));
  ASSERT_FALSE(hello.empty());
  ASSERT_TRUE(eventually([&] { return state_of(hello) == "Succeeded"; }, 240s, 200ms))
      << state_of(hello) << "\n" << logs();
  std::string log_text;
  ASSERT_TRUE(eventually(
      [&] {
        auto r = api.call("GET", "/api/v1/tasks/" + hello + "/logs");
        if (r.ok() && r->status == 200) log_text = r->body;
        return log_text.find("hello from " + hello + " on ") != std::string::npos;
      },
      60s, 200ms))
      << log_text << "\n" << logs();

  // A cancelled step: its job leaves Slurm's queue and the task ends Cancelled.
  const std::string sleeper = submit(pipeline("sleeper", "echo started; sleep 600"));
  ASSERT_FALSE(sleeper.empty());
  ASSERT_TRUE(eventually([&] { return squeue_names().find(sleeper) != std::string::npos; }, 240s, 200ms))
      << squeue_names() << "\n" << logs();
  auto cancel = api.call("POST", "/api/v1/tasks/" + sleeper + "/cancel", "{}");
  ASSERT_TRUE(cancel.ok() && cancel->status / 100 == 2) << (cancel.ok() ? cancel->body : cancel.error().message);
  EXPECT_TRUE(eventually([&] { return state_of(sleeper) == "Cancelled"; }, 240s, 200ms))
      << state_of(sleeper) << "\n" << logs();
  EXPECT_TRUE(eventually([&] { return squeue_names().find(sleeper) == std::string::npos; }, 120s, 200ms))
      << squeue_names();

  agent.stop();
  server.stop();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cpit
