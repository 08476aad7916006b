// A dead, hung or restarted agent never leaves a task running twice
// (DESIGN.md "Fencing and outages"; issue 50), through the real binaries:
// one `cubeplane server` (lease_ttl_s 6, as DESIGN.md has tests use) and
// external `cubeplane agent --executor local` processes.
//
// The supervisor shim of every replica holds the agent's lease deadline
// (<data>/lease.json, CLOCK_BOOTTIME): a living agent extends it on every
// answered sync; when it passes, the shim stops the task by itself. So:
//
//   kill -9 of the agent, never restarted   the task stops at the deadline
//                                           (L - m after the last answered
//                                           sync), before the server reruns
//                                           it elsewhere (lost_after_s >= L)
//   SIGSTOP of the agent alone              the same; after SIGCONT the agent
//                                           learns it was superseded
//   agent restarted after the deadline      attempt 1 is reported fenced
//                                           (Lost), never adopted
//   agent restarted before it               the task goes on as attempt 1
//
// Every task writes its own timestamped marks (harness.h): "stopped before
// the rerun started" is the last mark of attempt 1 against the first of
// attempt 2, not an assumption.
#include <gtest/gtest.h>

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <thread>

#include "harness.h"

namespace cpit {
namespace {

namespace json = boost::json;
using namespace std::chrono_literals;
using SteadyClock = std::chrono::steady_clock;

constexpr const char* kFleet = R"(apiVersion: cubeplane/v1
kind: Server
spec: {lease_ttl_s: 6, lost_after_s: LOST_AFTER}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: c1}
spec: {executor: local, storage_pool: p1, embedded_agent: false}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: c2}
spec: {executor: local, storage_pool: p1, embedded_agent: false}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg}
spec:
  clusters: [c1, c2]
  quota:
    cpu: {guaranteed: "4"}
    memory: {guaranteed: 4Gi}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: proj}
spec: {default_resource_group: rg}
)";

// A server on `fleet_yaml` (LOST_AFTER replaced), and external agents
// started one by one, each with its own data dir.
class Fleet {
 public:
  Fleet(const std::string& dir, int lost_after_s, const std::string& fleet_yaml = kFleet,
        const std::vector<std::string>& server_flags = {})
      : dir_(dir) {
    std::string fleet = fleet_yaml;
    fleet.replace(fleet.find("LOST_AFTER"), 10, std::to_string(lost_after_s));
    std::filesystem::create_directories(dir_ + "/server");
    write_file(dir_ + "/fleet.yaml", fleet);
    marks = dir_ + "/marks";
    write_file(marks, "");
    // A fixed port, so that a restarted server is where its agents look.
    std::vector<std::string> args{"server",    "--config", dir_ + "/fleet.yaml", "--data-dir", dir_ + "/server",
                                  "--listen", "127.0.0.1:" + std::to_string(free_port()), "--log-level", "info"};
    args.insert(args.end(), server_flags.begin(), server_flags.end());
    server_ = std::make_unique<Process>(args, dir_ + "/server.log");
  }
  ~Fleet() {
    for (auto& [name, a] : agents_) {
      if (a->pid() > 0) kill(a->pid(), SIGCONT);
      a->stop();
    }
    if (server_) server_->stop();
    kill_marking_tasks(marks);  // whatever a failed assertion left running
  }

  // Starts the server and a local agent for each of `clusters`; false (with the logs in `why`) when they do not
  // come up.
  bool start(const std::vector<std::string>& clusters, std::string& why) {
    server_->start();
    auto url = server_->wait_for_line("UI and API:  ", 30s);
    auto token = server_->wait_for_line("admin token: ", 5s);
    if (!url || !token) {
      why = server_->log();
      return false;
    }
    base_ = *url;
    if (!base_.empty() && base_.back() == '/') base_.pop_back();
    api = Api{base_, token->substr(0, token->find(' '))};
    for (const auto& c : clusters) {
      if (!add_agent(c, {"--executor", "local"}, why)) return false;
    }
    return true;
  }

