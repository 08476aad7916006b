// The agent: one per execution cluster. It registers the cluster with the
// control plane, then syncs in a loop (DESIGN.md "Agent protocol"): it sends
// its nodes and the state of every attempt it knows, and applies what comes
// back (start, stop, ack); after each sync it ships new log bytes. It fences
// itself when the server stays silent for a lease (see README.md).
//
// The same class runs as `cubeplane agent` and, in-process on a thread, under
// `cubeplane up`. It uses common/http_client.h (libcurl), never Beast/Asio.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent/executor.h"
#include "common/clock.h"
#include "common/http_client.h"
#include "model/beacon_mark.h"
#include "model/clock_estimate.h"
#include "model/inventory.h"
#include "model/protocol.h"

namespace cp {

struct AgentConfig {
  // "http://127.0.0.1:8080", or several servers of one control plane,
  // "http://a:8080,http://b:8080": the agent talks to one at a time and moves
  // to the next when one gives no answer or a 502/503/504 (common/server_urls.h).
  std::string server_url;
  std::string cluster_id;
  std::string bootstrap_token;  // one-time; may stay empty once a credential is persisted
  std::string data_dir;         // credential.json and lease.json live here (0600 / 0644)
  std::string executor = "local";
  std::string agent_version = "0.1.0";

  // Sync timing.
  Millis long_poll_ms = 5000;   // wait_ms when idle: new work arrives the moment the server has it
  Millis busy_poll_ms = 1000;   // wait_ms while attempts run or logs wait: logs flow within ~1 s
  Millis change_check_ms = 50;  // how often a pending long-poll looks for an exit to report
  Millis inventory_refresh_ms = 10000;
  Millis request_timeout_ms = 15000;  // for register and logs; a sync gets this plus its wait_ms
  Millis backoff_min_ms = 100;        // transport errors: exponential backoff with jitter, within these
  Millis backoff_max_ms = 5000;

  // Fencing (README.md): with no successful sync for lease_ttl - margin since
  // the send time of the last one, the agent stops its attempts itself.
  std::int64_t lease_ttl_s = 0;    // 0: as the server says (register and sync answers); else forced
  Millis fence_margin_ms = 0;      // 0: min(5 s, ttl / 6)
  std::int64_t fence_grace_s = 2;  // SIGTERM-to-SIGKILL grace then, capped at half the margin

  std::size_t log_budget_bytes = 1 << 20;  // most log bytes shipped after one sync
  std::uint64_t seed = 0;                  // jitter randomness; 0 = random
};

// <data_dir>/credential.json (mode 0600): what a restarted agent needs to
// carry on without a fresh one-time bootstrap token.
struct SavedCredential {
  std::string cluster_id;
  std::string server_url;  // the server list as configured (normalized); not compared on load
  std::string credential;
  Millis expires_at = 0;              // server clock; 0 = does not expire
  Millis renew_at = 0;                // agent clock: when less than a third of its life is left; 0 = never
  std::string used_bootstrap_sha256;  // the bootstrap token already spent (or refused)
};
BOOST_DESCRIBE_STRUCT(SavedCredential, (),
                      (cluster_id, server_url, credential, expires_at, renew_at, used_bootstrap_sha256))

class Agent {
 public:
  // `clock` dates (reports, the credential); `lease_clock` measures the
  // lease, on the clock the tasks' supervisors read its deadline on.
  Agent(AgentConfig config, std::unique_ptr<Executor> executor, const Clock& clock = SystemClock::instance(),
        const Clock& lease_clock = BootTimeClock::instance());
  ~Agent();
  Agent(const Agent&) = delete;
  Agent& operator=(const Agent&) = delete;

  // Loops until `stop` is set (checked at least every 100 ms, a pending
  // request included). Returns an error only for an unusable configuration;
  // an unreachable server is retried forever. A clean stop leaves running
  // attempts running: the next agent on the same data_dir adopts them.
  Status run(std::atomic<bool>& stop);

  // One round without waiting: register if needed, sync (wait_ms 0), apply
  // the answer, ship logs. For tests and tools.
  Status sync_once();

  const std::string& agent_instance() const { return instance_; }
  Executor& executor() { return *executor_; }

 private:
  Status check_config() const;
  void load_state();
  void save_credential();
  // The lease file (executors/shim.h): the deadline every supervisor of this
  // agent's tasks holds. Written in place on every answered sync and when a
  // new chain begins; false when it could not be (the supervisors then stop
  // their tasks at the deadline already written).
  bool write_lease();
  // A sync sent at `sent_at` (lease clock) was answered: the lease runs to
  // sent_at + L - m, in the current chain unless its lease ran out meanwhile.
  void take_lease(Millis sent_at);

  Status ensure_registered();
  Status register_with(const std::string& bootstrap_token);  // "" = renew with the current credential
  void maybe_renew();
  bool bootstrap_usable() const;
  void handle_unauthorized(const Error& e);

