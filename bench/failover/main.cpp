// cubeplane-bench-failover: what a leader's death costs two real `cubeplane
// server` processes on one PostgreSQL (issue 42): the time from kill -9 of the
// leader to the first placement the new leader makes, the submit latency as
// clients see it around the kill, and whether any submit was stored twice.
//
//   cubeplane-bench-failover --store postgresql://.../EMPTY_DB [--cubeplane PATH]
//                            [--lease-ttl-s 30] [--rate 20] [--clients 8]
//                            [--duration-s 60] [--kill-at-s 30] [--agents 4]
//
// Servers "a" and "b" run on the one database (--store, which must be empty:
// a fresh CREATE DATABASE per run) with a shared file:// object store and a
// fleet config (`kind: Server` with spec.lease_ttl_s, --agents clusters, one
// resource group over them, one project group). a starts first (it creates the
// admin and leads), then b. Each cluster's agent is simulated: it registers
// with a bootstrap token over REST and syncs like src/agent/agent.cpp, with a
// long-poll of --wait-ms, given both servers (it goes to the other one when
// its server does not answer); it reports each attempt it is told to start as
// Running at its next sync and Succeeded at the one after.
//
// Clients submit one-step pipelines at a fixed --rate (submit i is due at
// t0 + i/rate; --clients threads take them in order) with an Idempotency-Key
// each, to a and b alternately; on no answer or 502/503/504 they retry the
// same body with the same key on the other server. A submit's latency runs
// from its first try to its accepted answer. At --kill-at-s the leader gets
// SIGKILL.
//
// Measured:
//   failover_ms   kill -> the earliest created_at of an attempt created after
//                 the kill (the store's row, which the API shows as the
//                 attempt's created_at): the new leader's first placement;
//                 also when a simulated agent first got a start order after it
//   submit latency p50/p99/max over the run, over [kill, kill + 10 s] (by
//                 first try), and over [t0, kill) as the reference
//   duplicates    pipelines in the store minus keys accepted (must be 0)
//
// The last line is machine-readable:
//   failover_ms=N submit_p99_ms=X submit_p99_failover_ms=X submit_p99_before_ms=X duplicates=N
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>
#include <utility>

#include <CLI/CLI.hpp>

#include "../common/server_process.h"
#include "common/http_client.h"
#include "common/json.h"
#include "model/protocol.h"

#ifndef CUBEPLANE_SERVER_BINARY
#define CUBEPLANE_SERVER_BINARY "cubeplane"
#endif

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "ERROR %s\n", what.c_str());
  std::fflush(stderr);
  std::exit(1);
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(p * static_cast<double>(sorted.size())))];
}

std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// psql -tA: the output, trimmed; dies on failure.
std::string psql(const std::string& url, const std::string& sql) {
  const std::string cmd = "psql -X -q -tA -v ON_ERROR_STOP=1 " + shell_quote(url) + " -c " + shell_quote(sql) + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) die("popen psql");
  std::string out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int rc = ::pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  if (rc != 0) die("psql: " + sql + ": " + out);
  return out;
}

// postgresql://user@host:port/db with another db.
std::string with_database(const std::string& url, const std::string& db) {
  auto slash = url.find('/', url.find("://") + 3);
  auto q = url.find('?');
  std::string base = slash == std::string::npos ? url : url.substr(0, slash);
  return base + "/" + db + (q == std::string::npos ? "" : url.substr(q));
}

// ------------------------------------------------------------ a server

// A real server process (bench/common/server_process.h).
using cp::bench::ServerProcess;

cp::HttpRequestOptions bearer(const std::string& token, long timeout_ms) {
  cp::HttpRequestOptions o;
  o.headers["Authorization"] = "Bearer " + token;
  o.timeout_ms = timeout_ms;
  return o;
}