  // Starts an agent for `cluster` (talking to `server_url`, by default the
  // server's own) and waits until the cluster is online.
  bool add_agent(const std::string& cluster, const std::vector<std::string>& executor, std::string& why,
                 const std::string& server_url = "") {
    auto tok = api.call("POST", "/api/v1/clusters/" + cluster + "/bootstrap-tokens", "{}");
    if (!tok.ok() || tok->status != 201) {
      why = tok.ok() ? tok->body : tok.error().message;
      return false;
    }
    std::vector<std::string> args{"agent", "--server", server_url.empty() ? base_ : server_url, "--token",
                                  std::string(json::parse(tok->body).at("token").as_string()), "--cluster-id", cluster,
                                  "--data-dir", agent_dir(cluster), "--log-level", "info"};
    args.insert(args.end(), executor.begin(), executor.end());
    agents_[cluster] = std::make_unique<Process>(args, dir_ + "/agent-" + cluster + ".log");
    agents_[cluster]->start();
    if (!eventually([&] { return cluster_state(cluster) == "online"; }, 60s)) {
      why = logs();
      return false;
    }
    return true;
  }

  Process& agent(const std::string& cluster) { return *agents_.at(cluster); }
  Process& server() { return *server_; }
  int server_port() const { return std::stoi(base_.substr(base_.rfind(':') + 1)); }
  std::string agent_dir(const std::string& cluster) const { return dir_ + "/agent-" + cluster; }

  std::string cluster_state(const std::string& id) const {
    auto c = api.get("/api/v1/clusters/" + id);
    return c.is_object() ? std::string(c.at("state").as_string()) : std::string();
  }

  // One step that marks for `ticks` * 0.2 s; its task id.
  std::string submit(const std::string& name, int ticks, int gpus = 0) {
    json::object resources{{"cpu", "100m"}, {"memory", "16Mi"}};
    if (gpus > 0) {
      resources["gpu"] = gpus;
      resources["gpu_type"] = "a100";
    }
    json::object step{{"name", name},
                      {"command", json::array{"/bin/sh", "-c", json::string(marking_script(marks))}},
                      {"env", json::object{{"TICKS", std::to_string(ticks)}}},
                      {"resources", std::move(resources)}};
    json::object doc{{"apiVersion", "cubeplane/v1"},
                     {"kind", "Pipeline"},
                     {"metadata", json::object{{"name", name}, {"project_group", "proj"}}},
                     {"spec", json::object{{"steps", json::array{std::move(step)}}}}};
    auto r = api.call("POST", "/api/v1/pipelines", json::serialize(doc));
    EXPECT_TRUE(r.ok() && r->status == 201) << (r.ok() ? r->body : r.error().message);
    if (!r.ok() || r->status != 201) return {};
    return std::string(json::parse(r->body).at("tasks").as_array().at(0).at("id").as_string());
  }

