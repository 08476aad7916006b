// Several servers on one PostgreSQL (issue 42; server/beacon.h), through
// the real binaries: two `cubeplane server` processes on one database and
// one object store, two external agents given both servers
// (`--server A,B`), and clients that submit with an Idempotency-Key and
// retry on the other server when one does not answer.
//
//   leader killed (kill -9) during a burst of submits   the other server
//       takes the term and places again within seconds; every accepted
//       task runs exactly once; no submit makes two pipelines
//   rolling restart (SIGTERM, start, then the other)    the same, and a
//       long task keeps running as attempt 1 without a pause
//
// "Ran once" is measured on the marks the tasks write themselves
// (harness.h): one attempt id per task, one start mark, one end mark.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>

#include "harness.h"

namespace cpit {
namespace {

namespace json = boost::json;
using Millis = std::int64_t;
using namespace std::chrono_literals;

constexpr const char* kFleet = R"(apiVersion: cubeplane/v1
kind: Server
spec: {lease_ttl_s: 6, lost_after_s: 8}
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
    cpu: {guaranteed: "8"}
    memory: {guaranteed: 8Gi}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: proj}
spec: {default_resource_group: rg}
)";

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Two servers "a" and "b" on one database, and agents for c1 and c2.
class TwoServers {
 public:
  TwoServers(const std::string& dir, const std::string& store) : dir_(dir) {
    write_file(dir_ + "/fleet.yaml", kFleet);
    marks = dir_ + "/marks";
    write_file(marks, "");
    for (const std::string name : {"a", "b"}) {
      const int port = free_port();
      urls_[name] = "http://127.0.0.1:" + std::to_string(port);
      servers_[name] = std::make_unique<Process>(
          std::vector<std::string>{"server", "--config", dir_ + "/fleet.yaml", "--data-dir", dir_ + "/server-" + name,
                                   "--listen", "127.0.0.1:" + std::to_string(port), "--store", store, "--objects",
                                   "file://" + dir_ + "/objects", "--log-level", "info"},
          dir_ + "/server-" + name + ".log");
    }
  }
  ~TwoServers() {
    for (auto& [name, a] : agents_) a->stop();
    for (auto& [name, s] : servers_) s->stop();
    kill_marking_tasks(marks);
  }

  // Server a first (it creates the admin and leads), then b, then the agents.
  bool start(std::string& why) {
    servers_["a"]->start();
    auto token = servers_["a"]->wait_for_line("admin token: ", 30s);
    if (!token) {
      why = logs();
      return false;
    }
    token_ = token->substr(0, token->find(' '));
    if (!start_server("b", why)) return false;
    for (const std::string c : {"c1", "c2"}) {
      auto tok = api("a").call("POST", "/api/v1/clusters/" + c + "/bootstrap-tokens", "{}");
      if (!tok.ok() || tok->status != 201) {
        why = tok.ok() ? tok->body : tok.error().message;
        return false;
      }
      agents_[c] = std::make_unique<Process>(
          std::vector<std::string>{"agent", "--server", urls_["a"] + "," + urls_["b"], "--token",
                                   std::string(json::parse(tok->body).at("token").as_string()), "--cluster-id", c,
                                   "--data-dir", dir_ + "/agent-" + c, "--log-level", "info", "--executor", "local"},
          dir_ + "/agent-" + c + ".log");
      agents_[c]->start();
    }
    for (const std::string c : {"c1", "c2"}) {
      if (!eventually([&] { return cluster_state(c) == "online"; }, 60s)) {
        why = logs();
        return false;
      }
    }
    return true;
  }

  bool start_server(const std::string& name, std::string& why) {
    servers_[name]->start();
    if (!servers_[name]->wait_for_line("UI and API:  ", 30s)) {
      why = logs();
      return false;
    }
    return true;
  }

  Api api(const std::string& name) const { return Api{urls_.at(name), token_}; }
  Process& server(const std::string& name) { return *servers_.at(name); }
  std::vector<std::string> names() const { return {"a", "b"}; }

