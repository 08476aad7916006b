// Failover inside the storage pool, through the real binaries (DESIGN.md
// "Agent protocol", fencing): one `cubeplane server` with a short lease, and
// three agents for three clusters of one resource group, two `cubeplane
// agent --executor local` and one `--executor slurm` on the throwaway
// single-host Slurm of scripts/slurm-test-cluster.sh (CUBEPLANE_TEST_SLURM,
// SLURM_CONF; without one, cl-c is a third local agent):
//
//   cl-a  local  pool p1  2 GPUs   runs lost-1 and lost-2 (proj-x), then is frozen
//   cl-b  local  pool p1  5 GPUs   runs b-long (proj-y); where lost-1/2 must rerun
//   cl-c  Slurm  pool p2  2 GPUs   runs c-long (proj-y, pinned, 1 GPU; 3 of 4 when
//                                  local); has a free GPU the whole time, so only
//                                  the pool keeps lost-1/2 off it
//
// Every GPU is of type a100, the type the Slurm cluster's gres declares.
//
// Why the work lands where it does: c-long is pinned to cl-c; b-long asks
// for 3 GPUs, which only cl-b has free then (automatic choice by capacity);
// lost-1/2 belong to another project group and soft anti-affinity puts them
// on cl-a, the only cluster without proj-y's GPU work.
//
// Cluster A is cut off by freezing it: SIGSTOP to its agent and to the
// process groups of its commands. A stopped agent cannot fence itself (the
// fencing that keeps two attempts apart needs a live agent), so its commands
// are frozen with it, as when the whole machine hangs. cl-b is drained
// meanwhile, so that no cluster of p1 can take the lost tasks: they must
// wait with the storage_pool reason, in English and Chinese, although cl-c
// has room. Once cl-b is back they rerun there. Then the agent of cl-a is
// resumed: it finds its lease long gone and stops its stale attempts, whose
// processes must be gone before anything else of A runs again.
//
// Every command appends marks (start, a tick every 0.2 s, end: attempt id,
// pid, date +%s%N) to one file; no two attempts of one task may have marks
// that interleave.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "common/http_client.h"
#include "harness.h"

namespace cpit {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kGpu = "a100";

// The Slurm cluster to run cl-c on, if there is one.
bool with_slurm() {
  const char* slurm = std::getenv("CUBEPLANE_TEST_SLURM");
  return slurm && *slurm && std::string(slurm) != "off";
}

constexpr const char* kFleet = R"(apiVersion: cubeplane/v1
kind: Server
spec: {lease_ttl_s: 5, lost_after_s: 5}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: cl-a}
spec: {executor: local, storage_pool: p1, embedded_agent: false}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: cl-b}
spec: {executor: local, storage_pool: p1, embedded_agent: false}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: cl-c}
spec: {executor: CL_C_EXECUTOR, storage_pool: p2, embedded_agent: false}
---
apiVersion: cubeplane/v1
kind: PriorityClass
metadata: {name: batch}
spec: {value: 100, grace: 1s}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg}
spec:
  clusters: [cl-a, cl-b, cl-c]
  quota:
    gpu/a100: {guaranteed: 20}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: proj-x}
spec: {default_resource_group: rg}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: proj-y}
spec: {default_resource_group: rg}
)";

