// cubeplane-bench-agents: what N agents with M nodes each, syncing every few
// seconds, cost one real `cubeplane server`: the server process's CPU (share
// of one core, from /proc/<pid>/stat) and the sync latency the agents see.
//
//   cubeplane-bench-agents [--agents 1000] [--nodes-per-agent 100] [--interval-s 5]
//                          [--duration-s 60] [--store URL] [--server-binary PATH]
//                          [--servers N]
//
// The server is started as its own process (a fresh data directory, port 0),
// exactly as an operator runs it; its admin token is the one it prints at
// first start. Each simulated agent is a cluster registered over the REST API
// (POST /api/v1/clusters, then a one-time bootstrap token), which exchanges
// its token for a credential (POST /api/v1/agent/register) and then sends a
// SyncRequest every interval, like src/agent/agent.cpp does: all of its nodes
// (labels, capacity and allocatable, 8 GPUs each, host facts) when the server
// does not hold them, else their fingerprint and the GPU figures that moved
// since the last read (model/inventory.h), and its clock offset measured over
// earlier syncs (model/clock_estimate.h); --full-inventory sends every node
// every time, as agents did before.
//
// The agents are served by a fixed pool of worker threads, each with its own
// keep-alive connection (HttpClient), taking the next agent due from one
// shared schedule; an agent's syncs are spread over the interval by a seeded
// jitter, and it is never synced twice at once. When the server falls behind,
// syncs start late and the achieved rate drops below the target: both are
// reported.
//
// Syncs use wait_ms = 0 (no long-poll). An idle real agent long-polls with
// wait_ms = 5000 (AgentConfig::long_poll_ms): the server does the whole sync
// transaction when the request arrives, then parks it on a timer (no thread
// held) and answers when the wait ends, after which the agent syncs again. So
// a long-polling idle agent costs the server one full sync every ~5 s plus one
// cheap read of pending orders per wait, which is what a 5 s interval with
// wait_ms = 0 measures, without 1,000 open connections held by this process.
//
// With --servers N (N > 1; --store must be a PostgreSQL database), N server
// processes share the one database and a file:// object store, as several
// servers of one control plane do (issue 42): the first started leads, the
// others follow. Agent i enrolls with and syncs to server i % N. Each
// process's CPU is read over the window; server_cpu_pct on the last line is
// then the busiest one's.
//
// The window: after every agent has registered and done its first sync (the
// warm-up), and --settle-s more, CPU and latencies are measured over
// --duration-s.
//
// The last line is machine-readable:
//   agents=N nodes_per_agent=N interval_s=X server_cpu_pct=X sync_p99_ms=X
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>

#include "../common/server_process.h"
#include "common/http_client.h"
#include "common/json.h"
#include "model/clock_estimate.h"
#include "model/inventory.h"
#include "model/protocol.h"

#ifndef CUBEPLANE_SERVER_BINARY
#define CUBEPLANE_SERVER_BINARY "cubeplane"
#endif

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

constexpr int kGpusPerNode = 8;
constexpr const char* kGpuType = "nvidia-a100-80gb";
// A real agent re-reads its inventory this often (AgentConfig::inventory_refresh_ms):
// the GPU memory and utilization figures change between two reads.
constexpr double kInventoryRefreshS = 10;

[[noreturn]] void die(const std::string& what) {
  std::fprintf(stderr, "ERROR %s\n", what.c_str());
  std::exit(1);
}

std::int64_t wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

double percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  return sorted[std::min(sorted.size() - 1, static_cast<std::size_t>(p * static_cast<double>(sorted.size())))];
}

// ------------------------------------------------------------ the server

// A real server process (bench/common/server_process.h).
using cp::bench::ServerProcess;

