// Crash safety (issue: "kill -9 of the server"): `cubeplane server` is killed
// with SIGKILL 20 times during a 1,000-task load and restarted each time on
// the same store, data dir and port, on SQLite and on PostgreSQL. The agents
// are `cubeplane agent` processes of their own and are never killed, so
// their running tasks live on through every server death, as they would in
// production. Afterwards:
//
//   - every accepted submission (201 with an id) exists exactly once, with
//     that id; one whose answer the kill took ("unknown") at most once
//   - every task finished, Succeeded; it ran exactly once, unless one of its
//     attempts was Lost or Preempted, and then every run seen is a recorded
//     attempt of that task; no attempt ran twice
//   - no two runs of one task overlapped in time
//
// "Ran" is what the commands themselves wrote: each appends a start and an
// end line (marker, CUBEPLANE_ATTEMPT_ID, date +%s%N) to one marks file.
//
// Submissions: each uses a fresh connection, so "could not connect" proves
// the server never saw it, and it is sent again at once with the same
// marker. Any other failure once the request went out (reset, no answer,
// 5xx) makes it "unknown"; after the load, each unknown marker must be
// stored at most once, and those not stored are sent again (see there why
// that keeps them exactly once), so that all 1,000 run.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
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

constexpr int kSubmitters = 4;
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CRASH_TEST_ASAN 1  // clang
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(CRASH_TEST_ASAN)
// The sanitizer build runs the same recovery paths several times slower: a
// smaller load with fewer kills still takes every path under ASan and UBSan,
// while the optimized build carries the full 1,000 tasks and 20 kills.
constexpr int kTasks = 300;
constexpr int kKills = 6;
constexpr auto kBudget = std::chrono::seconds(600);
#else
constexpr int kTasks = 1000;
constexpr int kKills = 20;
constexpr auto kBudget = std::chrono::seconds(420);
#endif

// kAgents clusters, each served by an agent process of its own
// (embedded_agent: false), in one group that spreads its tasks over them:
// one local agent starts some 50 attempts a second here, several share the
// load. The lease is the default (30 s, lost after 40 s): a restart takes
// well under a second, so no agent fences itself and nothing is Lost; the
// checks allow it anyway.
constexpr int kAgents = 4;

std::string cluster_name(int i) { return "crash-" + std::to_string(i); }

std::string fleet_yaml() {
  std::string y = "apiVersion: cubeplane/v1\nkind: Server\nspec: {lease_ttl_s: 30, lost_after_s: 40}\n";
  std::string clusters;
  for (int i = 0; i < kAgents; ++i) {
    y += "---\napiVersion: cubeplane/v1\nkind: Cluster\nmetadata: {name: " + cluster_name(i) +
         "}\nspec: {executor: local, storage_pool: local, embedded_agent: false}\n";
    clusters += (i ? ", " : "") + cluster_name(i);
  }
  y += "---\napiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: rg-crash}\nspec: {clusters: [" + clusters +
       "], placement: spread}\n";
  y += "---\napiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: proj-crash}\n"
       "spec: {default_resource_group: rg-crash}\n";
  return y;
}

const std::set<std::string> kTerminal = {"Succeeded", "Failed", "Cancelled"};

std::string marker_of(int i) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "m%04d", i);
  return buf;
}

std::int64_t ms_since(SteadyClock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(SteadyClock::now() - t).count();
}

// The REST API, with GETs retried while the server restarts.
struct RetryingApi : Api {
  RetryingApi(std::string u, std::string t) : Api{std::move(u), std::move(t), 30000} {}

  // GET that answers 200 with JSON, retried until `deadline` (the server may be restarting).
  json::value get(const std::string& path, SteadyClock::time_point deadline, std::string* why = nullptr) const {
    std::string last;
    do {
      auto r = call("GET", path);
      if (r.ok() && r->status == 200) {
        boost::system::error_code ec;
        auto v = json::parse(r->body, ec);
        if (!ec) return v;
        last = "bad JSON: " + r->body.substr(0, 200);
      } else {
        last = r.ok() ? "HTTP " + std::to_string(r->status) + ": " + r->body.substr(0, 300) : r.error().message;
      }
      std::this_thread::sleep_for(50ms);
    } while (SteadyClock::now() < deadline);
    if (why) *why = path + ": " + last;
    return nullptr;
  }
};