  // The server ("a" or "b") that says it leads, "" when none does.
  std::string leader() const {
    for (const auto& name : names()) {
      auto v = api(name).get("/api/v1/control-plane");
      if (!v.is_object()) continue;
      const auto& me = v.at("servers").as_array().at(0).as_object();
      if (me.at("leader").as_bool()) return name;
    }
    return "";
  }

  std::string cluster_state(const std::string& id) const {
    for (const auto& name : names()) {
      auto c = api(name).get("/api/v1/clusters/" + id);
      if (c.is_object()) return std::string(c.at("state").as_string());
    }
    return "";
  }

  std::string logs() const {
    std::string out;
    for (const auto& [name, s] : servers_) {
      std::string l = s->log();
      out += "\n--- server " + name + "\n" + (l.size() > 4000 ? "...\n" + l.substr(l.size() - 4000) : l);
    }
    for (const auto& [name, a] : agents_) {
      std::string l = a->log();
      out += "\n--- agent " + name + "\n" + (l.size() > 3000 ? "...\n" + l.substr(l.size() - 3000) : l);
    }
    return out;
  }

  std::string marks;

 private:
  std::string dir_;
  std::string token_;
  std::map<std::string, std::string> urls_;
  std::map<std::string, std::unique_ptr<Process>> servers_;
  std::map<std::string, std::unique_ptr<Process>> agents_;
};

std::string pipeline(const std::string& name, const std::string& marks, int ticks) {
  json::object step{{"name", "s"},
                    {"command", json::array{"/bin/sh", "-c", json::string(marking_script(marks))}},
                    {"env", json::object{{"TICKS", std::to_string(ticks)}}},
                    {"resources", json::object{{"cpu", "100m"}, {"memory", "16Mi"}}}};
  json::object doc{{"apiVersion", "cubeplane/v1"},
                   {"kind", "Pipeline"},
                   {"metadata", json::object{{"name", name}, {"project_group", "proj"}}},
                   {"spec", json::object{{"steps", json::array{std::move(step)}}}}};
  return json::serialize(doc);
}