// A server on `store` ("" = a fresh SQLite) in `data_dir`; `objects`: a
// shared object store (--objects), for several servers on one database;
// `want_token`: the first server on a fresh store prints the admin token,
// the others do not.
std::unique_ptr<ServerProcess> start_server(const std::string& binary, const fs::path& data_dir,
                                            const std::string& store, const std::string& objects = "",
                                            bool want_token = true) {
  std::vector<std::string> args{binary, "server", "--data-dir", data_dir.string(), "--listen", "127.0.0.1:0",
                                "--log-level", "warn"};
  if (!store.empty()) {
    args.push_back("--store");
    args.push_back(store);
  }
  if (!objects.empty()) {
    args.push_back("--objects");
    args.push_back(objects);
  }
  return std::make_unique<ServerProcess>(data_dir.filename().string(), std::move(args), want_token);
}

// ------------------------------------------------------------ the agents

struct SimAgent {
  int server = 0;  // the server process it enrolls with and syncs to
  std::string cluster_id;
  std::string instance;
  std::string credential;
  std::int64_t seq = 0;
  std::vector<cp::NodeReport> nodes;
  std::string nodes_json;  // serialized at most once per inventory refresh, as a real agent reads it
  std::string fingerprint;  // of the inventory, computed at each read as the agent does
  Clock::time_point nodes_at{};
  cp::InventoryReporter reporter;  // what of the inventory a sync carries (model/inventory.h)
  cp::ClockEstimator clock;        // its clock against the server's (model/clock_estimate.h)
  cp::Millis sent_at = 0;          // of the sync in flight
  std::mt19937 rng;
};

cp::NodeReport make_node(int agent, int i) {
  cp::NodeReport n;
  char name[32];
  std::snprintf(name, sizeof name, "gpu-node-%03d", i);
  n.name = name;
  n.labels = {{"gpu-type", kGpuType},
              {"gpu-node-group", "ib-" + std::to_string(i / 16)},
              {"zone", "zone-" + std::string(1, static_cast<char>('a' + agent % 3))},
              {"rack", "r" + std::to_string(i / 8)},
              {"node-pool", "training"}};
  n.capacity = cp::Resources::parse_or_die("cpu:128,memory:1024Gi,gpu/" + std::string(kGpuType) + ":8");
  n.allocatable = cp::Resources::parse_or_die("cpu:126,memory:1000Gi,gpu/" + std::string(kGpuType) + ":8");
  n.facts.os = "Ubuntu 22.04.4 LTS";
  n.facts.kernel = "5.15.0-105-generic";
  n.facts.runtime = "containerd 1.7.13";
  n.facts.driver = "550.54.15";
  n.facts.cuda = "12.4";
  n.facts.mounts = {"/", "/data", "/scratch"};
  for (int g = 0; g < kGpusPerNode; ++g) {
    cp::GpuDevice d;
    d.index = g;
    char uuid[64];
    std::snprintf(uuid, sizeof uuid, "GPU-%08x-%04x-%04x-0000-%012x", agent, i, g, agent * 1000 + i);
    d.uuid = uuid;
    d.model = kGpuType;
    d.memory_total = 80LL << 30;
    n.gpus.push_back(d);
  }
  return n;
}

// A fresh read of the inventory: live GPU figures move, the rest stays.
void refresh_inventory(SimAgent& a) {
  std::uniform_int_distribution<int> util(0, 100);
  for (auto& n : a.nodes) {
    for (auto& g : n.gpus) {
      g.utilization = util(a.rng);
      g.memory_used = g.memory_total / 100 * g.utilization;
    }
  }
  a.nodes_json = cp::dump(cp::to_json(a.nodes));
  a.fingerprint = cp::inventory_fingerprint(a.nodes);
  a.nodes_at = Clock::now();
}