  json::value task(const std::string& id) const { return api.get("/api/v1/tasks/" + id); }
  std::string state_of(const std::string& id) const {
    auto t = task(id);
    return t.is_object() ? std::string(t.at("state").as_string()) : std::string();
  }
  // (cluster, state, message) of each attempt, in order.
  struct AttemptView {
    std::string cluster, state, message;
  };
  std::vector<AttemptView> attempts(const std::string& id) const {
    std::vector<AttemptView> out;
    auto t = task(id);
    if (!t.is_object()) return out;
    for (const auto& a : t.at("attempts").as_array()) {
      out.push_back({std::string(a.at("cluster_id").as_string()), std::string(a.at("state").as_string()),
                     std::string(a.at("message").as_string())});
    }
    return out;
  }
  // Running as attempt `n` (1-based); where.
  std::string running_as(const std::string& id, std::size_t n, std::chrono::milliseconds within) const {
    std::string where;
    eventually(
        [&] {
          auto as = attempts(id);
          if (state_of(id) != "Running" || as.size() != n || as.back().state != "Running") return false;
          where = as.back().cluster;
          return true;
        },
        within);
    return where;
  }
  // The task's marks have reached `count` ticks of attempt n.
  bool ticked(const std::string& id, int n, int count, std::chrono::milliseconds within) const {
    const std::string attempt = id + "." + std::to_string(n);
    return eventually(
        [&] {
          int seen = 0;
          for (const auto& m : read_marks(marks)) seen += m.attempt == attempt && m.kind == "tick";
          return seen >= count;
        },
        within);
  }
  // The pid that wrote attempt n's marks.
  pid_t pid_of(const std::string& id, int n) const {
    for (const auto& m : read_marks(marks)) {
      if (m.attempt == id + "." + std::to_string(n)) return m.pid;
    }
    return 0;
  }

  std::string logs() const {
    std::string out = server_->log();
    out = out.size() > 4000 ? "...\n" + out.substr(out.size() - 4000) : out;
    for (const auto& [name, a] : agents_) {
      std::string l = a->log();
      out += "\n--- agent " + name + "\n" + (l.size() > 3000 ? "...\n" + l.substr(l.size() - 3000) : l);
    }
    return out;
  }

  Api api;
  std::string marks;

 private:
  std::string dir_;
  std::string base_;
  std::unique_ptr<Process> server_;
  std::map<std::string, std::unique_ptr<Process>> agents_;
};

std::string other(const std::string& c) { return c == "c1" ? "c2" : "c1"; }

// Attempt 1 ended (last mark) before attempt 2 began (first mark).
void expect_no_overlap(const Fleet& f, const std::string& id) {
  const auto spans = attempt_spans(read_marks(f.marks), id);
  ASSERT_EQ(spans.size(), 2u) << "marks of " << spans.size() << " attempts";
  EXPECT_LT(spans[0].second, spans[1].first)
      << "attempt 1 still marked " << (spans[0].second - spans[1].first) / 1'000'000 << " ms after attempt 2 began";
  std::printf("dead agent: attempt 1's last mark %lld ms before attempt 2's first\n",
              static_cast<long long>((spans[1].first - spans[0].second) / 1'000'000));
}

// The longest gap between two marks of `attempt`, and its tick count.
std::pair<std::int64_t, int> gaps_of(const Fleet& f, const std::string& attempt) {
  std::int64_t gap = 0, prev = 0;
  int ticks = 0;
  for (const auto& m : read_marks(f.marks)) {
    if (m.attempt != attempt) continue;
    if (prev != 0) gap = std::max(gap, m.ns - prev);
    prev = m.ns;
    ticks += m.kind == "tick";
  }
  return {gap, ticks};
}