  Result<SyncResponse> sync(Millis wait_ms, bool abortable);
  void apply(const SyncResponse& resp);
  void ship_logs();

  std::vector<AttemptReport> current_reports();  // executor.poll() plus refused starts
  bool has_news();                               // a state not yet carried by a successful sync

  Millis lease_ttl_ms() const;
  Millis fence_margin_ms() const;
  bool fence_due(Millis now) const;
  void fence(Millis now);

  // The witness (DESIGN.md "Fencing and outages"): while syncs fail, a thread
  // of its own reads the leader's beacon from (L - m)/3 after the last
  // answered sync's send on. The same (term, seq) in two reads, the second
  // sent at least F after the first was answered, means nobody is judging
  // anyone's silence: the lease runs on to that second read's send + L - m
  // (tick() applies it; the timer never waits on I/O). A seq that moved
  // means a live control plane cannot hear us: no lease, and retry at once.
  // Unreadable, or below what the last answer named: no lease.
  void watch_beacon();
  std::optional<BeaconMark> read_beacon(const std::string& url, Millis timeout_ms, std::string& why);
  void apply_stale_verdict(Millis now);
  // Fences when due and polls the executor (which enforces kill deadlines);
  // returns the current reports. Called between requests and from within them.
  std::vector<AttemptReport> tick();
  void wait_ms(Millis ms);  // sleeps in slices, ticking, until done or stopping
  void wait_ms_plain(Millis ms);  // the same without ticking (the beacon thread)
  void backoff();
  bool stopping() const { return stop_ && stop_->load(); }

  // POST to the current server with the agent's abort hook: ticks while it
  // waits, ends on stop. No answer, or a 502/503/504, moves the next request
  // to the next server of the list; post itself never retries (the loop's
  // back-off does, and the fencing clock never waits on a second try).
  Result<HttpResponse> post(const std::string& path, const std::string& body, Millis timeout_ms, bool with_auth,
                            std::function<bool(const std::vector<AttemptReport>&)> extra_abort = {});
  void warn_limited(const std::string& what);

  AgentConfig config_;
  Result<std::vector<std::string>> servers_;  // config_.server_url read once; its error is check_config's
  std::size_t current_server_ = 0;            // index into servers_: where requests go
  std::unique_ptr<Executor> executor_;
  const Clock& clock_;
  HttpClient http_;
  std::string instance_;
  std::atomic<bool>* stop_ = nullptr;
  std::mt19937_64 rng_;

  SavedCredential cred_;
  std::atomic<std::int64_t> server_ttl_s_{30};  // read by the beacon thread too
  const Clock& lease_clock_;
  std::string lease_path_;        // <data_dir>/lease.json
  std::string boot_id_;           // this boot's; "" when unreadable (no lease is ever valid then)
  std::string chain_;             // the chain of leases held now (executors/shim.h)
  Millis lease_end_ = 0;          // lease clock; 0 = no lease held in this chain yet
  Millis last_sync_ok_wall_ = 0;  // `clock`: when the last answered sync was sent (for messages)
  bool fenced_ = false;
  std::int64_t seq_ = 0;
  Millis backoff_ms_ = 0;
  Millis next_renew_try_ = 0;

  std::vector<NodeReport> nodes_;
  Millis nodes_at_ = 0;
  std::string nodes_fingerprint_;
  InventoryReporter inventory_;
  ClockEstimator clock_estimate_;  // this machine's clock against the server's, for node preflight
  std::map<std::string, std::string> reported_;          // attempt -> signature carried by the last good sync
  std::map<std::string, std::string> inflight_;          // ... by the sync in flight
  std::map<std::string, AttemptReport> refused_starts_;  // starts the executor could not even record
  bool live_attempts_ = false;
  bool logs_pending_ = false;

  // The same warning at most once every 30 s (loops that retry must not flood the log).
  struct WarnLimiter {
    std::string last;
    Millis at = 0;
    void warn(Millis now, const std::string& what);
  };
  WarnLimiter warnings_;  // the sync loop's

  // Witness state: set by sync() (under witness_mu_), read by the thread.
  std::mutex witness_mu_;
  std::string beacon_url_;
  BeaconMark beacon_named_;      // the mark the last answer named
  Millis beacon_window_ms_ = 0;  // F
  Millis beacon_poll_ms_ = 0;
  Millis answered_sent_ = 0;       // lease clock: send time of the last answered sync
  std::uint64_t answered_gen_ = 0;  // answered syncs so far
  std::atomic<Millis> stale_until_{0};     // lease clock: what a stale verdict earned
  std::atomic<bool> beacon_moved_{false};  // a fresh verdict: end any back-off
  std::thread beacon_thread_;
  bool stale_logged_ = false;  // main thread: the last extension came from the beacon
};

}  // namespace cp