// Every task, all pages; null when the server did not answer.
json::value all_tasks(const RetryingApi& api, SteadyClock::time_point deadline, std::string* why) {
  json::array items;
  std::string cursor;
  do {
    auto page = api.get("/api/v1/tasks?limit=1000" + (cursor.empty() ? "" : "&cursor=" + cp::url_encode(cursor)),
                        deadline, why);
    if (!page.is_object()) return nullptr;
    for (auto& t : page.at("items").as_array()) items.push_back(t);
    cursor = std::string(page.at("next_cursor").as_string());
  } while (!cursor.empty());
  return items;
}

// `cubeplane server` on a fixed port, restartable after a SIGKILL.
class ServerProcess {
 public:
  ServerProcess(const std::string& dir, const std::string& store_url, int port)
      : url_("http://127.0.0.1:" + std::to_string(port)),
        process_({"server", "--config", dir + "/fleet.yaml", "--data-dir", dir + "/server", "--listen",
                  "127.0.0.1:" + std::to_string(port), "--store", store_url, "--log-level", "info"},
                 dir + "/server.log") {}

  // Starts it and waits until it serves (it prints its banner once listening);
  // a start that fails (e.g. the port not yet free) is tried again until `deadline`.
  bool start(SteadyClock::time_point deadline) {
    while (SteadyClock::now() < deadline) {
      process_.start();
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now());
      if (process_.wait_for_line("Press Ctrl-C to stop.", std::max(left, 1ms))) {
        if (auto t = process_.wait_for_line("admin token: ", 1ms); t && !t->starts_with("see ")) {
          admin_token_ = t->substr(0, t->find(' '));  // printed on the first start only
        }
        return true;
      }
      process_.kill_hard();
      std::this_thread::sleep_for(100ms);
    }
    return false;
  }
  void kill_hard() { process_.kill_hard(); }
  void stop() { process_.stop(); }
  const std::string& url() const { return url_; }
  const std::string& admin_token() const { return admin_token_; }
  std::string log() const { return process_.log(); }
  std::string log_tail() const {
    std::string l = log();
    return l.size() > 6000 ? "...\n" + l.substr(l.size() - 6000) : l;
  }

 private:
  std::string url_;
  Process process_;
  std::string admin_token_;
};

struct Run {  // one run of a command, from the marks file
  std::string marker;
  int starts = 0;
  int ends = 0;
  std::int64_t start_ns = 0;
  std::int64_t end_ns = 0;
};

// The pipeline of marker i: one step that marks its start, sleeps 0-200 ms, marks its end.
std::string pipeline_json(int i, const std::string& marks) {
  const std::string m = marker_of(i);
  char sleep[16];
  std::snprintf(sleep, sizeof sleep, "0.%03d", (i * 37) % 201);
  std::string script = "echo \"start $CRASH_MARKER $CUBEPLANE_ATTEMPT_ID $(date +%s%N)\" >> " + marks + "; sleep " +
                       sleep + "; echo \"end $CRASH_MARKER $CUBEPLANE_ATTEMPT_ID $(date +%s%N)\" >> " + marks;
  json::object step;
  step["name"] = "run";
  step["command"] = json::array{"/bin/sh", "-c", json::string(script)};
  step["env"] = json::object{{"CRASH_MARKER", m}};
  step["resources"] = json::object{{"cpu", "10m"}, {"memory", "1Mi"}};
  json::object doc;
  doc["apiVersion"] = "cubeplane/v1";
  doc["kind"] = "Pipeline";
  doc["metadata"] = json::object{{"name", "crash-" + m}, {"project_group", "proj-crash"}};
  doc["spec"] = json::object{{"steps", json::array{step}}};
  return json::serialize(doc);
}