TEST(DeadAgentTest, AKilledOrFrozenAgentsTaskStopsBeforeItRunsElsewhere) {
  const std::string dir = make_temp_dir("cp-dead-agent");
  ASSERT_FALSE(dir.empty());
  Fleet f(dir, 8);
  std::string why;
  ASSERT_TRUE(f.start({"c1", "c2"}, why)) << why;

  // ------------------------------------------ kill -9, never restarted
  const std::string t1 = f.submit("killed", 1000);
  const std::string first = f.running_as(t1, 1, 30s);
  ASSERT_FALSE(first.empty()) << f.logs();
  ASSERT_TRUE(f.ticked(t1, 1, 3, 20s)) << f.logs();
  const pid_t pid1 = f.pid_of(t1, 1);
  f.agent(first).kill_hard();
  const auto killed_at = SteadyClock::now();
  // The shim stops it within L - m (5 s) of the last answered sync, plus its grace.
  EXPECT_TRUE(eventually([&] { return !process_alive(pid1); }, 10s)) << "attempt 1 runs on without its agent";
  std::printf("dead agent: attempt 1 stopped %lld ms after kill -9 of its agent\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - killed_at).count()));
  ASSERT_EQ(f.running_as(t1, 2, 40s), other(first)) << f.logs();
  ASSERT_TRUE(f.ticked(t1, 2, 5, 20s)) << f.logs();
  expect_no_overlap(f, t1);
  EXPECT_EQ(f.attempts(t1).at(0).state, "Lost");
  ASSERT_TRUE(f.api.call("POST", "/api/v1/tasks/" + t1 + "/cancel", "{}").ok());

  // The killed agent comes back (a new chain: its lease ran out long ago) for the next case.
  f.agent(first).start();
  ASSERT_TRUE(eventually([&] { return f.cluster_state(first) == "online"; }, 30s)) << f.logs();
  EXPECT_TRUE(eventually([&] { return f.state_of(t1) == "Cancelled"; }, 30s)) << f.logs();

  // ------------------------------------------ SIGSTOP of the agent alone
  const std::string t2 = f.submit("frozen", 1000);
  const std::string where = f.running_as(t2, 1, 30s);
  ASSERT_FALSE(where.empty()) << f.logs();
  ASSERT_TRUE(f.ticked(t2, 1, 3, 20s)) << f.logs();
  const pid_t pid2 = f.pid_of(t2, 1);
  ASSERT_EQ(kill(f.agent(where).pid(), SIGSTOP), 0);
  EXPECT_TRUE(eventually([&] { return !process_alive(pid2); }, 10s)) << "attempt 1 runs on under a frozen agent";
  ASSERT_EQ(f.running_as(t2, 2, 40s), other(where)) << f.logs();
  ASSERT_TRUE(f.ticked(t2, 2, 5, 20s)) << f.logs();
  expect_no_overlap(f, t2);

  // Continued, the agent learns that attempt 1 was superseded: the server
  // keeps it Lost, takes the agent's report of it and the agent forgets it.
  ASSERT_EQ(kill(f.agent(where).pid(), SIGCONT), 0);
  EXPECT_TRUE(eventually([&] { return f.cluster_state(where) == "online"; }, 30s)) << f.logs();
  EXPECT_TRUE(eventually([&] { return !std::filesystem::exists(f.agent_dir(where) + "/attempts/" + t2 + ".1"); },
                         30s))
      << "the agent still holds the superseded attempt\n"
      << f.logs();
  auto as = f.attempts(t2);
  ASSERT_EQ(as.size(), 2u);
  EXPECT_EQ(as[0].state, "Lost");
  EXPECT_EQ(as[1].state, "Running");
  EXPECT_TRUE(f.ticked(t2, 2, 10, 20s));
  const auto spans = attempt_spans(read_marks(f.marks), t2);
  EXPECT_LT(spans.at(0).second, spans.at(1).first) << "attempt 1 came back to life";
}

TEST(DeadAgentTest, ARestartedAgentAdoptsOnlyWhatItsLeaseStillCovers) {
  const std::string dir = make_temp_dir("cp-dead-agent-restart");
  ASSERT_FALSE(dir.empty());
  // lost_after long enough that the server never declares c1 lost here: what
  // ends attempt 1 is the agent's own report.
  Fleet f(dir, 120);
  std::string why;
  ASSERT_TRUE(f.start({"c1"}, why)) << why;

  // ------------------------------------------ restarted at once: adopted, no gap
  const std::string t1 = f.submit("adopted", 40);
  ASSERT_EQ(f.running_as(t1, 1, 30s), "c1") << f.logs();
  ASSERT_TRUE(f.ticked(t1, 1, 3, 20s)) << f.logs();
  f.agent("c1").kill_hard();
  f.agent("c1").start();
  ASSERT_TRUE(eventually([&] { return f.state_of(t1) == "Succeeded"; }, 60s)) << f.logs();
  ASSERT_EQ(f.attempts(t1).size(), 1u) << "rerun although the agent came back within its lease";
  const auto [gap, ticks] = gaps_of(f, t1 + ".1");
  EXPECT_EQ(ticks, 40);
  EXPECT_LT(gap, 2'000'000'000LL) << "the task paused " << gap / 1'000'000 << " ms across the restart";
  std::printf("dead agent: longest gap between marks across a restart within the lease: %lld ms\n",
              static_cast<long long>(gap / 1'000'000));

  // ------------------------------------------ restarted after the deadline: fenced, never adopted
  const std::string t2 = f.submit("fenced", 1000);
  ASSERT_EQ(f.running_as(t2, 1, 30s), "c1") << f.logs();
  ASSERT_TRUE(f.ticked(t2, 1, 3, 20s)) << f.logs();
  const pid_t pid = f.pid_of(t2, 1);
  f.agent("c1").kill_hard();
  ASSERT_TRUE(eventually([&] { return !process_alive(pid); }, 15s)) << "attempt 1 runs on without its agent";
  const std::int64_t last1 = attempt_spans(read_marks(f.marks), t2).at(0).second;
  f.agent("c1").start();
  ASSERT_EQ(f.running_as(t2, 2, 40s), "c1") << f.logs();
  auto as = f.attempts(t2);
  EXPECT_EQ(as[0].state, "Lost");
  EXPECT_NE(as[0].message.find("lease ran out"), std::string::npos) << as[0].message;
  ASSERT_TRUE(f.ticked(t2, 2, 3, 20s)) << f.logs();
  const auto spans = attempt_spans(read_marks(f.marks), t2);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_EQ(spans[0].second, last1) << "attempt 1 marked again after the restart: it was adopted";
  EXPECT_LT(spans[0].second, spans[1].first);
  ASSERT_TRUE(f.api.call("POST", "/api/v1/tasks/" + t2 + "/cancel", "{}").ok());
}

// ------------------------------------------------ control-plane outages
//
// The other promise (issue 42): running work does not stop because the
// control plane is down. The agent's syncs fail; it reads the leader's
// beacon (here the server's file:// object store, which agents on the same
// machine read): standing still means nobody judges anyone's silence, so
// its lease runs on and so do the tasks. Ten leases of a frozen server,
// then ten of a killed one: the task's own marks show no gap over 2 s, and
// it ends Succeeded as attempt 1.

// Task `t` ended Succeeded as its only attempt, all `ticks` marked, never
// pausing over 2 s through `outage`.
void expect_one_unbroken_attempt(const Fleet& f, const std::string& t, int ticks, const std::string& outage) {
  ASSERT_TRUE(eventually([&] { return f.state_of(t) == "Succeeded"; }, 120s)) << f.logs();
  const auto as = f.attempts(t);
  ASSERT_EQ(as.size(), 1u) << "rerun after " << outage;
  EXPECT_EQ(as[0].state, "Succeeded");
  const auto [gap, seen] = gaps_of(f, t + ".1");
  EXPECT_EQ(seen, ticks);
  EXPECT_LT(gap, 2'000'000'000LL) << "the task paused " << gap / 1'000'000 << " ms";
  std::printf("outage: longest gap between marks over %s: %lld ms\n", outage.c_str(),
              static_cast<long long>(gap / 1'000'000));
  EXPECT_EQ(f.cluster_state("c1"), "online");
}

TEST(OutageTest, RunningWorkOutlivesAFrozenAndThenAKilledServer) {
  const std::string dir = make_temp_dir("cp-outage");
  ASSERT_FALSE(dir.empty());
  Fleet f(dir, 8);
  std::string why;
  ASSERT_TRUE(f.start({"c1"}, why)) << why;
  constexpr auto kTenLeases = 60s;
  // Long enough for both outages and the server's returns: ~150 s of marks.
  const std::string t = f.submit("outlives", 750);
  ASSERT_EQ(f.running_as(t, 1, 30s), "c1") << f.logs();
  ASSERT_TRUE(f.ticked(t, 1, 5, 20s)) << f.logs();
  const pid_t pid = f.pid_of(t, 1);

  // ------------------------------------------ the server frozen (SIGSTOP)
  ASSERT_EQ(kill(f.server().pid(), SIGSTOP), 0);
  std::this_thread::sleep_for(kTenLeases);  // the outage itself
  EXPECT_TRUE(process_alive(pid)) << "the task stopped while the server was frozen\n" << f.logs();
  ASSERT_EQ(kill(f.server().pid(), SIGCONT), 0);
  ASSERT_TRUE(eventually([&] { return f.state_of(t) == "Running"; }, 20s)) << f.logs();
  // The server judges again (a new chain) and still hears c1: it stays online.
  std::this_thread::sleep_for(10s);
  EXPECT_EQ(f.cluster_state("c1"), "online") << f.logs();

  // ------------------------------------------ the server killed, restarted ten leases later
  f.server().kill_hard();
  std::this_thread::sleep_for(kTenLeases);
  EXPECT_TRUE(process_alive(pid)) << "the task stopped while the server was down\n" << f.logs();
  f.server().start();
  ASSERT_TRUE(f.server().wait_for_line("UI and API:  ", 30s).has_value()) << f.logs();

  expect_one_unbroken_attempt(f, t, 750, "two 60 s outages of the server");
}

// PostgreSQL stopped for ten leases under running work: the server can
// neither hear nor record, so its chain breaks (the term renewal fails) and
// the beacon stands still; the agent keeps its task, which ends Succeeded
// as attempt 1 once the store is back. A PostgreSQL instance of its own
// (scripts/postgres-test-server.sh, paused and resumed on its port).
TEST(OutageTest, RunningWorkOutlivesPostgresStoppedForTenLeases) {
  const std::string dir = make_temp_dir("cp-pg-outage");
  ASSERT_FALSE(dir.empty());
  OwnPostgres pg(dir);
  bool skip = false;
  std::string why;
  const std::string url = start_test_postgres(pg, skip, why);
  if (skip) GTEST_SKIP() << why;
  ASSERT_FALSE(url.empty()) << why;
  Fleet f(dir, 8, kFleet, {"--store", url});
  ASSERT_TRUE(f.start({"c1"}, why)) << why;
  const std::string t = f.submit("outlives-pg", 450);  // ~90 s
  ASSERT_EQ(f.running_as(t, 1, 30s), "c1") << f.logs();
  ASSERT_TRUE(f.ticked(t, 1, 5, 20s)) << f.logs();
  const pid_t pid = f.pid_of(t, 1);

  ASSERT_TRUE(pg.pause());
  std::this_thread::sleep_for(60s);  // the outage itself: ten leases
  EXPECT_TRUE(process_alive(pid)) << "the task stopped while PostgreSQL was down\n" << f.logs();
  ASSERT_TRUE(pg.resume());

  expect_one_unbroken_attempt(f, t, 450, "60 s of PostgreSQL stopped");
}

// The same beacon must not keep a task alive whose agent is merely cut off
// from a live server: the beacon moves, so the agent fences at L - m, before
// the server reruns the task in the pool (after D). A TCP proxy that stops
// forwarding stands for the partition; the agent and its task stay alive.
// When the proxy forwards again, the agent learns it was superseded.
TEST(OutageTest, AnAgentCutOffFromALiveServerFencesBeforeTheRerun) {
  const std::string dir = make_temp_dir("cp-cutoff");
  ASSERT_FALSE(dir.empty());
  Fleet f(dir, 8);
  std::string why;
  ASSERT_TRUE(f.start({}, why)) << why;
  TcpProxy proxy(f.server_port());
  ASSERT_GT(proxy.port(), 0);
  ASSERT_TRUE(f.add_agent("c1", {"--executor", "local"}, why, "http://127.0.0.1:" + std::to_string(proxy.port())))
      << why;
  const std::string t = f.submit("cut-off", 1000);
  ASSERT_EQ(f.running_as(t, 1, 30s), "c1") << f.logs();
  ASSERT_TRUE(f.add_agent("c2", {"--executor", "local"}, why)) << why;
  ASSERT_TRUE(f.ticked(t, 1, 5, 20s)) << f.logs();
  const pid_t pid = f.pid_of(t, 1);

  proxy.cut();
  const auto cut_at = SteadyClock::now();
  EXPECT_TRUE(eventually([&] { return !process_alive(pid); }, 15s))
      << "a cut-off agent kept its task while the server lived\n"
      << f.logs();
  std::printf("cut off: attempt 1 stopped %lld ms after the cut\n",
              static_cast<long long>(
                  std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - cut_at).count()));
  EXPECT_TRUE(f.agent("c1").running()) << "the agent itself must stay alive";
  ASSERT_EQ(f.running_as(t, 2, 40s), "c2") << f.logs();
  ASSERT_TRUE(f.ticked(t, 2, 5, 20s)) << f.logs();
  expect_no_overlap(f, t);

  proxy.restore();
  EXPECT_TRUE(eventually([&] { return f.cluster_state("c1") == "online"; }, 30s)) << f.logs();
  EXPECT_TRUE(
      eventually([&] { return !std::filesystem::exists(f.agent_dir("c1") + "/attempts/" + t + ".1"); }, 30s))
      << "the agent still holds the superseded attempt\n"
      << f.logs();
  const auto as = f.attempts(t);
  ASSERT_EQ(as.size(), 2u);
  EXPECT_EQ(as[0].state, "Lost");
  EXPECT_EQ(as[1].state, "Running");
  ASSERT_TRUE(f.api.call("POST", "/api/v1/tasks/" + t + "/cancel", "{}").ok());
}

// ---------------------------------------------------------------- Slurm
//
// slurmd runs a job to its end whatever happens to the agent, so nothing on
// the cluster's side fences it. The server therefore never reruns a silent
// Slurm cluster's attempts by itself: they become Unknown, and run again
// only when the agent reports their end or an operator confirms them lost.

constexpr const char* kSlurmFleet = R"(apiVersion: cubeplane/v1
kind: Server
spec: {lease_ttl_s: 6, lost_after_s: LOST_AFTER}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: s1}
spec: {executor: slurm, storage_pool: p1, embedded_agent: false}
---
apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: c2}
spec: {executor: local, storage_pool: p1, embedded_agent: false}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg}
spec:
  clusters: [s1, c2]
  quota:
    gpu/a100: {guaranteed: 4}
    cpu: {guaranteed: "4"}
    memory: {guaranteed: 4Gi}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: proj}