// A client verb of the binary against the server, its stdout (empty on failure).
std::string cli(const std::string& url, const std::string& token, const std::vector<std::string>& args,
                const std::string& dir) {
  const std::string out_path = dir + "/cli.out";
  pid_t pid = fork();
  if (pid == 0) {
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(out, 1);
    setenv("CUBEPLANE_SERVER", url.c_str(), 1);
    setenv("CUBEPLANE_TOKEN", token.c_str(), 1);
    setenv("HOME", dir.c_str(), 1);
    unsetenv("CUBEPLANE_CONFIG");
    std::vector<char*> argv{const_cast<char*>(CUBEPLANE_BINARY)};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(CUBEPLANE_BINARY, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? read_file(out_path) : std::string();
}

// A pipeline of one project group: steps {name, gpus, ticks}, optionally pinned.
struct StepSpec {
  std::string name;
  int gpus = 1;
  int ticks = 50;
};
std::string pipeline_json(const std::string& name, const std::string& project, const std::vector<StepSpec>& steps,
                          const std::string& marks, const std::string& pinned = "") {
  // Its log says whether Slurm ran it (cl-c's executor).
  const std::string script = "echo slurm job ${SLURM_JOB_ID:-none}; " + marking_script(marks);
  json::array list;
  for (const auto& s : steps) {
    json::object step;
    step["name"] = s.name;
    step["command"] = json::array{"/bin/sh", "-c", json::string(script)};
    step["env"] = json::object{{"TICKS", std::to_string(s.ticks)}};
    step["resources"] = json::object{{"cpu", "10m"}, {"memory", "1Mi"}, {"gpu", s.gpus}, {"gpu_type", kGpu}};
    list.push_back(std::move(step));
  }
  json::object spec{{"priority", "batch"}, {"steps", std::move(list)}};
  if (!pinned.empty()) spec["cluster"] = pinned;
  json::object doc{{"apiVersion", "cubeplane/v1"},
                   {"kind", "Pipeline"},
                   {"metadata", json::object{{"name", name}, {"project_group", project}}},
                   {"spec", std::move(spec)}};
  return json::serialize(doc);
}

// A process group this test's commands lead: its leader still runs one of
// them (its command line names the marks file), so that a pid reused by
// someone else is never signalled.
bool ours(pid_t leader, const std::string& marks) {
  return process_alive(leader) &&
         read_file("/proc/" + std::to_string(leader) + "/cmdline").find(marks) != std::string::npos;
}

// Kills whatever the test left behind, even when an assertion ended it early:
// frozen processes are continued first (a stopped process ignores SIGTERM).
struct Cleanup {
  std::vector<std::unique_ptr<Process>>* agents = nullptr;
  std::unique_ptr<Process>* server = nullptr;
  std::string marks;
  bool slurm = false;
  ~Cleanup() {
    // The agents first, so that none starts a command after the marks are read
    // (their commands outlive them: each runs under a shim of its own).
    for (auto& a : *agents) {
      if (a->pid() > 0) kill(a->pid(), SIGCONT);
      a->stop();
    }
    if (*server) (*server)->stop();
    std::set<pid_t> groups;
    std::set<std::string> attempts;
    for (const auto& m : read_marks(marks)) {
      groups.insert(m.pid);
      attempts.insert(m.attempt);
    }
    // cl-c's jobs, by the name the Slurm executor gives them (other tests share the cluster).
    for (const auto& a : attempts) {
      if (slurm) std::system(("scancel --name=cp_" + a + "_r0 >/dev/null 2>&1").c_str());
    }
    for (pid_t g : groups) {
      if (!ours(g, marks)) continue;
      kill(-g, SIGCONT);
      kill(-g, SIGKILL);
    }
  }
};

TEST(FailoverTest, LostTasksRerunOnlyInsideTheirStoragePoolAndNeverOverlap) {
  const auto t0 = SteadyClock::now();
  std::string dir = make_temp_dir("cp-failover");
  ASSERT_FALSE(dir.empty());
  std::filesystem::create_directories(dir + "/server");
  const bool slurm = with_slurm();
  std::string fleet = kFleet;
  fleet.replace(fleet.find("CL_C_EXECUTOR"), std::string("CL_C_EXECUTOR").size(), slurm ? "slurm" : "local");
  write_file(dir + "/fleet.yaml", fleet);
  if (!slurm) std::printf("failover: no Slurm cluster (CUBEPLANE_TEST_SLURM), so cl-c is a local agent\n");
  const std::string marks = dir + "/marks";
  write_file(marks, "");

  std::vector<std::unique_ptr<Process>> agents;
  std::unique_ptr<Process> server = std::make_unique<Process>(
      std::vector<std::string>{"server", "--config", dir + "/fleet.yaml", "--data-dir", dir + "/server", "--listen",
                               "127.0.0.1:0", "--log-level", "info"},
      dir + "/server.log");
  Cleanup cleanup{&agents, &server, marks, slurm};
  server->start();
  auto url = server->wait_for_line("UI and API:  ", 30s);
  ASSERT_TRUE(url.has_value()) << server->log();
  std::string base = *url;
  if (!base.empty() && base.back() == '/') base.pop_back();
  auto token = server->wait_for_line("admin token: ", 5s);
  ASSERT_TRUE(token.has_value()) << server->log();
  const Api api{base, token->substr(0, token->find(' '))};

  // cl-c on Slurm has the 2 GPUs of the cluster's gres.conf.
  const std::map<std::string, int> gpus = {{"cl-a", 2}, {"cl-b", 5}, {"cl-c", slurm ? 2 : 4}};
  for (const auto& [cluster, n] : gpus) {
    auto tok = api.call("POST", "/api/v1/clusters/" + cluster + "/bootstrap-tokens", "{}");
    ASSERT_TRUE(tok.ok() && tok->status == 201) << (tok.ok() ? tok->body : tok.error().message);
    std::vector<std::string> args{"agent", "--server", base, "--token",
                                  std::string(json::parse(tok->body).at("token").as_string()), "--cluster-id", cluster,
                                  "--data-dir", dir + "/agent-" + cluster, "--log-level", "info"};
    if (cluster == "cl-c" && slurm) {
      args.insert(args.end(), {"--executor", "slurm"});
    } else {
      args.insert(args.end(), {"--executor", "local", "--declare-gpus", std::string(kGpu) + ":" + std::to_string(n)});
    }
    agents.push_back(std::make_unique<Process>(args, dir + "/agent-" + cluster + ".log"));
    agents.back()->start();
  }
  Process& agent_a = *agents[0];
  auto logs = [&] {
    std::string out = server->log();
    out = out.size() > 5000 ? "...\n" + out.substr(out.size() - 5000) : out;
    for (const auto& a : agents) {
      std::string l = a->log();
      out += "\n--- agent\n" + (l.size() > 3000 ? "...\n" + l.substr(l.size() - 3000) : l);
    }
    return out;
  };
  auto cluster_state = [&](const std::string& id) -> std::pair<std::string, std::string> {
    auto c = api.get("/api/v1/clusters/" + id);
    if (!c.is_object()) return {};
    return {std::string(c.at("state").as_string()), std::string(c.at("state_reason").as_string())};
  };
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& [c, n] : gpus) {
          if (cluster_state(c).first != "online") return false;
        }
        return true;
      },
      60s))
      << logs();

  auto submit = [&](const std::string& body) {
    std::map<std::string, std::string> ids;  // step name -> task id
    auto r = api.call("POST", "/api/v1/pipelines", body);
    EXPECT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.error().message);
    if (!r.ok() || r->status != 201) return ids;
    const json::value answer = json::parse(r->body);
    for (const auto& t : answer.at("tasks").as_array()) {
      ids[std::string(t.at("name").as_string())] = std::string(t.at("id").as_string());
    }
    return ids;
  };
  auto task = [&](const std::string& id) { return api.get("/api/v1/tasks/" + id); };
  auto state_of = [&](const std::string& id) {
    auto t = task(id);
    return t.is_object() ? std::string(t.at("state").as_string()) : std::string();
  };
  // Where its attempts ran, in order: {"cl-a", "cl-b"}.
  auto clusters_of = [&](const std::string& id) {
    std::vector<std::string> out;
    auto t = task(id);
    if (!t.is_object()) return out;
    for (const auto& a : t.at("attempts").as_array()) out.emplace_back(a.at("cluster_id").as_string());
    return out;
  };
  auto running_on = [&](const std::string& id, const std::string& cluster, std::size_t attempts,
                        std::chrono::milliseconds within = 20s) {
    return eventually(
        [&] {
          auto c = clusters_of(id);
          return state_of(id) == "Running" && c.size() == attempts && c.back() == cluster;
        },
        within);
  };

  // ------------------------------------------ pinned, then by free capacity
  // Slurm starts a job a second or more after sbatch, much later on a loaded machine.
  auto c_long = submit(pipeline_json("c-long", "proj-y", {{"c-long", slurm ? 1 : 3, 150}}, marks, "cl-c"))["c-long"];
  ASSERT_TRUE(running_on(c_long, "cl-c", 1, slurm ? 120s : 20s)) << json::serialize(task(c_long)) << logs();
  // 3 GPUs: cl-a has 2, cl-c 1 free; only cl-b can take it.
  auto b_long = submit(pipeline_json("b-long", "proj-y", {{"b-long", 3, 150}}, marks))["b-long"];
  ASSERT_TRUE(running_on(b_long, "cl-b", 1)) << json::serialize(task(b_long)) << logs();
  auto lost = submit(pipeline_json("lost", "proj-x", {{"lost-1", 1, 60}, {"lost-2", 1, 60}}, marks));
  ASSERT_EQ(lost.size(), 2u);
  for (const auto& [name, id] : lost) ASSERT_TRUE(running_on(id, "cl-a", 1)) << name << logs();

  // The pids of A's commands, from their start marks.
  std::set<pid_t> a_pids;
  ASSERT_TRUE(eventually(
      [&] {
        a_pids.clear();
        for (const auto& m : read_marks(marks)) {
          if (m.kind == "start" && m.attempt.ends_with(".1") &&
              (m.attempt.starts_with(lost["lost-1"]) || m.attempt.starts_with(lost["lost-2"]))) {
            a_pids.insert(m.pid);
          }
        }
        return a_pids.size() == 2;
      },
      10s));

  // ------------------------------------------ cl-b drained, cl-a frozen
  auto drained = api.call("PATCH", "/api/v1/clusters/cl-b", R"({"draining": true})");
  ASSERT_TRUE(drained.ok() && drained->status == 200) << (drained.ok() ? drained->body : drained.error().message);
  const auto frozen_at = SteadyClock::now();
  ASSERT_EQ(kill(agent_a.pid(), SIGSTOP), 0);
  for (pid_t p : a_pids) {
    ASSERT_TRUE(ours(p, marks)) << p;
    ASSERT_EQ(kill(-p, SIGSTOP), 0);
  }

  // Offline (unreachable) within lost_after (5 s) and the 1 s sweep, with room to spare on a busy machine.
  ASSERT_TRUE(eventually([&] { return cluster_state("cl-a") == std::pair<std::string, std::string>{
                                          "offline", "unreachable"}; },
                         15s))
      << logs();
  const auto offline_after = SteadyClock::now() - frozen_at;

  // Nothing of p1 can take them; cl-c (p2) has a free GPU and must not.
  for (const auto& [name, id] : lost) {
    json::value explain;
    ASSERT_TRUE(eventually(
        [&] {
          explain = api.get("/api/v1/tasks/" + id + "/explain");
          return explain.is_object() && explain.at("state").as_string() == "Queued" &&
                 !explain.at("reasons").as_array().empty() &&
                 explain.at("reasons").as_array()[0].at("code").as_string() == "storage_pool";
        },
        10s))
        << name << ": " << json::serialize(explain) << logs();
    const auto& r = explain.at("reasons").as_array()[0].as_object();
    EXPECT_EQ(r.at("details").at("storage_pool").as_string(), "p1");
    EXPECT_EQ(r.at("details").at("clusters_excluded").as_int64(), 1);
    EXPECT_EQ(task(id).at("storage_pool").as_string(), "p1");
    std::string en = cli(base, api.token, {"--lang", "en", "tasks", "explain", id}, dir);
    std::string zh = cli(base, api.token, {"--lang", "zh", "tasks", "explain", id}, dir);
    EXPECT_NE(en.find("storage pool p1 has no cluster online"), std::string::npos) << en;
    EXPECT_NE(en.find("1 cluster in other pools not considered (cl-c)"), std::string::npos) << en;
    EXPECT_NE(zh.find("存储池 p1 中没有在线集群"), std::string::npos) << zh;
    EXPECT_EQ(clusters_of(id), std::vector<std::string>{"cl-a"});
  }

  // ------------------------------------------ cl-b back: they rerun there
  auto undrained = api.call("PATCH", "/api/v1/clusters/cl-b", R"({"draining": false})");
  ASSERT_TRUE(undrained.ok() && undrained->status == 200);
  for (const auto& [name, id] : lost) {
    ASSERT_TRUE(running_on(id, "cl-b", 2)) << name << ": " << json::serialize(task(id)) << logs();
  }
  // The others' work is untouched: still its first attempt, still running.
  EXPECT_EQ(state_of(c_long), "Running");
  EXPECT_EQ(clusters_of(c_long), std::vector<std::string>{"cl-c"});
  EXPECT_EQ(state_of(b_long), "Running");
  EXPECT_EQ(clusters_of(b_long), std::vector<std::string>{"cl-b"});

  // ------------------------------------------ cl-a's agent comes back
  ASSERT_EQ(kill(agent_a.pid(), SIGCONT), 0);
  // It stops its stale attempts (fenced: its lease ran out long ago; the server answers superseded).
  EXPECT_TRUE(eventually(
      [&] {
        for (pid_t p : a_pids) {
          if (process_alive(p)) return false;
        }
        return true;
      },
      15s))
      << logs();
  for (pid_t p : a_pids) {
    if (ours(p, marks)) kill(-p, SIGCONT);  // nothing should be left to continue
  }
  EXPECT_TRUE(eventually([&] { return cluster_state("cl-a").first == "online"; }, 15s)) << logs();

  // ------------------------------------------ everything ends well
  for (const auto& id : {c_long, b_long, lost["lost-1"], lost["lost-2"]}) {
    ASSERT_TRUE(eventually([&] { return state_of(id) == "Succeeded"; }, 40s))
        << id << ": " << json::serialize(task(id)) << logs();
  }
  for (const auto& [name, id] : lost) EXPECT_EQ(clusters_of(id), (std::vector<std::string>{"cl-a", "cl-b"}));
  auto log_of = [&](const std::string& id) {
    auto r = api.call("GET", "/api/v1/tasks/" + id + "/logs");
    return r.ok() && r->status == 200 ? r->body : std::string();
  };
  if (slurm) {
    std::string c_log;
    EXPECT_TRUE(eventually(
        [&] {
          c_log = log_of(c_long);
          return c_log.find("slurm job ") != std::string::npos;
        },
        20s));
    EXPECT_EQ(c_log.find("slurm job none"), std::string::npos) << "c-long did not run as a Slurm job: " << c_log;
    EXPECT_NE(log_of(b_long).find("slurm job none"), std::string::npos) << "b-long ran on a local agent";
  }
  EXPECT_EQ(clusters_of(c_long), std::vector<std::string>{"cl-c"});
  EXPECT_EQ(clusters_of(b_long), std::vector<std::string>{"cl-b"});

  // ------------------------------------------ the marks: never two at once
  std::map<std::string, std::set<std::string>> ends;  // attempt -> kinds seen
  const auto all_marks = read_marks(marks);
  for (const auto& m : all_marks) ends[m.attempt].insert(m.kind);
  for (const auto& id : {c_long, b_long, lost["lost-1"], lost["lost-2"]}) {
    const auto runs = attempt_spans(all_marks, id);
    for (std::size_t i = 1; i < runs.size(); ++i) {
      EXPECT_LT(runs[i - 1].second, runs[i].first) << id << ": attempts " << i << " and " << i + 1 << " overlap";
    }
    EXPECT_EQ(runs.size(), id == c_long || id == b_long ? 1u : 2u) << id;
  }
  for (const auto& [name, id] : lost) {
    EXPECT_FALSE(ends[id + ".1"].count("end")) << name << ": the frozen attempt must never have finished";
    EXPECT_TRUE(ends[id + ".2"].count("end")) << name;
  }
  const auto took = std::chrono::duration_cast<std::chrono::seconds>(SteadyClock::now() - t0);
  std::printf("failover: cl-a offline %lld ms after the freeze; whole test %lld s\n",
              static_cast<long long>(std::chrono::duration_cast<std::chrono::milliseconds>(offline_after).count()),
              static_cast<long long>(took.count()));
}

}  // namespace
}  // namespace cpit
