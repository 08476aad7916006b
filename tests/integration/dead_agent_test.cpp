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

#include <filesystem>
#include <map>
#include <memory>

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

// A server with clusters c1 and c2, and an external local agent for each
// cluster named (a cluster without one never connects), each with its own data dir.
class Fleet {
 public:
  Fleet(const std::string& dir, int lost_after_s, std::vector<std::string> clusters)
      : dir_(dir), clusters_(std::move(clusters)) {
    std::string fleet = kFleet;
    fleet.replace(fleet.find("LOST_AFTER"), 10, std::to_string(lost_after_s));
    std::filesystem::create_directories(dir_ + "/server");
    write_file(dir_ + "/fleet.yaml", fleet);
    marks = dir_ + "/marks";
    write_file(marks, "");
    server_ = std::make_unique<Process>(
        std::vector<std::string>{"server", "--config", dir_ + "/fleet.yaml", "--data-dir", dir_ + "/server",
                                 "--listen", "127.0.0.1:0", "--log-level", "info"},
        dir_ + "/server.log");
  }
  ~Fleet() {
    for (auto& [name, a] : agents_) {
      if (a->pid() > 0) kill(a->pid(), SIGCONT);
      a->stop();
    }
    if (server_) server_->stop();
    // Whatever a failed assertion left running: the processes that wrote marks.
    for (const auto& m : read_marks(marks)) {
      if (process_alive(m.pid) && read_file("/proc/" + std::to_string(m.pid) + "/cmdline").find(marks) !=
                                      std::string::npos) {
        kill(-m.pid, SIGKILL);
      }
    }
  }

  // Starts the server and the agents; false (with the logs in `why`) when they do not come up.
  bool start(std::string& why) {
    server_->start();
    auto url = server_->wait_for_line("UI and API:  ", 30s);
    auto token = server_->wait_for_line("admin token: ", 5s);
    if (!url || !token) {
      why = server_->log();
      return false;
    }
    std::string base = *url;
    if (!base.empty() && base.back() == '/') base.pop_back();
    api = Api{base, token->substr(0, token->find(' '))};
    for (const auto& c : clusters_) {
      auto tok = api.call("POST", "/api/v1/clusters/" + c + "/bootstrap-tokens", "{}");
      if (!tok.ok() || tok->status != 201) {
        why = tok.ok() ? tok->body : tok.error().message;
        return false;
      }
      agents_[c] = std::make_unique<Process>(
          std::vector<std::string>{"agent", "--server", base, "--token",
                                   std::string(json::parse(tok->body).at("token").as_string()), "--cluster-id", c,
                                   "--data-dir", agent_dir(c), "--executor", "local", "--log-level", "info"},
          dir_ + "/agent-" + c + ".log");
      agents_[c]->start();
    }
    for (const auto& c : clusters_) {
      if (!eventually([&] { return cluster_state(c) == "online"; }, 60s)) {
        why = logs();
        return false;
      }
    }
    return true;
  }

  Process& agent(const std::string& cluster) { return *agents_.at(cluster); }
  std::string agent_dir(const std::string& cluster) const { return dir_ + "/agent-" + cluster; }

  std::string cluster_state(const std::string& id) const {
    auto c = api.get("/api/v1/clusters/" + id);
    return c.is_object() ? std::string(c.at("state").as_string()) : std::string();
  }

  // One step that marks for `ticks` * 0.2 s; its task id.
  std::string submit(const std::string& name, int ticks) {
    json::object step{{"name", name},
                      {"command", json::array{"/bin/sh", "-c", json::string(marking_script(marks))}},
                      {"env", json::object{{"TICKS", std::to_string(ticks)}}},
                      {"resources", json::object{{"cpu", "100m"}, {"memory", "16Mi"}}}};
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
  std::vector<std::string> clusters_;
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

TEST(DeadAgentTest, AKilledOrFrozenAgentsTaskStopsBeforeItRunsElsewhere) {
  const std::string dir = make_temp_dir("cp-dead-agent");
  ASSERT_FALSE(dir.empty());
  Fleet f(dir, 8, {"c1", "c2"});
  std::string why;
  ASSERT_TRUE(f.start(why)) << why;

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
  Fleet f(dir, 120, {"c1"});
  std::string why;
  ASSERT_TRUE(f.start(why)) << why;

  // ------------------------------------------ restarted at once: adopted, no gap
  const std::string t1 = f.submit("adopted", 40);
  ASSERT_EQ(f.running_as(t1, 1, 30s), "c1") << f.logs();
  ASSERT_TRUE(f.ticked(t1, 1, 3, 20s)) << f.logs();
  f.agent("c1").kill_hard();
  f.agent("c1").start();
  ASSERT_TRUE(eventually([&] { return f.state_of(t1) == "Succeeded"; }, 60s)) << f.logs();
  ASSERT_EQ(f.attempts(t1).size(), 1u) << "rerun although the agent came back within its lease";
  std::int64_t gap = 0, prev = 0;
  int ticks = 0;
  for (const auto& m : read_marks(f.marks)) {
    if (m.attempt != t1 + ".1") continue;
    if (prev != 0) gap = std::max(gap, m.ns - prev);
    prev = m.ns;
    ticks += m.kind == "tick";
  }
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

}  // namespace
}  // namespace cpit