// The body of a SyncRequest (model/protocol.h), put together around the
// cached nodes; no attempts (an idle fleet), a healthy engine, no long-poll.
// The inventory goes as the agent sends it (InventoryReporter): all nodes
// when the server does not hold them, else their fingerprint and the GPU
// figures that moved; with `full`, all nodes every time (the protocol before
// the reporter, for comparison). `*carries_nodes` says which it was.
std::string sync_body(SimAgent& a, bool full, bool* carries_nodes) {
  const cp::Millis now = wall_ms();
  cp::SyncRequest req;
  if (!full) a.reporter.fill(req, a.nodes, a.fingerprint, now);
  const bool with_nodes = full || !req.nodes_unchanged;
  if (carries_nodes) *carries_nodes = with_nodes;
  std::string body;
  body.reserve((with_nodes ? a.nodes_json.size() : 0) + 256);
  body += R"({"cluster_id":")" + a.cluster_id + R"(","agent_instance":")" + a.instance +
          R"(","seq":)" + std::to_string(++a.seq) + R"(,"sent_at":)" + std::to_string(now);
  a.sent_at = now;
  if (auto clock = a.clock.best(); clock && !full) {
    body += R"(,"clock_offset_ms":)" + std::to_string(clock->offset_ms) + R"(,"clock_delay_ms":)" +
            std::to_string(clock->delay_ms);
  }
  if (with_nodes) {
    body += R"(,"nodes":)" + a.nodes_json;
    if (!full) body += R"(,"inventory":")" + a.fingerprint + '"';
  } else {
    body += R"(,"nodes":[],"inventory":")" + a.fingerprint + R"(","nodes_unchanged":true,"gpu_figures":)" +
            cp::dump(cp::to_json(req.gpu_figures));
  }
  body += R"(,"attempts":[],"engine":{"ok":true,"message":""},"wait_ms":0})";
  return body;
}

struct Stats {
  std::vector<double> latencies_ms;  // syncs started inside the window
  std::map<long, std::int64_t> by_status;  // 0: no answer (transport error)
  std::int64_t late = 0;  // started more than a second after they were due
  std::int64_t with_nodes = 0;     // syncs that carried every node
  std::int64_t without_nodes = 0;  // syncs that carried a fingerprint and moved GPU figures
  std::int64_t body_bytes = 0;
  std::string first_error;
};

struct Options {
  int agents = 1000;
  int nodes = 100;
  double interval_s = 5;
  double duration_s = 60;
  int workers = 32;
  int servers = 1;
  std::string store;
  std::string server_binary = CUBEPLANE_SERVER_BINARY;
  std::uint32_t seed = 1;
  bool keep_data = false;
  bool full_inventory = false;
  double settle_s = 0;
};

cp::HttpRequestOptions bearer(const std::string& token) {
  cp::HttpRequestOptions o;
  o.headers["Authorization"] = "Bearer " + token;
  o.timeout_ms = 120000;
  return o;
}

// POST, expecting `status`; the answer's JSON.
cp::Result<cp::json::value> post(cp::HttpClient& http, const std::string& url, const std::string& body, long status,
                                 const cp::HttpRequestOptions& opts) {
  CP_ASSIGN(auto r, http.request("POST", url, body, "application/json", opts));
  if (r.status != status) {
    return cp::errors::unavailable("POST " + url + ": " + std::to_string(r.status) + " " + r.body.substr(0, 300),
                                   "POST " + url + "：" + std::to_string(r.status) + " " + r.body.substr(0, 300));
  }
  return cp::parse_json(r.body);
}