// Whether the server at `base` says it leads (GET /api/v1/control-plane).
bool leads(cp::HttpClient& http, const std::string& base, const std::string& token) {
  auto r = http.request("GET", base + "/api/v1/control-plane", "", "application/json", bearer(token, 2000));
  if (!r.ok() || r->status != 200) return false;
  auto v = cp::parse_json(r->body);
  if (!v.ok() || !v->is_object()) return false;
  const auto* servers = v->as_object().if_contains("servers");
  if (!servers || !servers->is_array() || servers->as_array().empty()) return false;
  const auto* me = servers->as_array().at(0).as_object().if_contains("leader");
  return me && me->is_bool() && me->as_bool();
}

// ------------------------------------------------------------ a simulated agent

struct Agent {
  std::string cluster;
  std::string credential;
  std::vector<cp::NodeReport> nodes;
  std::map<std::string, cp::AttemptReport> reports;  // attempt -> what the next sync says of it
  std::int64_t seq = 0;
};

std::atomic<bool> g_stop_agents{false};
std::atomic<std::int64_t> g_kill_ms{0};
std::atomic<std::int64_t> g_first_order_after_kill_ms{0};
std::atomic<std::int64_t> g_orders{0};
std::atomic<std::int64_t> g_sync_errors{0};
std::string g_last_sync_error;  // racy on purpose: for a message only
// The database --quick made, dropped on every way out (a failure included).
std::string g_drop_server, g_drop_db;

void run_agent(Agent& a, std::vector<std::string> urls, int first, long wait_ms) {
  cp::HttpClient http;
  int at = first;
  bool inventory_sent = false;
  while (!g_stop_agents) {
    cp::SyncRequest req;
    req.cluster_id = a.cluster;
    req.agent_instance = a.cluster + "-sim";
    req.seq = ++a.seq;
    req.sent_at = wall_ms();
    if (!inventory_sent) req.nodes = a.nodes;  // the server asks again (send_inventory) when it wants them
    for (auto& [id, r] : a.reports) req.attempts.push_back(r);
    req.wait_ms = a.reports.empty() ? wait_ms : 0;
    const std::string base = urls[static_cast<std::size_t>(at)];
    auto r = http.request("POST", base + "/api/v1/agent/sync", cp::dump(cp::to_json(req)), "application/json",
                          bearer(a.credential, wait_ms + 10000));
    if (!r.ok() || r->status >= 500) {
      ++g_sync_errors;
      if (g_kill_ms == 0) g_last_sync_error = r.ok() ? r->body.substr(0, 300) : r.error().to_string();
      at = 1 - at;  // the other server
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      continue;
    }
    if (r->status != 200) die("sync of " + a.cluster + ": " + std::to_string(r->status) + " " + r->body.substr(0, 300));
    auto answer = cp::decode_json<cp::SyncResponse>(r->body);
    if (!answer.ok()) die("sync answer of " + a.cluster + ": " + answer.error().to_string());
    inventory_sent = !answer->send_inventory;
    const std::int64_t now = wall_ms();
    // What was reported moves on: Running -> Succeeded; Succeeded goes once acked.
    for (const auto& id : answer->ack) a.reports.erase(id);
    for (auto& [id, rep] : a.reports) {
      if (rep.state == cp::AttemptState::Running) {
        rep.state = cp::AttemptState::Succeeded;
        rep.exit_code = 0;
        rep.finished_at = now;
      }
    }
    for (const auto& o : answer->start) {
      if (a.reports.count(o.attempt_id)) continue;
      cp::AttemptReport rep;
      rep.attempt_id = o.attempt_id;
      rep.epoch = o.epoch;
      rep.state = cp::AttemptState::Running;
      rep.started_at = now;
      a.reports[o.attempt_id] = rep;
      ++g_orders;
      const std::int64_t k = g_kill_ms;
      std::int64_t zero = 0;
      if (k != 0 && now > k) g_first_order_after_kill_ms.compare_exchange_strong(zero, now);
    }
  }
}

// ------------------------------------------------------------ the submits

struct SubmitResult {
  std::int64_t first_try_ms = 0;  // wall clock
  double latency_ms = 0;          // first try -> accepted answer
  int tries = 0;
  bool accepted = false;
  bool replayed = false;
  std::string task_id;  // of the pipeline's one step, as answered
  std::string error;
};