// Clients that submit pipelines as the CLI does: one Idempotency-Key per
// pipeline, kept across retries; a retry goes to the other server when one
// did not answer (or answered 502/503/504).
class Submitters {
 public:
  Submitters(const TwoServers& f, const std::string& prefix, int count, int threads, int ticks) {
    for (int t = 0; t < threads; ++t) {
      threads_.emplace_back([this, &f, prefix, count, threads, ticks, t] {
        for (int i = t; i < count && !stop_; i += threads) submit(f, prefix + std::to_string(i), ticks, i);
      });
    }
  }
  ~Submitters() { join(); }
  void join() {
    for (auto& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  void stop() { stop_ = true; }
  int accepted() const { return accepted_.load(); }
  std::vector<std::string> task_ids() const {
    std::lock_guard lock(mu_);
    return tasks_;
  }
  // When each task was accepted (system clock, ns, as the marks).
  std::map<std::string, std::int64_t> accepted_at() const {
    std::lock_guard lock(mu_);
    return accepted_at_;
  }
  std::vector<std::string> failures() const {
    std::lock_guard lock(mu_);
    return failures_;
  }
  int retries() const { return retries_.load(); }

 private:
  void submit(const TwoServers& f, const std::string& name, int ticks, int i) {
    const std::string body = pipeline(name, f.marks, ticks);
    const std::map<std::string, std::string> headers{{"Idempotency-Key", "key-" + name}};
    const auto deadline = std::chrono::steady_clock::now() + 90s;
    std::string last;
    for (int n = i % 2; std::chrono::steady_clock::now() < deadline; ++n) {
      Api api = f.api(f.names()[n % 2]);
      api.timeout_ms = 5000;
      auto r = api.call("POST", "/api/v1/pipelines", body, headers);
      if (r.ok() && (r->status == 201 || r->status == 200)) {
        auto v = json::parse(r->body);
        std::lock_guard lock(mu_);
        tasks_.emplace_back(v.at("tasks").as_array().at(0).at("id").as_string());
        accepted_at_[tasks_.back()] = now_ns();
        ++accepted_;
        return;
      }
      last = r.ok() ? std::to_string(r->status) + " " + r->body : r.error().message;
      if (r.ok() && r->status != 502 && r->status != 503 && r->status != 504) break;  // refused: no retry
      ++retries_;
      std::this_thread::sleep_for(50ms);
    }
    std::lock_guard lock(mu_);
    failures_.push_back(name + ": " + last);
  }

  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<int> accepted_{0};
  std::atomic<int> retries_{0};
  mutable std::mutex mu_;
  std::vector<std::string> tasks_;
  std::map<std::string, std::int64_t> accepted_at_;
  std::vector<std::string> failures_;
};

// Every task in `ids` ran exactly once: one attempt id in the marks, one
// start, one end; and the store holds exactly these tasks (no pipeline
// twice). Waits for the marks first.
void expect_each_ran_once(const TwoServers& f, const std::vector<std::string>& ids, const std::string& via) {
  std::map<std::string, std::set<std::string>> attempts;  // task -> attempt ids
  std::map<std::string, int> starts, ends;
  const std::set<std::string> wanted(ids.begin(), ids.end());
  ASSERT_EQ(wanted.size(), ids.size()) << "two submits answered with one task";
  auto tally = [&] {
    attempts.clear();
    starts.clear();
    ends.clear();
    for (const auto& m : read_marks(f.marks)) {
      const std::string task = m.attempt.substr(0, m.attempt.rfind('.'));
      attempts[task].insert(m.attempt);
      starts[m.attempt] += m.kind == "start";
      ends[m.attempt] += m.kind == "end";
    }
    return std::all_of(ids.begin(), ids.end(), [&](const std::string& t) {
      return attempts.count(t) != 0 && ends[*attempts[t].begin()] > 0;
    });
  };
  EXPECT_TRUE(eventually(tally, 240s, 500ms)) << f.logs();
  int twice = 0;
  for (const auto& t : ids) {
    const auto& as = attempts[t];
    if (as.size() != 1) {
      ADD_FAILURE() << t << " ran as " << as.size() << " attempts";
      ++twice;
      continue;
    }
    const std::string& a = *as.begin();
    EXPECT_EQ(starts[a], 1) << a;
    EXPECT_EQ(ends[a], 1) << a;
  }
  for (const auto& [task, as] : attempts) EXPECT_TRUE(wanted.count(task)) << "a task nobody was told of: " << task;
  EXPECT_EQ(twice, 0);
  // The store's count: every page of the task list.
  std::size_t stored = 0;
  std::string cursor;
  Api api = f.api(via);
  for (int page = 0; page < 100; ++page) {
    auto v = api.get("/api/v1/tasks?limit=1000" + (cursor.empty() ? std::string() : "&cursor=" + cursor));
    ASSERT_TRUE(v.is_object()) << "listing tasks on server " << via;
    stored += v.at("items").as_array().size();
    const auto* next = v.as_object().if_contains("next_cursor");
    if (next == nullptr || !next->is_string() || next->as_string().empty()) break;
    cursor = std::string(next->as_string());
  }
  EXPECT_EQ(stored, ids.size()) << "the store holds another number of tasks than were accepted";
}

// Two servers on a PostgreSQL of the test's own, up with their agents.
class HaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = make_temp_dir("cp-ha");
    ASSERT_FALSE(dir_.empty());
    pg_ = std::make_unique<OwnPostgres>(dir_);
    bool skip = false;
    std::string why;
    const std::string url = start_test_postgres(*pg_, skip, why);
    if (skip) GTEST_SKIP() << why;
    ASSERT_FALSE(url.empty()) << why;
    fleet_ = std::make_unique<TwoServers>(dir_, url);
    ASSERT_TRUE(fleet_->start(why)) << why;
  }
  void TearDown() override {
    fleet_.reset();  // before its database
    pg_.reset();
  }

  std::string dir_;
  std::unique_ptr<OwnPostgres> pg_;
  std::unique_ptr<TwoServers> fleet_;
};