// The whole scenario against one store URL.
void run_crash_load(const std::string& backend, const std::string& store_url) {
  const auto test_start = SteadyClock::now();
  // For everything, kills and restarts included: some 50 s in a release build on two busy cores.
  // Within ctest's --timeout (scripts/test.sh: 600 s, 900 s with sanitizers), so that a run too
  // slow still fails with its own message.
  const auto deadline = test_start + kBudget;
  std::string dir = make_temp_dir("cp-crash");
  ASSERT_FALSE(dir.empty());
  std::filesystem::create_directories(dir + "/server");
  write_file(dir + "/fleet.yaml", fleet_yaml());
  const std::string marks = dir + "/marks";
  const int port = free_port();
  ASSERT_NE(port, 0);

  ServerProcess server(dir, store_url, port);
  ASSERT_TRUE(server.start(SteadyClock::now() + 60s)) << server.log();
  ASSERT_FALSE(server.admin_token().empty()) << server.log();
  const RetryingApi api(server.url(), server.admin_token());

  // The agents, each with a one-time bootstrap token; they live through every kill.
  std::vector<std::unique_ptr<Process>> agents;
  for (int i = 0; i < kAgents; ++i) {
    auto tok = api.call("POST", "/api/v1/clusters/" + cluster_name(i) + "/bootstrap-tokens", "{}");
    ASSERT_TRUE(tok.ok() && tok->status == 201) << (tok.ok() ? tok->body : tok.error().message);
    const std::string bootstrap(json::parse(tok->body).at("token").as_string());
    agents.push_back(std::make_unique<Process>(
        std::vector<std::string>{"agent", "--server", server.url(), "--token", bootstrap, "--cluster-id",
                                 cluster_name(i), "--data-dir", dir + "/agent-" + std::to_string(i), "--log-level",
                                 "info"},
        dir + "/agent-" + std::to_string(i) + ".log"));
    agents.back()->start();
  }
  auto agent_logs = [&] {
    std::string out;
    for (const auto& a : agents) out += a->output();
    return out.size() > 6000 ? "...\n" + out.substr(out.size() - 6000) : out;
  };
  std::string why;
  ASSERT_TRUE(eventually(
      [&] {
        auto cs = api.get("/api/v1/clusters", SteadyClock::now() + 5s, &why);
        if (!cs.is_object()) return false;
        int online = 0;
        for (const auto& c : cs.at("items").as_array()) online += c.at("state").as_string() == "online";
        return online == kAgents;
      },
      60s, 50ms))
      << why << "\n" << agent_logs() << server.log_tail();

  // ------------------------------------------------------------------ load
  std::mutex mu;
  std::map<std::string, std::string> accepted;  // marker -> task id the server answered
  std::set<std::string> unknown;                // markers whose submission's outcome is unknown
  std::vector<std::string> problems;            // unexpected answers
  std::vector<std::int64_t> restart_ms;
  std::atomic<int> next{0}, done{0}, kills{0}, connect_retries{0};
  std::atomic<bool> abort{false};
  auto note = [&](const std::string& what) {
    std::lock_guard lock(mu);
    problems.push_back(what);
  };

  std::vector<std::thread> submitters;
  for (int s = 0; s < kSubmitters; ++s) {
    submitters.emplace_back([&] {
      for (int i = next++; i < kTasks && !abort; i = next++) {
        const std::string m = marker_of(i);
        const std::string body = pipeline_json(i, marks);
        for (;;) {
          auto r = api.call("POST", "/api/v1/pipelines", body);
          if (!r.ok() && r.error().message.find("connect to server") != std::string::npos) {
            // Nothing was sent: the server is down (killed, not yet restarted). Same marker again.
            ++connect_retries;
            if (SteadyClock::now() > deadline || abort) {
              note(m + ": server unreachable until the deadline");
              abort = true;
              return;
            }
            std::this_thread::sleep_for(10ms);
            continue;
          }
          std::lock_guard lock(mu);
          if (!r.ok() || r->status >= 500) {
            unknown.insert(m);  // sent, but the answer was lost with the server
          } else if (r->status == 201) {
            boost::system::error_code ec;
            auto v = json::parse(r->body, ec);
            const json::value* list = ec ? nullptr : v.find_pointer("/tasks", ec);
            const json::value* id = ec ? nullptr : v.find_pointer("/tasks/0/id", ec);
            if (list == nullptr || !list->is_array() || list->as_array().size() != 1) {
              problems.push_back(m + ": 201 naming other than the one task of a one-step pipeline: " + r->body);
            } else if (id != nullptr && id->is_string()) {
              accepted[m] = std::string(id->as_string());
            } else {
              problems.push_back(m + ": 201 without a task id: " + r->body);
            }
          } else {
            problems.push_back(m + ": HTTP " + std::to_string(r->status) + " " + r->body);
          }
          break;
        }
        ++done;
      }
    });
  }

  // The killer: kill k comes once (k+1)/(kKills+1) of the submissions are done, plus a random
  // 0-80 ms, so the kills are spread over the load and hit requests, scheduling cycles and syncs
  // at random points, whatever the speed of the build.
  std::thread killer([&] {
    std::mt19937 rng(std::random_device{}());
    std::uniform_int_distribution<int> jitter(0, 80);
    for (int k = 0; k < kKills && !abort; ++k) {
      const int threshold = (k + 1) * kTasks / (kKills + 1);
      while (done < threshold && !abort && SteadyClock::now() < deadline) std::this_thread::sleep_for(2ms);
      if (abort || SteadyClock::now() >= deadline) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(jitter(rng)));
      const auto t0 = SteadyClock::now();
      server.kill_hard();
      ++kills;
      if (!server.start(std::min(deadline, SteadyClock::now() + 60s))) {
        note("the server did not come back after kill " + std::to_string(k + 1));
        abort = true;
        return;
      }
      std::lock_guard lock(mu);
      restart_ms.push_back(ms_since(t0));
    }
  });
  for (auto& t : submitters) t.join();
  killer.join();
  const auto load_ms = ms_since(test_start);
  ASSERT_TRUE(problems.empty()) << ::testing::PrintToString(problems) << "\n" << server.log_tail();
  ASSERT_EQ(kills.load(), kKills);
  ASSERT_EQ(accepted.size() + unknown.size(), static_cast<std::size_t>(kTasks));

  // ------------------------------------------------ the unknown submissions
  // Stored at most once each. Those not stored are sent again with the same
  // marker: a submission is unknown when its answer was lost with a server
  // this test killed (or was a 5xx, sent once its handler was done), and a
  // dead server stores nothing more (with PostgreSQL, a COMMIT it had sent
  // already is applied within moments, long before this listing, which
  // follows at least one restart), so a marker absent now stays absent and
  // the resubmission keeps it exactly once.
  std::map<std::string, int> stored;  // marker -> tasks
  auto listed = all_tasks(api, deadline, &why);
  ASSERT_TRUE(listed.is_array()) << why;
  for (const auto& t : listed.as_array()) {
    const auto& env = t.at("step").at("env").as_object();
    if (env.contains("CRASH_MARKER")) ++stored[std::string(env.at("CRASH_MARKER").as_string())];
  }
  std::set<std::string> unknown_stored;
  for (const auto& m : unknown) {
    EXPECT_LE(stored[m], 1) << "unknown submission " << m << " stored more than once";
    if (stored[m] > 0) {
      unknown_stored.insert(m);
      continue;
    }
    auto r = api.call("POST", "/api/v1/pipelines", pipeline_json(std::stoi(m.substr(1)), marks));
    ASSERT_TRUE(r.ok() && r->status == 201) << m << ": " << (r.ok() ? r->body : r.error().message);
    accepted[m] = std::string(json::parse(r->body).at("tasks").as_array().at(0).at("id").as_string());
  }

  // ------------------------------------------- wait until every task is terminal
  json::value live;
  ASSERT_TRUE(eventually(
      [&] {
        live = api.get("/api/v1/tasks?limit=5&state=Queued,Admitted,Dispatched,Running,Preempting,Lost",
                       SteadyClock::now() + 10s, &why);
        return live.is_object() && live.at("items").as_array().empty();
      },
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()), 200ms))
      << why << "\n" << json::serialize(live) << "\n" << server.log_tail() << agent_logs();
  const auto drain_ms = ms_since(test_start);

  // --------------------------------------------------------------- checks
  auto tasks = all_tasks(api, deadline, &why);
  ASSERT_TRUE(tasks.is_array()) << why;
  std::map<std::string, std::vector<std::string>> by_marker;  // marker -> task ids
  std::map<std::string, std::string> marker_of_task;
  for (const auto& t : tasks.as_array()) {
    const auto& env = t.at("step").at("env").as_object();
    std::string m = env.contains("CRASH_MARKER") ? std::string(env.at("CRASH_MARKER").as_string()) : "";
    std::string id(t.at("id").as_string());
    by_marker[m].push_back(id);
    marker_of_task[id] = m;
  }
  for (const auto& [m, id] : accepted) {
    auto it = by_marker.find(m);
    ASSERT_TRUE(it != by_marker.end()) << "accepted task " << m << " (" << id << ") was lost";
    EXPECT_EQ(it->second, std::vector<std::string>{id}) << "accepted task " << m << " must exist exactly once";
  }
  for (const auto& m : unknown_stored) {
    EXPECT_EQ(by_marker[m].size(), 1u) << "unknown submission " << m << " must exist at most once";
  }
  for (const auto& [m, ids] : by_marker) {
    EXPECT_TRUE(accepted.count(m) || unknown_stored.count(m)) << "task(s) of a marker never submitted: " << m;
  }
  EXPECT_EQ(tasks.as_array().size(), static_cast<std::size_t>(kTasks));

  // The runs, from the marks the commands wrote.
  std::map<std::string, Run> runs;  // attempt id -> run
  {
    std::istringstream lines(read_file(marks));
    std::string line;
    while (std::getline(lines, line)) {
      std::istringstream in(line);
      std::string what, m, attempt;
      std::int64_t ns = 0;
      if (!(in >> what >> m >> attempt >> ns) || (what != "start" && what != "end")) {
        ADD_FAILURE() << "a torn line in the marks: " << line;
        continue;
      }
      Run& r = runs[attempt];
      if (!r.marker.empty()) {
        EXPECT_EQ(r.marker, m) << attempt;
      }
      r.marker = m;
      if (what == "start") {
        ++r.starts;
        r.start_ns = ns;
      } else {
        ++r.ends;
        r.end_ns = ns;
      }
    }
  }
  std::map<std::string, std::vector<std::string>> runs_of_task;  // task id -> attempt ids that ran
  for (const auto& [attempt, r] : runs) {
    EXPECT_EQ(r.starts, 1) << "attempt " << attempt << " (" << r.marker << ") started " << r.starts << " times";
    EXPECT_LE(r.ends, r.starts) << attempt;
    const std::string task = attempt.substr(0, attempt.rfind('.'));
    EXPECT_EQ(marker_of_task[task], r.marker) << "a run of " << r.marker << " under an attempt id of another task: "
                                              << attempt;
    runs_of_task[task].push_back(attempt);
  }

  int attempts_total = 0, multi_attempt = 0, lost_or_preempted = 0;
  std::map<std::string, int> task_states;
  std::map<std::string, int> requeue_messages;  // why attempts were Lost or Preempted
  for (const auto& t : tasks.as_array()) {
    const std::string id(t.at("id").as_string());
    auto full = api.get("/api/v1/tasks/" + id, deadline, &why);
    ASSERT_TRUE(full.is_object()) << why;
    const std::string state(full.at("state").as_string());
    ++task_states[state];
    EXPECT_EQ(state, "Succeeded") << json::serialize(full);
    const auto& attempts = full.at("attempts").as_array();
    attempts_total += static_cast<int>(attempts.size());
    multi_attempt += attempts.size() > 1;
    std::map<std::string, const json::object*> recorded;
    bool requeued = false;  // an attempt was lost or preempted
    for (std::size_t k = 0; k < attempts.size(); ++k) {
      const auto& a = attempts[k].as_object();
      const std::string as(a.at("state").as_string());
      recorded[std::string(a.at("id").as_string())] = &a;
      EXPECT_TRUE(kTerminal.count(as) || as == "Lost" || as == "Preempted") << id << ": " << json::serialize(a);
      if (k + 1 < attempts.size()) {
        // Only a lost or preempted attempt makes way for another.
        EXPECT_TRUE(as == "Lost" || as == "Preempted") << id << ": " << json::serialize(attempts);
      }
      if (as == "Lost" || as == "Preempted") {
        requeued = true;
        ++lost_or_preempted;
        ++requeue_messages[as + ": " + std::string(a.at("message").as_string())];
      }
    }
    const auto& ran = runs_of_task[id];
    for (const auto& attempt : ran) {
      EXPECT_TRUE(recorded.count(attempt)) << id << ": run " << attempt << " is no recorded attempt: "
                                           << json::serialize(attempts);
    }
    if (state == "Succeeded" && !attempts.empty()) {
      const std::string last(attempts.back().at("id").as_string());
      EXPECT_EQ(attempts.back().at("state").as_string(), "Succeeded") << json::serialize(attempts);
      EXPECT_TRUE(runs.count(last) && runs[last].ends == 1) << id << ": its succeeded attempt " << last
                                                            << " has no complete run in the marks";
      if (!requeued) {
        EXPECT_EQ(ran.size(), 1u) << id << " ran " << ran.size() << " times: " << ::testing::PrintToString(ran);
      }
    }
    // No two runs of the task overlapped. A run cut short has no end mark: its end is when its
    // attempt finished (reported by the agent, the same machine's clock, in ms).
    std::vector<std::pair<std::int64_t, std::int64_t>> spans;
    for (const auto& attempt : ran) {
      const Run& r = runs[attempt];
      std::int64_t end = r.end_ns;
      if (r.ends == 0) {
        auto it = recorded.find(attempt);
        std::int64_t fin = it == recorded.end() ? 0 : it->second->at("finished_at").as_int64();
        end = fin ? (fin + 1) * 1000000 : std::numeric_limits<std::int64_t>::max();
      }
      spans.emplace_back(r.start_ns, end);
    }
    std::sort(spans.begin(), spans.end());
    for (std::size_t k = 1; k < spans.size(); ++k) {
      EXPECT_LT(spans[k - 1].second, spans[k].first) << id << ": runs overlap: " << ::testing::PrintToString(ran);
    }
  }

  std::vector<std::int64_t> sorted = restart_ms;
  std::sort(sorted.begin(), sorted.end());
  std::cout << "[crash " << backend << "] kills " << kills << ", submitted " << kTasks << ": accepted "
            << kTasks - unknown.size() << ", unknown " << unknown.size() << " (" << unknown_stored.size()
            << " stored, the others sent again), "
            << connect_retries << " resends after a refused connect; tasks " << tasks.as_array().size()
            << ", states " << ::testing::PrintToString(task_states) << "; runs " << runs.size() << ", attempts "
            << attempts_total << " (" << multi_attempt << " tasks with more than one, " << lost_or_preempted
            << " lost/preempted); restart ms min/median/max " << (sorted.empty() ? 0 : sorted.front()) << "/"
            << (sorted.empty() ? 0 : sorted[sorted.size() / 2]) << "/" << (sorted.empty() ? 0 : sorted.back())
            << "; load " << load_ms << " ms, all terminal at " << drain_ms << " ms, total " << ms_since(test_start)
            << " ms" << std::endl;
  for (const auto& [message, count] : requeue_messages) {
    std::cout << "[crash " << backend << "]   " << count << " x " << message << std::endl;
  }

  for (auto& a : agents) a->stop();
  server.stop();
  if (!::testing::Test::HasFailure()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else {
    std::cout << "[crash " << backend << "] kept " << dir << " (server.log, agent-N.log, marks)" << std::endl;
  }
}