spec: {default_resource_group: rg}
)";

int ticks_of(const Fleet& f, const std::string& attempt) {
  int n = 0;
  for (const auto& m : read_marks(f.marks)) n += m.attempt == attempt && m.kind == "tick";
  return n;
}

TEST(DeadAgentTest, ASlurmJobWhoseAgentDiedIsNeverRunTwiceAtOnce) {
  const char* slurm = std::getenv("CUBEPLANE_TEST_SLURM");
  const char* ci = std::getenv("CI");
  if (!slurm || !*slurm || std::string(slurm) == "off") {
    if (ci && std::string(ci) == "true" && !(slurm && std::string(slurm) == "off")) {
      FAIL() << "CI=true but no Slurm cluster (CUBEPLANE_TEST_SLURM): scripts/test.sh starts one";
    }
    GTEST_SKIP() << "needs a Slurm cluster: eval \"$(scripts/slurm-test-cluster.sh env)\" (as root)";
  }
  const std::string dir = make_temp_dir("cp-dead-slurm-agent");
  ASSERT_FALSE(dir.empty());
  Fleet f(dir, 8, kSlurmFleet);
  std::string why;
  ASSERT_TRUE(f.start({}, why)) << why;
  const std::vector<std::string> slurm_agent{"--executor", "slurm"};
  ASSERT_TRUE(f.add_agent("s1", slurm_agent, why)) << why;
  struct Cancel {  // its jobs, whatever happens (other tests share the cluster)
    std::string name;
    ~Cancel() {
      if (!name.empty()) std::system(("scancel --name=cp_" + name + ".1_r0 >/dev/null 2>&1").c_str());
    }
  } cancel;

  // Slurm starts a job a second or more after sbatch, much later on a loaded machine.
  const std::string t = f.submit("on-slurm", 3000, 1);
  cancel.name = t;
  ASSERT_EQ(f.running_as(t, 1, 240s), "s1") << f.logs();
  ASSERT_TRUE(f.ticked(t, 1, 3, 120s)) << f.logs();
  // A local cluster of the same pool with room: where a rerun would go.
  ASSERT_TRUE(f.add_agent("c2", {"--executor", "local", "--declare-gpus", "a100:2"}, why)) << why;

  // ------------------------------------------ kill -9: Unknown, not rerun; the job runs on
  f.agent("s1").kill_hard();
  ASSERT_TRUE(eventually([&] { return f.cluster_state("s1") == "offline"; }, 30s)) << f.logs();
  ASSERT_TRUE(eventually([&] { return f.attempts(t).at(0).state == "Unknown"; }, 15s)) << f.logs();
  EXPECT_NE(f.attempts(t).at(0).message.find("confirm-lost"), std::string::npos) << f.attempts(t).at(0).message;
  const int before = ticks_of(f, t + ".1");
  std::this_thread::sleep_for(6s);  // several scheduling cycles
  EXPECT_EQ(f.attempts(t).size(), 1u) << "rerun while its Slurm job may still run";
  EXPECT_GT(ticks_of(f, t + ".1"), before) << "the Slurm job stopped with its agent";

  // ------------------------------------------ the agent comes back: attempt 1 goes on
  f.agent("s1").start();
  ASSERT_TRUE(eventually([&] { return f.cluster_state("s1") == "online"; }, 60s)) << f.logs();
  ASSERT_TRUE(eventually([&] { return f.attempts(t).at(0).state == "Running"; }, 30s)) << f.logs();
  EXPECT_EQ(f.attempts(t).size(), 1u);

  // ------------------------------------------ killed again; the operator ends the job and confirms
  f.agent("s1").kill_hard();
  ASSERT_TRUE(eventually([&] { return f.attempts(t).at(0).state == "Unknown"; }, 40s)) << f.logs();
  ASSERT_EQ(std::system(("scancel --name=cp_" + t + ".1_r0").c_str()), 0);
  const pid_t pid = f.pid_of(t, 1);
  ASSERT_TRUE(eventually([&] { return !process_alive(pid); }, 60s)) << "scancel did not end the job";
  auto confirmed = f.api.call("POST", "/api/v1/clusters/s1/confirm-lost", "{}");
  ASSERT_TRUE(confirmed.ok() && confirmed->status == 200) << (confirmed.ok() ? confirmed->body : "");
  ASSERT_EQ(f.running_as(t, 2, 60s), "c2") << f.logs();
  ASSERT_TRUE(f.ticked(t, 2, 5, 30s)) << f.logs();
  const auto spans = attempt_spans(read_marks(f.marks), t);
  ASSERT_EQ(spans.size(), 2u);
  EXPECT_LT(spans[0].second, spans[1].first) << "the two copies overlapped";
  ASSERT_TRUE(f.api.call("POST", "/api/v1/tasks/" + t + "/cancel", "{}").ok());
}

}  // namespace
}  // namespace cpit