// What an operator and the agent do once: register the cluster, make a
// bootstrap token, exchange it for a credential.
cp::Status enroll(cp::HttpClient& http, const std::string& base, const std::string& admin_token, SimAgent& a) {
  const auto admin = bearer(admin_token);
  cp::json::object cluster{{"id", a.cluster_id},
                           {"display_name", "bench " + a.cluster_id},
                           {"executor", "local"},
                           {"storage_pool", "pool-" + a.cluster_id},
                           {"labels", cp::json::object{}}};
  CP_ASSIGN(auto created, post(http, base + "/api/v1/clusters", cp::dump(cluster), 201, admin));
  (void)created;
  CP_ASSIGN(auto boot,
            post(http, base + "/api/v1/clusters/" + a.cluster_id + "/bootstrap-tokens", "{}", 201, admin));
  cp::RegisterRequest reg{a.cluster_id, std::string(boot.at("token").as_string()), a.instance, "bench"};
  cp::HttpRequestOptions none;
  none.timeout_ms = 120000;
  CP_ASSIGN(auto answer, post(http, base + "/api/v1/agent/register", cp::dump(cp::to_json(reg)), 200, none));
  a.credential = std::string(answer.at("credential").as_string());
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Cubeplane agent sync load: N agents x M nodes syncing against one real `cubeplane server`"};
  Options o;
  bool quick = false;
  app.add_option("--agents", o.agents, "Simulated agents (one cluster each)")->check(CLI::Range(1, 100000));
  app.add_option("--nodes-per-agent", o.nodes, "Nodes each agent reports (8 GPUs each)")->check(CLI::Range(1, 10000));
  app.add_option("--interval-s", o.interval_s, "Seconds between two syncs of one agent")->check(CLI::Range(0.05, 3600.0));
  app.add_option("--duration-s", o.duration_s, "Seconds measured, after the warm-up")->check(CLI::Range(1.0, 86400.0));
  app.add_option("--settle-s", o.settle_s,
                 "Seconds more after the warm-up before measuring (the start's backlog cleared)")
      ->check(CLI::Range(0.0, 3600.0));
  app.add_option("--workers", o.workers, "Client threads, each with one keep-alive connection")
      ->check(CLI::Range(1, 1024));
  app.add_option("--store", o.store, "The server's store URL (default: SQLite in its fresh data directory; "
                                     "a postgresql:// database must be empty)");
  app.add_option("--servers", o.servers,
                 "Server processes on the one --store (PostgreSQL, when more than one); agent i syncs to server i % N")
      ->check(CLI::Range(1, 16));
  app.add_option("--server-binary", o.server_binary, "The cubeplane binary to run as the server");
  app.add_option("--seed", o.seed, "Seed of the sync jitter and the GPU figures");
  app.add_flag("--full-inventory", o.full_inventory,
               "Send every node at every sync, as agents did before model/inventory.h (for comparison)");
  app.add_flag("--keep-data", o.keep_data, "Keep the server's data directory (its database) for a look afterwards");
  app.add_flag("--quick", quick, "A small run for CI: 20 agents, 10 nodes, 1 s interval, 3 s measured");
  CLI11_PARSE(app, argc, argv);
  if (quick) {
    o.agents = 20;
    o.nodes = 10;
    o.interval_s = 1;
    o.duration_s = 3;
    o.workers = 4;
  }
  std::signal(SIGPIPE, SIG_IGN);
  if (o.servers > 1 && o.store.rfind("postgres", 0) != 0) {
    die("--servers " + std::to_string(o.servers) + " needs --store postgresql://... (an empty database)");
  }

  const fs::path dir = fs::temp_directory_path() / ("cubeplane-bench-agents-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  // Removed on every way out, a failed start included (after the server
  // stopped: atexit handlers run in reverse order of registration).
  static fs::path cleanup_dir;
  if (!o.keep_data) cleanup_dir = dir;
  std::atexit([] {
    std::error_code ec;
    if (!cleanup_dir.empty()) fs::remove_all(cleanup_dir, ec);
  });
  double load_before[3] = {0, 0, 0};
  ::getloadavg(load_before, 3);

  std::vector<std::unique_ptr<ServerProcess>> servers;
  if (o.servers == 1) {
    servers.push_back(start_server(o.server_binary, dir, o.store));
  } else {
    // The first creates the admin (and leads), then the others, one by one.
    fs::create_directories(dir / "objects");
    for (int s = 0; s < o.servers; ++s) {
      fs::create_directories(dir / ("server-" + std::to_string(s)));
      servers.push_back(start_server(o.server_binary, dir / ("server-" + std::to_string(s)), o.store,
                                     "file://" + (dir / "objects").string(), s == 0));
    }
  }
  ServerProcess& server = *servers[0];
  for (std::size_t s = 0; s < servers.size(); ++s) {
    std::printf("server %zu pid=%d url=%s store=%s\n", s, static_cast<int>(servers[s]->pid()),
                servers[s]->url().c_str(), o.store.empty() ? "sqlite (fresh)" : o.store.c_str());
  }
  std::fflush(stdout);

  // The agents, their nodes and the first inventory read.
  std::vector<SimAgent> agents(static_cast<std::size_t>(o.agents));
  const std::string run_tag = std::to_string(::getpid() % 100000);
  for (int i = 0; i < o.agents; ++i) {
    auto& a = agents[static_cast<std::size_t>(i)];
    a.server = i % o.servers;
    a.cluster_id = "ab" + run_tag + "-" + std::to_string(i);
    a.instance = "bench-" + std::to_string(i);
    a.rng.seed(o.seed * 7919u + static_cast<std::uint32_t>(i));
    for (int n = 0; n < o.nodes; ++n) a.nodes.push_back(make_node(i, n));
    refresh_inventory(a);
  }

  // Enrollment, spread over the workers (not measured).
  const auto t_enroll = Clock::now();
  {
    std::atomic<int> next{0};
    std::atomic<bool> failed{false};
    std::string failure;
    std::mutex mu;
    std::vector<std::thread> ts;
    for (int w = 0; w < std::min(o.workers, o.agents); ++w) {
      ts.emplace_back([&] {
        cp::HttpClient http;
        for (int i; !failed && (i = next.fetch_add(1)) < o.agents;) {
          auto& a = agents[static_cast<std::size_t>(i)];
          auto st = enroll(http, servers[static_cast<std::size_t>(a.server)]->url(), server.admin_token(), a);
          if (!st.ok()) {
            std::lock_guard lock(mu);
            failed = true;
            failure = st.error().to_string();
          }
        }
      });
    }
    for (auto& t : ts) t.join();
    if (failed) die("enrolling the agents: " + failure);
  }
  std::printf("enrolled %d agents in %.1f s\n", o.agents,
              std::chrono::duration<double>(Clock::now() - t_enroll).count());
  std::fflush(stdout);

  // The schedule: agent i first syncs at a random point of the first
  // interval, then every interval from there (fixed rate: a late sync does
  // not push the next ones back, so a server that falls behind shows).
  using Due = std::pair<Clock::time_point, int>;
  std::priority_queue<Due, std::vector<Due>, std::greater<>> schedule;
  const auto interval = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.interval_s));
  const auto t0 = Clock::now();
  {
    std::mt19937 rng(o.seed);
    std::uniform_real_distribution<double> phase(0, 1);
    for (int i = 0; i < o.agents; ++i) {
      schedule.emplace(t0 + std::chrono::duration_cast<Clock::duration>(interval * phase(rng)), i);
    }
  }
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> stop{false};
  std::atomic<int> first_synced{0};
  std::vector<char> has_synced(static_cast<std::size_t>(o.agents), 0);
  // The window, set once every agent has synced once; until then nothing counts.
  std::atomic<std::int64_t> window_start_ns{std::numeric_limits<std::int64_t>::max()};
  std::atomic<std::int64_t> window_end_ns{std::numeric_limits<std::int64_t>::max()};
  std::vector<Stats> stats(static_cast<std::size_t>(o.workers));
  std::vector<std::thread> workers;
  for (int w = 0; w < o.workers; ++w) {
    workers.emplace_back([&, w] {
      cp::HttpClient http;
      auto& st = stats[static_cast<std::size_t>(w)];
      std::vector<std::string> urls;
      for (const auto& s : servers) urls.push_back(s->url() + "/api/v1/agent/sync");
      std::unique_lock lock(mu);
      while (!stop) {
        if (schedule.empty()) {
          cv.wait(lock);
          continue;
        }
        const auto [due, i] = schedule.top();
        if (Clock::now() < due) {
          cv.wait_until(lock, due);
          continue;
        }
        schedule.pop();
        lock.unlock();
        auto& a = agents[static_cast<std::size_t>(i)];
        if (std::chrono::duration<double>(Clock::now() - a.nodes_at).count() >= kInventoryRefreshS) {
          refresh_inventory(a);
        }
        bool carries_nodes = false;
        const std::string body = sync_body(a, o.full_inventory, &carries_nodes);
        const auto start = Clock::now();
        auto opts = bearer(a.credential);
        auto r = http.request("POST", urls[static_cast<std::size_t>(a.server)], body, "application/json", opts);
        const auto end = Clock::now();
        const std::int64_t start_ns = start.time_since_epoch().count();
        const bool in_window = start_ns >= window_start_ns && start_ns < window_end_ns;
        const long status = r.ok() ? r->status : 0;
        if (status == 200 && !o.full_inventory) {
          auto answer = cp::decode_json<cp::SyncResponse>(r->body);
          if (answer.ok()) {
            a.reporter.answered(*answer);
            auto sample = cp::clock_sample(a.sent_at, answer->received_at, answer->server_time, wall_ms());
            if (sample) a.clock.add(*sample);
          }
        }
        if (status == 200 && !has_synced[static_cast<std::size_t>(i)]) {
          has_synced[static_cast<std::size_t>(i)] = 1;  // one worker holds agent i at a time
          first_synced++;
        }
        if (status != 200 && st.first_error.empty()) {
          st.first_error = r.ok() ? std::to_string(status) + " " + r->body.substr(0, 300) : r.error().to_string();
        }
        if (in_window) {
          st.by_status[status]++;
          (carries_nodes ? st.with_nodes : st.without_nodes)++;
          st.body_bytes += static_cast<std::int64_t>(body.size());
          st.latencies_ms.push_back(std::chrono::duration<double, std::milli>(end - start).count());
          if (start - due > std::chrono::seconds(1)) st.late++;
        }
        lock.lock();
        schedule.emplace(due + interval, i);
        cv.notify_one();
      }
    });
  }

  // Warm-up: every agent registered (above) and synced once, and at least one
  // interval gone so that the server's background passes run at fleet size.
  const auto warm_deadline = Clock::now() + std::chrono::seconds(600) + interval * 3;
  while (first_synced < o.agents || Clock::now() < t0 + interval) {
    if (Clock::now() > warm_deadline) die("not every agent got a first sync through within the warm-up");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Then, on request, time for the start's backlog to clear (1,000 first
  // syncs of every node, the first whole-fleet reads): steady state only.
  std::this_thread::sleep_for(std::chrono::duration<double>(o.settle_s));
  const double warmup_s = std::chrono::duration<double>(Clock::now() - t0).count();
  rusage self_before{};
  ::getrusage(RUSAGE_SELF, &self_before);
  std::vector<double> cpu_before_each;
  for (const auto& s : servers) cpu_before_each.push_back(s->cpu_seconds());
  const double cpu_before = cpu_before_each[0];
  const auto w0 = Clock::now();
  window_start_ns = w0.time_since_epoch().count();
  std::this_thread::sleep_until(w0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(o.duration_s)));
  const auto w1 = Clock::now();
  window_end_ns = w1.time_since_epoch().count();
  std::vector<double> cpu_after_each;
  for (const auto& s : servers) cpu_after_each.push_back(s->cpu_seconds());
  const double cpu_after = cpu_after_each[0];
  rusage self_after{};
  ::getrusage(RUSAGE_SELF, &self_after);
  const long rss = server.rss_kib();
  std::vector<long> rss_each;
  for (const auto& s : servers) rss_each.push_back(s->rss_kib());
  double load_after[3] = {0, 0, 0};
  ::getloadavg(load_after, 3);
  {
    std::lock_guard lock(mu);
    stop = true;
  }
  cv.notify_all();
  for (auto& t : workers) t.join();  // each finishes the sync it has in flight
  for (auto it = servers.rbegin(); it != servers.rend(); ++it) (*it)->stop();
  if (o.keep_data) std::printf("data directory kept: %s\n", dir.string().c_str());

  const double window_s = std::chrono::duration<double>(w1 - w0).count();
  double server_pct = 100.0 * (cpu_after - cpu_before) / window_s;
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) / 1e6; };
  const double self_pct = 100.0 *
                          (secs(self_after.ru_utime) + secs(self_after.ru_stime) - secs(self_before.ru_utime) -
                           secs(self_before.ru_stime)) /
                          window_s;
  std::vector<double> lat;
  std::map<long, std::int64_t> by_status;
  std::int64_t late = 0;
  std::int64_t with_nodes = 0, without_nodes = 0, body_bytes = 0;
  std::string first_error;
  for (auto& s : stats) {
    lat.insert(lat.end(), s.latencies_ms.begin(), s.latencies_ms.end());
    for (auto [k, v] : s.by_status) by_status[k] += v;
    late += s.late;
    with_nodes += s.with_nodes;
    without_nodes += s.without_nodes;
    body_bytes += s.body_bytes;
    if (first_error.empty()) first_error = s.first_error;
  }
  std::sort(lat.begin(), lat.end());
  if (o.servers > 1) {
    // Each process, and the busiest one as the last line's figure.
    std::printf("servers: %d on one database;", o.servers);
    double total = 0;
    for (std::size_t s = 0; s < servers.size(); ++s) {
      const double pct = 100.0 * (cpu_after_each[s] - cpu_before_each[s]) / window_s;
      total += pct;
      server_pct = std::max(server_pct, pct);
      std::printf(" server %zu (%s) cpu %.1f%% of one core, rss %ld MiB;", s, s == 0 ? "started first" : "follower",
                  pct, rss_each[s] / 1024);
    }
    std::printf(" all together %.1f%%\n", total);
  }
  const double target_rate = o.agents / o.interval_s;
  const std::int64_t syncs = static_cast<std::int64_t>(lat.size());
  const std::int64_t ok = by_status[200];
  std::printf("load generator: %d workers, %.1f%% of one core; warm-up %.1f s; window %.1f s\n", o.workers, self_pct,
              warmup_s, window_s);
  std::printf("machine: %u cores, load average %.2f before, %.2f after (1 min)\n", std::thread::hardware_concurrency(),
              load_before[0], load_after[0]);
  const double per_sync_ms = lat.empty() ? 0.0 : 1000.0 * (cpu_after - cpu_before) / static_cast<double>(lat.size());
  std::printf("server: cpu %.1f%% of one core (%.2f s in %.1f s; %.2f ms a sync, so %.1f%% at the target rate), "
              "rss %ld MiB\n",
              server_pct, cpu_after - cpu_before, window_s, per_sync_ms, per_sync_ms * target_rate / 10.0, rss / 1024);
  std::printf("sync rate: %.1f/s achieved, %.1f/s target; %lld started over 1 s late\n",
              static_cast<double>(syncs) / window_s, target_rate, static_cast<long long>(late));
  std::printf("inventory: %s; %lld syncs with every node, %lld with a fingerprint and moved GPU figures; "
              "body %lld bytes on average\n",
              o.full_inventory ? "every node at every sync (--full-inventory)" : "as the agent sends it",
              static_cast<long long>(with_nodes), static_cast<long long>(without_nodes),
              static_cast<long long>(syncs ? body_bytes / syncs : 0));
  std::printf("sync latency: p50=%.2f ms p99=%.2f ms max=%.2f ms\n", percentile(lat, 0.5), percentile(lat, 0.99),
              lat.empty() ? 0.0 : lat.back());
  std::printf("by status:");
  for (auto [k, v] : by_status) std::printf(" %ld=%lld", k, static_cast<long long>(v));
  std::printf("\nsyncs=%lld ok=%lld errors=%lld\n", static_cast<long long>(syncs), static_cast<long long>(ok),
              static_cast<long long>(syncs - ok));
  if (syncs == 0 || ok != syncs) {
    std::printf("ERROR %s\n", syncs == 0 ? "no sync in the window" : ("not every sync got 200; first: " + first_error).c_str());
    return 1;
  }
  if (o.servers > 1) std::printf("servers=%d ", o.servers);
  std::printf("agents=%d nodes_per_agent=%d interval_s=%g server_cpu_pct=%.1f sync_p99_ms=%.2f\n", o.agents, o.nodes,
              o.interval_s, server_pct, percentile(lat, 0.99));
  return 0;
}