std::string pipeline_body(int i) {
  cp::json::object step{{"name", "s"},
                        {"command", cp::json::array{"true"}},
                        {"resources", cp::json::object{{"cpu", "100m"}, {"memory", "16Mi"}}}};
  cp::json::object doc{{"apiVersion", "cubeplane/v1"},
                       {"kind", "Pipeline"},
                       {"metadata", cp::json::object{{"name", "fo-" + std::to_string(i)}, {"project_group", "proj"}}},
                       {"spec", cp::json::object{{"steps", cp::json::array{std::move(step)}}}}};
  return cp::dump(doc);
}

struct Options {
  std::string store;
  std::string cubeplane = CUBEPLANE_SERVER_BINARY;
  int lease_ttl_s = 30;
  double rate = 20;
  int clients = 8;
  double duration_s = 60;
  double kill_at_s = 30;
  int agents = 4;
  int nodes = 8;
  long wait_ms = 1000;
  double retry_s = 60;
};

std::string fleet_yaml(const Options& o, const std::string& run) {
  std::string y = "apiVersion: cubeplane/v1\nkind: Server\nspec: {lease_ttl_s: " + std::to_string(o.lease_ttl_s) +
                  "}\n";
  std::string clusters;
  for (int i = 0; i < o.agents; ++i) {
    const std::string c = run + "c" + std::to_string(i);
    y += "---\napiVersion: cubeplane/v1\nkind: Cluster\nmetadata: {name: " + c +
         "}\nspec: {executor: local, storage_pool: p1, embedded_agent: false}\n";
    clusters += (i ? ", " : "") + c;
  }
  y += "---\napiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: rg}\nspec:\n  clusters: [" + clusters +
       "]\n  quota:\n    cpu: {guaranteed: \"" + std::to_string(o.agents * o.nodes * 64) +
       "\"}\n    memory: {guaranteed: " + std::to_string(o.agents * o.nodes * 256) + "Gi}\n";
  y += "---\napiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: proj}\nspec: {default_resource_group: rg}\n";
  return y;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Cubeplane leader failover: two real servers on one PostgreSQL, the leader killed under submits"};
  Options o;
  bool quick = false;
  app.add_option("--store", o.store, "postgresql:// URL of an EMPTY database (CREATE DATABASE one per run)");
  app.add_option("--cubeplane,--server-binary", o.cubeplane, "The cubeplane binary to run as the servers");
  app.add_option("--lease-ttl-s", o.lease_ttl_s, "spec.lease_ttl_s of the fleet (production default 30)")
      ->check(CLI::Range(1, 3600));
  app.add_option("--rate", o.rate, "Submits per second")->check(CLI::Range(0.1, 100000.0));
  app.add_option("--clients", o.clients, "Client threads")->check(CLI::Range(1, 1024));
  app.add_option("--duration-s", o.duration_s, "Seconds of submits")->check(CLI::Range(1.0, 86400.0));
  app.add_option("--kill-at-s", o.kill_at_s, "When, after the first submit, the leader gets kill -9")
      ->check(CLI::Range(0.5, 86400.0));
  app.add_option("--agents", o.agents, "Simulated agents (one cluster each)")->check(CLI::Range(1, 1000));
  app.add_option("--nodes-per-agent", o.nodes, "Nodes per agent (64 cpu, 256Gi each)")->check(CLI::Range(1, 1000));
  app.add_option("--retry-s", o.retry_s, "How long after the last submit was due retries go on")
      ->check(CLI::Range(1.0, 3600.0));
  app.add_option("--wait-ms", o.wait_ms, "The agents' long-poll")->check(CLI::Range(0, 60000));
  app.add_flag("--quick", quick,
               "A small run for CI: lease 6 s, 5 submits/s for 6 s, kill at 2 s; the database from "
               "CUBEPLANE_TEST_POSTGRES_URL when --store is not given (exit 77 without one, unless CI=true)");
  CLI11_PARSE(app, argc, argv);
  std::signal(SIGPIPE, SIG_IGN);
  if (quick) {
    o.lease_ttl_s = 6;
    o.rate = 5;
    o.clients = 2;
    o.duration_s = 6;
    o.kill_at_s = 2;
    o.agents = 2;
    o.nodes = 2;
    if (o.store.empty()) {
      const char* off = std::getenv("CUBEPLANE_TEST_POSTGRES");
      const char* env = std::getenv("CUBEPLANE_TEST_POSTGRES_URL");
      const char* ci = std::getenv("CI");
      const bool in_ci = ci && std::string(ci) == "true";
      if ((off && std::string(off) == "off") || !env || !*env) {
        if (in_ci) die("CI=true but no PostgreSQL: CUBEPLANE_TEST_POSTGRES_URL is not set (scripts/test.sh sets it)");
        std::printf("SKIP no PostgreSQL (export CUBEPLANE_TEST_POSTGRES_URL=$(scripts/postgres-test-server.sh start))\n");
        return 77;
      }
      g_drop_server = env;
      const std::string db = "bench_failover_" + std::to_string(::getpid());
      psql(g_drop_server, "DROP DATABASE IF EXISTS " + db + " WITH (FORCE)");
      psql(g_drop_server, "CREATE DATABASE " + db);
      g_drop_db = db;
      o.store = with_database(g_drop_server, db);
      // Registered before the servers start: atexit handlers run in reverse
      // order, so this runs after their stop, when nothing holds it.
      std::atexit([] {
        if (g_drop_db.empty()) return;
        const std::string db = std::exchange(g_drop_db, "");
        const std::string cmd = "psql -X -q " + shell_quote(g_drop_server) + " -c " +
                                shell_quote("DROP DATABASE IF EXISTS " + db + " WITH (FORCE)") + " >/dev/null 2>&1";
        if (std::system(cmd.c_str()) != 0) std::fprintf(stderr, "could not drop database %s\n", db.c_str());
      });
    }
  }
  if (o.store.rfind("postgres", 0) != 0) die("--store must be a postgresql:// URL (of an empty database)");
  if (o.kill_at_s >= o.duration_s) die("--kill-at-s must fall inside --duration-s");
  const std::string tables =
      psql(o.store, "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'");
  if (tables != "0") {
    die("the database already holds " + tables +
        " tables (an earlier run's?): give the benchmark an empty one (CREATE DATABASE per run)");
  }

  const fs::path dir = fs::temp_directory_path() / ("cubeplane-bench-failover-" + std::to_string(::getpid()));
  fs::create_directories(dir / "objects");
  static fs::path cleanup_dir;
  cleanup_dir = dir;
  std::atexit([] {
    std::error_code ec;
    if (!cleanup_dir.empty()) fs::remove_all(cleanup_dir, ec);
  });
  const std::string run = "r" + std::to_string(::getpid() % 100000);
  {
    std::ofstream f(dir / "fleet.yaml");
    f << fleet_yaml(o, run);
  }
  double load_before[3] = {0, 0, 0};
  ::getloadavg(load_before, 3);

  auto server_args = [&](const std::string& name) {
    return std::vector<std::string>{o.cubeplane, "server", "--config", (dir / "fleet.yaml").string(), "--data-dir",
                                    (dir / ("server-" + name)).string(), "--listen", "127.0.0.1:0", "--store", o.store,
                                    "--objects", "file://" + (dir / "objects").string(), "--log-level", "warn"};
  };
  std::map<std::string, std::unique_ptr<ServerProcess>> servers;
  servers["a"] = std::make_unique<ServerProcess>("a", server_args("a"), true);
  const std::string token = servers["a"]->admin_token();
  servers["b"] = std::make_unique<ServerProcess>("b", server_args("b"), false);
  const std::vector<std::string> urls{servers["a"]->url(), servers["b"]->url()};
  std::printf("servers: a %s, b %s; store %s; lease_ttl_s %d\n", urls[0].c_str(), urls[1].c_str(), o.store.c_str(),
              o.lease_ttl_s);
  std::fflush(stdout);

  cp::HttpClient admin;
  // Who leads (a, normally: it started first).
  std::string leader;
  for (auto deadline = Clock::now() + std::chrono::seconds(30); leader.empty(); ) {
    if (leads(admin, urls[0], token)) leader = "a";
    else if (leads(admin, urls[1], token)) leader = "b";
    if (Clock::now() > deadline) die("no server says it leads within 30 s");
    if (leader.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const int leader_i = leader == "a" ? 0 : 1;

  // The agents: a bootstrap token each, exchanged for a credential, then syncing.
  std::vector<Agent> agents(static_cast<std::size_t>(o.agents));
  for (int i = 0; i < o.agents; ++i) {
    auto& a = agents[static_cast<std::size_t>(i)];
    a.cluster = run + "c" + std::to_string(i);
    for (int n = 0; n < o.nodes; ++n) {
      cp::NodeReport node;
      node.name = "node-" + std::to_string(n);
      node.labels = {{"zone", "z1"}};
      node.capacity = cp::Resources::parse_or_die("cpu:64,memory:256Gi");
      node.allocatable = node.capacity;
      a.nodes.push_back(node);
    }
    auto boot = admin.request("POST", urls[0] + "/api/v1/clusters/" + a.cluster + "/bootstrap-tokens", "{}",
                              "application/json", bearer(token, 30000));
    if (!boot.ok() || boot->status != 201) {
      die("bootstrap token of " + a.cluster + ": " + (boot.ok() ? boot->body : boot.error().to_string()));
    }
    cp::RegisterRequest reg{a.cluster, std::string(cp::parse_json(boot->body)->at("token").as_string()),
                            a.cluster + "-sim", "bench"};
    cp::HttpRequestOptions none;
    auto r = admin.request("POST", urls[0] + "/api/v1/agent/register", cp::dump(cp::to_json(reg)), "application/json",
                           none);
    if (!r.ok() || r->status != 200) die("register " + a.cluster + ": " + (r.ok() ? r->body : r.error().to_string()));
    a.credential = std::string(cp::parse_json(r->body)->at("credential").as_string());
  }
  std::vector<std::thread> agent_threads;
  for (int i = 0; i < o.agents; ++i) {
    agent_threads.emplace_back(run_agent, std::ref(agents[static_cast<std::size_t>(i)]), urls, i % 2, o.wait_ms);
  }
  // Every cluster online before the load starts.
  for (auto deadline = Clock::now() + std::chrono::seconds(60);;) {
    int online = 0;
    std::string last;
    for (const auto& a : agents) {
      auto r = admin.request("GET", urls[0] + "/api/v1/clusters/" + a.cluster, "", "application/json",
                             bearer(token, 5000));
      last = r.ok() ? r->body.substr(0, 400) : r.error().to_string();
      if (r.ok() && r->status == 200) {
        auto v = cp::parse_json(r->body);
        if (v.ok() && v->is_object() && v->at("state").is_string() && v->at("state").as_string() == "online") ++online;
      }
    }
    if (online == o.agents) break;
    if (Clock::now() > deadline) {
      die("the simulated agents' clusters did not come online within 60 s (" + std::to_string(g_sync_errors.load()) +
          " sync errors: " + g_last_sync_error + "); last: " + last);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }

  // The load: submit i due at t0 + i / rate.
  const int total = static_cast<int>(o.rate * o.duration_s);
  std::vector<SubmitResult> results(static_cast<std::size_t>(total));
  std::atomic<int> next{0};
  std::atomic<std::int64_t> late{0};
  std::atomic<std::int64_t> retries{0};
  const auto t0 = Clock::now();
  const std::int64_t t0_ms = wall_ms();
  // Retries stop --retry-s after the last submit was due: a submit still
  // not accepted then counts as not accepted, one not yet tried as not tried.
  const auto give_up = t0 + std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(o.duration_s + o.retry_s));
  std::mutex errors_mu;
  std::map<std::string, std::int64_t> errors;  // failed tries by what came back
  std::atomic<std::int64_t> not_tried{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < o.clients; ++c) {
    clients.emplace_back([&] {
      cp::HttpClient http[2];
      for (int i; (i = next.fetch_add(1)) < total;) {
        const auto due = t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(i / o.rate));
        std::this_thread::sleep_until(due);
        if (Clock::now() >= give_up) {
          ++not_tried;
          continue;
        }
        if (Clock::now() - due > std::chrono::milliseconds(100)) ++late;
        auto& res = results[static_cast<std::size_t>(i)];
        const std::string body = pipeline_body(i);
        auto opts = bearer(token, 5000);
        opts.headers["Idempotency-Key"] = run + "-key-" + std::to_string(i);
        const auto start = Clock::now();
        res.first_try_ms = wall_ms();
        for (int n = i % 2; Clock::now() < give_up; ++n) {
          ++res.tries;
          auto r = http[n % 2].request("POST", urls[static_cast<std::size_t>(n % 2)] + "/api/v1/pipelines", body,
                                       "application/json", opts);
          if (r.ok() && (r->status == 201 || r->status == 200)) {
            res.latency_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
            res.accepted = true;
            auto h = r->headers.find("idempotent-replayed");
            res.replayed = h != r->headers.end() && h->second == "true";
            auto v = cp::parse_json(r->body);
            if (v.ok() && v->is_object()) {
              const auto* tasks = v->as_object().if_contains("tasks");
              if (tasks && tasks->is_array() && !tasks->as_array().empty()) {
                res.task_id = std::string(tasks->as_array().at(0).at("id").as_string());
              }
            }
            break;
          }
          res.error = r.ok() ? std::to_string(r->status) + " " + r->body.substr(0, 200) : r.error().to_string();
          {
            std::lock_guard lock(errors_mu);
            ++errors[res.error.substr(0, 90)];
          }
          if (r.ok() && r->status != 502 && r->status != 503 && r->status != 504) break;  // refused: no retry
          ++retries;
          std::this_thread::sleep_for(std::chrono::milliseconds(50));
        }
      }
    });
  }

  // The kill.
  std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.kill_at_s)));
  const std::string dead = leader_i == 0 ? "a" : "b";
  const int survivor = 1 - leader_i;
  const std::int64_t kill_ms = wall_ms();
  g_kill_ms = kill_ms;
  servers[dead]->kill_hard();
  const auto kill_t = Clock::now();
  // The survivor says it leads.
  std::int64_t leads_ms = -1;
  for (cp::HttpClient http; Clock::now() - kill_t < std::chrono::seconds(o.lease_ttl_s * 4 + 30);) {
    if (leads(http, urls[static_cast<std::size_t>(survivor)], token)) {
      leads_ms = wall_ms() - kill_ms;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  for (auto& t : clients) t.join();
  const double submit_s = std::chrono::duration<double>(Clock::now() - t0).count();

  // The first placement after the kill: the earliest attempt row created after it.
  const std::string first_sql =
      "SELECT coalesce(min((doc::json->>'created_at')::bigint), 0) FROM attempts WHERE (doc::json->>'created_at')::bigint > " +
      std::to_string(kill_ms);
  std::int64_t first_attempt = 0;
  for (auto deadline = Clock::now() + std::chrono::seconds(std::max(30, o.lease_ttl_s * 2)); Clock::now() < deadline;) {
    first_attempt = std::stoll(psql(o.store, first_sql));
    if (first_attempt != 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  g_stop_agents = true;
  for (auto& t : agent_threads) t.join();
  const std::int64_t pipelines = std::stoll(psql(o.store, "SELECT count(*) FROM pipelines"));
  const std::int64_t attempts_after =
      std::stoll(psql(o.store, "SELECT count(*) FROM attempts WHERE (doc::json->>'created_at')::bigint > " +
                                   std::to_string(kill_ms)));
  servers[survivor == 0 ? "a" : "b"]->stop();
  double load_after[3] = {0, 0, 0};
  ::getloadavg(load_after, 3);

  // The figures.
  std::vector<double> all, around, before;
  std::int64_t accepted = 0, replayed = 0, failed = 0, retried = 0;
  std::set<std::string> ids;
  std::string first_error;
  for (const auto& r : results) {
    if (r.tries == 0) continue;  // not tried
    if (!r.accepted) {
      ++failed;
      if (first_error.empty()) first_error = r.error;
      continue;
    }
    ++accepted;
    replayed += r.replayed;
    retried += r.tries > 1;
    if (!r.task_id.empty()) ids.insert(r.task_id);
    all.push_back(r.latency_ms);
    if (r.first_try_ms >= kill_ms && r.first_try_ms < kill_ms + 10000) around.push_back(r.latency_ms);
    if (r.first_try_ms < kill_ms) before.push_back(r.latency_ms);
  }
  for (auto* v : {&all, &around, &before}) std::sort(v->begin(), v->end());
  const std::int64_t failover_ms = first_attempt ? first_attempt - kill_ms : -1;
  const std::int64_t order_ms = g_first_order_after_kill_ms ? g_first_order_after_kill_ms - kill_ms : -1;
  const std::int64_t duplicates = pipelines - accepted;
  std::printf("machine: %u cores, load average %.2f before, %.2f after (1 min)\n", std::thread::hardware_concurrency(),
              load_before[0], load_after[0]);
  std::printf("run: %d agents x %d nodes, long-poll %ld ms; %d submits at %.1f/s by %d clients over %.1f s "
              "(%lld started over 100 ms late); leader %s killed at %.1f s\n",
              o.agents, o.nodes, o.wait_ms, total, o.rate, o.clients, submit_s, static_cast<long long>(late.load()),
              dead.c_str(), static_cast<double>(kill_ms - t0_ms) / 1000.0);
  std::printf("failover: survivor leads %lld ms after the kill; first attempt created %lld ms after it "
              "(%lld attempts since); first start order seen by an agent %lld ms after it; agent sync errors %lld\n",
              static_cast<long long>(leads_ms), static_cast<long long>(failover_ms),
              static_cast<long long>(attempts_after), static_cast<long long>(order_ms),
              static_cast<long long>(g_sync_errors.load()));
  auto line = [](const char* what, const std::vector<double>& v) {
    std::printf("submit latency %s: n=%zu p50=%.1f ms p99=%.1f ms max=%.1f ms\n", what, v.size(), percentile(v, 0.5),
                percentile(v, 0.99), v.empty() ? 0.0 : v.back());
  };
  line("whole run", all);
  line("[kill, kill+10s]", around);
  line("before the kill", before);
  std::printf("submits: %lld accepted (%lld after a retry, %lld answered as a replay), %lld not accepted; "
              "%lld retries in all; distinct task ids answered %zu; pipelines in the store %lld\n",
              static_cast<long long>(accepted), static_cast<long long>(retried), static_cast<long long>(replayed),
              static_cast<long long>(failed), static_cast<long long>(retries.load()), ids.size(),
              static_cast<long long>(pipelines));
  if (not_tried) std::printf("submits not tried (due after the retries stopped): %lld\n",
                             static_cast<long long>(not_tried.load()));
  for (const auto& [what, n] : errors) std::printf("failed tries: %lld x %s\n", static_cast<long long>(n), what.c_str());
  bool bad = false;
  if (failed != 0 || not_tried != 0) {
    std::printf("ERROR %lld submits were not accepted, %lld not tried; first error: %s\n",
                static_cast<long long>(failed), static_cast<long long>(not_tried.load()), first_error.c_str());
    bad = true;
  }
  if (duplicates != 0 || ids.size() != static_cast<std::size_t>(accepted)) {
    std::printf("ERROR the store holds %lld pipelines for %lld accepted keys (%zu distinct ids answered)\n",
                static_cast<long long>(pipelines), static_cast<long long>(accepted), ids.size());
    bad = true;
  }
  if (failover_ms < 0) {
    std::printf("ERROR nothing was placed after the kill\n");
    bad = true;
  }
  std::printf("failover_ms=%lld submit_p99_ms=%.1f submit_p99_failover_ms=%.1f submit_p99_before_ms=%.1f "
              "duplicates=%lld\n",
              static_cast<long long>(failover_ms), percentile(all, 0.99), percentile(around, 0.99),
              percentile(before, 0.99), static_cast<long long>(duplicates));
  return bad ? 1 : 0;
}