// ------------------------------------------------------------- PostgreSQL

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool psql(const std::string& url, const std::string& sql, std::string* output) {
  std::string cmd = "psql -X " + shell_quote(url) + " -v ON_ERROR_STOP=1 -qAtc " + shell_quote(sql) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return false;
  char buf[512];
  std::string out;
  while (fgets(buf, sizeof buf, p)) out += buf;
  int rc = pclose(p);
  if (output) *output = out;
  return rc == 0;
}

// The server URL with its database replaced by `name`.
std::string with_database(const std::string& url, const std::string& name) {
  auto authority = url.find("://");
  authority = authority == std::string::npos ? 0 : authority + 3;
  auto path = url.find_first_of("/?", authority);
  if (path == std::string::npos) return url + "/" + name;
  auto query = url.find('?', path);
  std::string rest = query == std::string::npos ? "" : url.substr(query);
  return url.substr(0, path) + "/" + name + rest;
}

TEST(CrashTest, SqliteServerKilledTwentyTimesLosesNothingAndRunsNothingTwice) {
  std::string dir = make_temp_dir("cp-crash-db");
  ASSERT_FALSE(dir.empty());
  run_crash_load("sqlite", "sqlite://" + dir + "/cubeplane.db");
  if (!::testing::Test::HasFailure()) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
}