TEST_F(HaTest, LeaderKilledDuringABurstOfSubmitsEveryTaskRunsOnce) {
  TwoServers& f = *fleet_;
  ASSERT_EQ(f.leader(), "a") << f.logs();

  constexpr int kSubmits = 1000;
  Submitters submits(f, "burst-", kSubmits, 4, 1);
  ASSERT_TRUE(eventually([&] { return submits.accepted() >= kSubmits / 3; }, 120s)) << f.logs();
  const std::int64_t killed_at = now_ns();
  f.server("a").kill_hard();
  submits.join();
  EXPECT_TRUE(submits.failures().empty()) << submits.failures().front();
  EXPECT_EQ(f.leader(), "b") << f.logs();
  const auto ids = submits.task_ids();
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kSubmits));
  expect_each_ran_once(f, ids, "b");

  // Scheduling resumed: the first attempt placed after the kill (by the
  // new leader; the tasks queued at the kill are placed first).
  Millis first = 0;
  Api api = f.api("b");
  for (const auto& id : ids) {
    auto t = api.get("/api/v1/tasks/" + id);
    if (!t.is_object() || t.at("attempts").as_array().empty()) continue;
    const auto& at = t.at("attempts").as_array().at(0).at("created_at");
    const Millis created = at.is_int64() ? at.as_int64() : 0;
    if (created * 1'000'000 > killed_at && (first == 0 || created < first)) first = created;
  }
  ASSERT_NE(first, 0) << "nothing was placed after the kill";
  const std::int64_t resumed_ms = first - killed_at / 1'000'000;
  std::printf("ha: leader killed after %d accepted submits; the first placement %lld ms after it; %d submits "
              "retried\n",
              kSubmits / 3, static_cast<long long>(resumed_ms), submits.retries());
  // takeover (2 beacon periods of a 6 s lease, at least 1 s) + a cycle
  EXPECT_LT(resumed_ms, 5000) << f.logs();
}

TEST_F(HaTest, RollingRestartOfTwoServersUnderLoad) {
  TwoServers& f = *fleet_;
  std::string why;

  // A long task, running through both restarts (~40 s of marks).
  Submitters long_one(f, "long-", 1, 1, 200);
  long_one.join();
  ASSERT_EQ(long_one.task_ids().size(), 1u) << f.logs();
  const std::string long_task = long_one.task_ids().front();
  ASSERT_TRUE(eventually(
      [&] {
        for (const auto& m : read_marks(f.marks)) {
          if (m.attempt == long_task + ".1" && m.kind == "tick") return true;
        }
        return false;
      },
      30s))
      << f.logs();

  constexpr int kSubmits = 300;
  Submitters submits(f, "rolling-", kSubmits, 2, 1);
  for (const std::string name : {"a", "b"}) {
    f.server(name).stop();  // SIGTERM: it resigns the term if it leads
    ASSERT_TRUE(eventually([&] { return !f.leader().empty(); }, 10s)) << "nobody leads with " << name << " down\n"
                                                                      << f.logs();
    ASSERT_TRUE(f.start_server(name, why)) << why;
    std::this_thread::sleep_for(2s);  // under load with both up
  }
  submits.join();
  EXPECT_TRUE(submits.failures().empty()) << submits.failures().front();
  auto ids = submits.task_ids();
  EXPECT_EQ(ids.size(), static_cast<std::size_t>(kSubmits));
  ids.push_back(long_task);
  expect_each_ran_once(f, ids, "a");

  // The long task never paused: its marks' longest gap.
  std::int64_t gap = 0, prev = 0;
  for (const auto& m : read_marks(f.marks)) {
    if (m.attempt != long_task + ".1") continue;
    if (prev != 0) gap = std::max(gap, m.ns - prev);
    prev = m.ns;
  }
  EXPECT_LT(gap, 2'000'000'000LL) << "the long task paused " << gap / 1'000'000 << " ms";
  std::printf("ha: rolling restart of two servers under %d submits; %d retried; the long task's longest gap %lld "
              "ms\n",
              kSubmits, submits.retries(), static_cast<long long>(gap / 1'000'000));
}

}  // namespace
}  // namespace cpit