TEST(CrashTest, PostgresServerKilledTwentyTimesLosesNothingAndRunsNothingTwice) {
  const char* off = std::getenv("CUBEPLANE_TEST_POSTGRES");
  if (off != nullptr && std::string_view(off) == "off") GTEST_SKIP() << "CUBEPLANE_TEST_POSTGRES=off";
  const char* env = std::getenv("CUBEPLANE_TEST_POSTGRES_URL");
  if (env == nullptr || *env == '\0') {
    GTEST_SKIP() << "CUBEPLANE_TEST_POSTGRES_URL is not set (scripts/test.sh sets it; or export "
                    "CUBEPLANE_TEST_POSTGRES_URL=$(scripts/postgres-test-server.sh start))";
  }
  const std::string server = env;
  static int n = 0;
  const std::string db = "crash_" + std::to_string(::getpid()) + "_" + std::to_string(n++);
  std::string out;
  ASSERT_TRUE(psql(server, "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", &out)) << out;
  ASSERT_TRUE(psql(server, "CREATE DATABASE " + db, &out)) << out;
  run_crash_load("postgresql", with_database(server, db));
  if (::testing::Test::HasFailure()) {
    std::cout << "[crash postgresql] kept database " << db << std::endl;
    return;
  }
  EXPECT_TRUE(psql(server, "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)", &out)) << out;
}

}  // namespace
}  // namespace cpit
