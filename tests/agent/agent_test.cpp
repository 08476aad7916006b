// The agent loop against a scripted control plane on a fake HTTP server:
// registration, start / report / ack, log shipping, credential renewal and
// recovery, and self-fencing when the server goes silent.
#include "agent/agent.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "agent/executors/local_executor.h"
#include "agent/executors/shim.h"
#include "common/ids.h"
#include "fake_server.h"
#include "test_util.h"

namespace cp {
namespace {

using testing::ClosedPort;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;
using testing::process_gone;
using testing::read_pid;
using testing::slurp;
using testing::TempDir;
using testing::touch;
using testing::wait_until;

// A control plane in miniature: hands out credentials, resends start orders
// until the agent reports them, acks terminal reports, collects logs.
class ScriptedControlPlane {
 public:
  FakeResponse handle(const FakeRequest& req) {
    ++calls_;
    if (req.path == "/api/v1/agent/register") return on_register(req);
    if (req.path == "/api/v1/agent/sync") return on_sync(req);
    if (req.path == "/api/v1/agent/logs") return on_logs(req);
    return {404, R"({"error":{"code":"not_found","message":"no route"}})"};
  }

  // Knobs, set before or during a test.
  void add_start(StartOrder o) {
    std::lock_guard lock(mu_);
    starts_.push_back(std::move(o));
  }
  void set_lease_ttl(std::int64_t s) { lease_ttl_s_ = s; }
  // The witness every sync answer names (DESIGN.md "Fencing and outages").
  void set_beacon(const std::string& url, std::int64_t term, std::int64_t seq, Millis window_ms, Millis poll_ms) {
    std::lock_guard lock(mu_);
    beacon_url_ = url;
    beacon_term_ = term;
    beacon_seq_ = seq;
    beacon_window_ms_ = window_ms;
    beacon_poll_ms_ = poll_ms;
  }
  void set_credential_life_ms(Millis ms) { credential_life_ms_ = ms; }
  void set_hold_ms(Millis ms) { hold_ms_ = ms; }
  // This server's clock runs ahead of the agent's by `ms` (in its sync answers).
  void set_clock_ahead_ms(Millis ms) { clock_ahead_ms_ = ms; }
  void set_logs_status(int status) { logs_status_ = status; }
  void set_ack(bool on) { ack_ = on; }
  // The next sync that leaves its nodes out is answered "send the inventory"
  // (a restarted server holds none).
  void ask_for_inventory() { ask_inventory_ = true; }
  void accept_credential(const std::string& c) {
    std::lock_guard lock(mu_);
    valid_.insert(c);
  }
  void accept_bootstrap(const std::string& t) {
    std::lock_guard lock(mu_);
    bootstraps_.insert(t);
  }

  // Ends held long-polls: the fake server joins its threads on destruction.
  void close() { closing_ = true; }

  // What happened.
  int calls() const { return calls_; }
  struct Sync {
    SyncRequest req;
    std::string auth;
    std::vector<std::string> acked;
  };
  struct Register {
    RegisterRequest req;
    std::string auth;
    int status = 0;
  };
  std::vector<Sync> syncs() {
    std::lock_guard lock(mu_);
    return syncs_;
  }
  std::vector<Register> registers() {
    std::lock_guard lock(mu_);
    return registers_;
  }
  std::vector<LogUpload> logs() {
    std::lock_guard lock(mu_);
    return logs_;
  }
  std::optional<AttemptReport> last_report(const std::string& id) {
    std::lock_guard lock(mu_);
    for (auto it = syncs_.rbegin(); it != syncs_.rend(); ++it) {
      for (const auto& a : it->req.attempts) {
        if (a.attempt_id == id) return a;
      }
    }
    return std::nullopt;
  }
  std::string log_text(const std::string& id, int replica = 0) {
    std::lock_guard lock(mu_);
    std::string out;
    for (const auto& l : logs_) {
      if (l.attempt_id != id || l.replica != replica) continue;
      if (static_cast<std::size_t>(l.offset) > out.size()) return out + "<gap>";
      out.resize(static_cast<std::size_t>(l.offset));
      out += l.data;
    }
    return out;
  }

 private:
  FakeResponse unauthorized() { return {401, R"({"error":{"code":"unauthenticated","message":"bad credential"}})"}; }

  bool authorized(const FakeRequest& req) {
    auto it = req.headers.find("authorization");
    if (it == req.headers.end() || it->second.rfind("Bearer ", 0) != 0) return false;
    std::lock_guard lock(mu_);
    return valid_.count(it->second.substr(7)) > 0;
  }

  FakeResponse issue(const Register& r) {
    std::lock_guard lock(mu_);
    registers_.push_back(r);
    registers_.back().status = 200;
    std::string cred = "cred-" + std::to_string(++issued_);
    valid_.insert(cred);
    RegisterResponse resp;
    resp.credential = cred;
    resp.server_time = SystemClock::instance().now_ms();
    resp.expires_at = resp.server_time + credential_life_ms_;
    resp.lease_ttl_s = lease_ttl_s_;
    return {200, dump(to_json(resp))};
  }

  FakeResponse on_register(const FakeRequest& req) {
    Register r;
    auto decoded = decode_json<RegisterRequest>(req.body);
    if (!decoded.ok()) return {400, "{}"};
    r.req = decoded.value();
    if (auto it = req.headers.find("authorization"); it != req.headers.end()) r.auth = it->second;
    if (r.req.bootstrap_token.empty()) {
      if (!authorized(req)) return refuse(r);
      return issue(r);
    }
    {
      std::lock_guard lock(mu_);
      if (!bootstraps_.erase(r.req.bootstrap_token)) {  // one-time
        registers_.push_back(r);
        registers_.back().status = 401;
        return unauthorized();
      }
    }
    return issue(r);
  }

  FakeResponse refuse(Register r) {
    std::lock_guard lock(mu_);
    r.status = 401;
    registers_.push_back(r);
    return unauthorized();
  }

  FakeResponse on_sync(const FakeRequest& req) {
    if (!authorized(req)) return unauthorized();
    auto decoded = decode_json<SyncRequest>(req.body);
    if (!decoded.ok()) return {400, "{}"};
    Sync s;
    s.req = decoded.value();
    s.auth = req.headers.at("authorization");
    const Millis received_at = SystemClock::instance().now_ms() + clock_ahead_ms_;
    // A long-poll in small: hold while there is nothing to say.
    auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(std::min<Millis>(s.req.wait_ms, hold_ms_));
    while (std::chrono::steady_clock::now() < until && !has_starts_for(s.req) && !closing_) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    SyncResponse resp;
    resp.lease_ttl_s = lease_ttl_s_;
    resp.received_at = received_at;
    resp.server_time = SystemClock::instance().now_ms() + clock_ahead_ms_;
    std::lock_guard lock(mu_);
    resp.beacon_url = beacon_url_;
    resp.beacon_term = beacon_term_;
    resp.beacon_seq = beacon_seq_;
    resp.beacon_window_ms = beacon_window_ms_;
    resp.beacon_poll_ms = beacon_poll_ms_;
    // A long-poll the agent gave up on ends after newer syncs: ignore what it
    // says (a real server must, too: seq orders the syncs of one instance).
    for (const auto& prev : syncs_) {
      if (prev.req.agent_instance == s.req.agent_instance && prev.req.seq >= s.req.seq) return {200, "{}"};
    }
    for (const auto& a : s.req.attempts) {
      if (is_terminal(a.state) && ack_) resp.ack.push_back(a.attempt_id);
    }
    resp.start = pending_starts(s.req);
    if (s.req.nodes_unchanged && ask_inventory_.exchange(false)) resp.send_inventory = true;
    s.acked = resp.ack;
    syncs_.push_back(std::move(s));
    return {200, dump(to_json(resp))};
  }

  // Start orders the agent has not reported yet (resent until it does: a lost answer costs nothing).
  std::vector<StartOrder> pending_starts(const SyncRequest& req) {
    std::vector<StartOrder> out;
    for (const auto& o : starts_) {
      bool reported = std::any_of(req.attempts.begin(), req.attempts.end(),
                                  [&](const AttemptReport& a) { return a.attempt_id == o.attempt_id; });
      bool seen_before = std::any_of(syncs_.begin(), syncs_.end(), [&](const Sync& s) {
        return std::any_of(s.req.attempts.begin(), s.req.attempts.end(),
                           [&](const AttemptReport& a) { return a.attempt_id == o.attempt_id; });
      });
      if (!reported && !seen_before) out.push_back(o);
    }
    return out;
  }
  bool has_starts_for(const SyncRequest& req) {
    std::lock_guard lock(mu_);
    return !pending_starts(req).empty();
  }

  FakeResponse on_logs(const FakeRequest& req) {
    if (!authorized(req)) return unauthorized();
    auto decoded = decode_json<LogUpload>(req.body);
    if (!decoded.ok()) return {400, R"({"error":{"code":"malformed_json","message":"bad body"}})"};
    if (logs_status_ != 200) return {logs_status_, R"({"error":{"code":"stale_epoch","message":"stale epoch"}})"};
    std::lock_guard lock(mu_);
    logs_.push_back(decoded.value());
    return {200, "{}"};
  }

  std::mutex mu_;
  std::vector<StartOrder> starts_;
  std::vector<Sync> syncs_;
  std::vector<Register> registers_;
  std::vector<LogUpload> logs_;
  std::set<std::string> valid_;
  std::set<std::string> bootstraps_{"cpb_first"};
  int issued_ = 0;
  std::atomic<std::int64_t> lease_ttl_s_{30};
  std::string beacon_url_;
  std::int64_t beacon_term_ = 0, beacon_seq_ = 0;
  Millis beacon_window_ms_ = 0, beacon_poll_ms_ = 0;
  std::atomic<Millis> credential_life_ms_{3'600'000};
  std::atomic<Millis> hold_ms_{200};
  std::atomic<Millis> clock_ahead_ms_{0};
  std::atomic<int> logs_status_{200};
  std::atomic<bool> ack_{true};
  std::atomic<bool> ask_inventory_{false};
  std::atomic<bool> closing_{false};
  std::atomic<int> calls_{0};
};

StartOrder order_for(const std::string& task, std::vector<std::string> command) {
  StartOrder o;
  o.task_id = task;
  o.attempt_number = 1;
  o.attempt_id = task + ".1";
  o.epoch = 7;
  o.command = std::move(command);
  o.placements = {ReplicaPlacement{0, "node-a", {}}};
  o.grace_s = 5;
  return o;
}

std::vector<std::string> sh(const std::string& script) { return {"sh", "-c", script}; }

class AgentTest : public ::testing::Test {
 protected:
  AgentTest() : server_([this](const FakeRequest& r) { return cp_.handle(r); }) {}
  ~AgentTest() override {
    stop_agent();
    cp_.close();
    // Leave no process behind.
    LocalExecutor ex(executor_config());
    for (const auto& r : ex.poll()) {
      if (!is_terminal(r.state)) ex.stop(r.attempt_id, "cancel", 0);
    }
    wait_until([&] {
      auto rs = ex.poll();
      return std::all_of(rs.begin(), rs.end(), [](const AttemptReport& r) { return is_terminal(r.state); });
    });
  }

  LocalExecutorConfig executor_config() {
    LocalExecutorConfig c;
    c.data_dir = dir_.path();
    c.nvml_library = "";
    c.shim_program = CUBEPLANE_SHIM;  // as `cubeplane agent` has it
    return c;
  }
  AgentConfig agent_config() {
    AgentConfig c;
    c.server_url = server_.url();
    c.cluster_id = "local-1";
    c.bootstrap_token = "cpb_first";
    c.data_dir = dir_.path();
    c.long_poll_ms = 2000;
    c.busy_poll_ms = 200;
    c.backoff_max_ms = 300;
    c.seed = 42;
    return c;
  }
  void start_agent(AgentConfig c) {
    stop_agent();
    auto ex = std::make_unique<LocalExecutor>(executor_config());
    executor_ = ex.get();
    agent_ = std::make_unique<Agent>(std::move(c), std::move(ex));
    stop_ = false;
    thread_ = std::thread([this] { status_ = agent_->run(stop_); });
  }
  void stop_agent() {
    if (!thread_.joinable()) return;
    stop_ = true;
    auto asked = std::chrono::steady_clock::now();
    thread_.join();
    EXPECT_LT(std::chrono::steady_clock::now() - asked, std::chrono::milliseconds(1000)) << "slow to stop";
    EXPECT_TRUE(status_.ok());
    agent_.reset();
    executor_ = nullptr;
  }
  std::string attempt_dir(const std::string& id) { return dir_.path() + "/attempts/" + id; }

  // A short lease (2 s, margin 1 s: the deadline is 1 s after each answered
  // sync) and an agent running `task` as a process that starts a sleeper;
  // the sleeper's pid once the server has heard it Running (0 on a timeout).
  AgentConfig short_lease() {
    cp_.set_lease_ttl(2);
    auto c = agent_config();
    c.fence_margin_ms = 1000;
    return c;
  }
  int start_sleeper(const AgentConfig& c, const std::string& task) {
    cp_.add_start(order_for(task, sh("sleep 300 & echo $! > sleeper.pid; wait")));
    start_agent(c);
    int sleeper = 0;
    wait_until([&] {
      auto r = cp_.last_report(task + ".1");
      sleeper = read_pid(attempt_dir(task + ".1") + "/work/sleeper.pid");
      return r && r->state == AttemptState::Running && sleeper > 0;
    });
    return sleeper;
  }

  TempDir dir_;
  ScriptedControlPlane cp_;
  FakeServer server_;
  std::unique_ptr<Agent> agent_;
  LocalExecutor* executor_ = nullptr;  // owned by agent_; thread-safe
  std::atomic<bool> stop_{false};
  Status status_;
  std::thread thread_;
};

// The bootstrap token buys a credential that is persisted (0600): a restarted
// agent syncs with it and needs no new token.
TEST_F(AgentTest, RegistersAndPersistsTheCredential) {
  start_agent(agent_config());
  ASSERT_TRUE(wait_until([&] { return !cp_.syncs().empty(); }));
  auto regs = cp_.registers();
  ASSERT_EQ(regs.size(), 1u);
  EXPECT_EQ(regs[0].req.cluster_id, "local-1");
  EXPECT_EQ(regs[0].req.bootstrap_token, "cpb_first");
  EXPECT_FALSE(regs[0].req.agent_instance.empty());
  auto first = cp_.syncs()[0];
  EXPECT_EQ(first.auth, "Bearer cred-1");
  EXPECT_EQ(first.req.cluster_id, "local-1");
  EXPECT_EQ(first.req.agent_instance, regs[0].req.agent_instance);
  ASSERT_EQ(first.req.nodes.size(), 1u);
  EXPECT_TRUE(first.req.engine.ok);
  stop_agent();

  const std::string path = dir_.path() + "/credential.json";
  auto cred = decode_json<SavedCredential>(slurp(path));
  ASSERT_TRUE(cred.ok());
  EXPECT_EQ(cred->credential, "cred-1");
  EXPECT_EQ(cred->cluster_id, "local-1");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // The bootstrap token is spent; the persisted credential carries on.
  auto before = cp_.syncs().size();
  auto c = agent_config();
  start_agent(c);
  ASSERT_TRUE(wait_until([&] { return cp_.syncs().size() > before + 1; }));
  EXPECT_EQ(cp_.registers().size(), 1u);
  EXPECT_EQ(cp_.syncs().back().auth, "Bearer cred-1");
  std::int64_t prev = 0;
  for (const auto& s : cp_.syncs()) {
    if (s.req.agent_instance != agent_->agent_instance()) continue;
    EXPECT_GT(s.req.seq, prev) << "seq must increase";
    prev = s.req.seq;
  }
  EXPECT_NE(agent_->agent_instance(), regs[0].req.agent_instance) << "a new process is a new instance";
}

// A start order runs; its end is reported, acked, then forgotten (no longer
// reported, files gone); its logs arrive in order from offset 0.
TEST_F(AgentTest, RunsAStartOrderAndReportsItsEnd) {
  cp_.add_start(order_for("t-run", sh("echo hello; echo world >&2; exit 0")));
  start_agent(agent_config());
  ASSERT_TRUE(wait_until([&] {
    auto r = cp_.last_report("t-run.1");
    return r && r->state == AttemptState::Succeeded;
  }));
  auto r = *cp_.last_report("t-run.1");
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_EQ(r.epoch, 7);
  ASSERT_TRUE(wait_until([&] { return cp_.log_text("t-run.1") == "hello\nworld\n"; })) << cp_.log_text("t-run.1");
  auto logs = cp_.logs();
  EXPECT_EQ(logs.front().offset, 0);
  EXPECT_EQ(logs.front().epoch, 7);
  EXPECT_EQ(logs.front().stream, "combined");

  // After the ack: gone from reports and from disk.
  std::size_t acked_at = 0;
  ASSERT_TRUE(wait_until([&] {
    auto syncs = cp_.syncs();
    for (std::size_t i = 0; i < syncs.size(); ++i) {
      if (!syncs[i].acked.empty()) acked_at = i;
    }
    return acked_at > 0 && syncs.size() > acked_at + 1;
  }));
  auto last = cp_.syncs().back();
  for (const auto& a : last.req.attempts) EXPECT_NE(a.attempt_id, "t-run.1");
  EXPECT_TRUE(wait_until([&] { return !std::filesystem::exists(attempt_dir("t-run.1")); }));
}

// An exit is reported at once, even while the server holds a long-poll.
TEST_F(AgentTest, ReportsAnExitWithoutWaitingForTheLongPoll) {
  cp_.set_hold_ms(10000);
  auto c = agent_config();
  c.long_poll_ms = 10000;
  c.busy_poll_ms = 10000;
  cp_.add_start(order_for("t-quick", sh("while [ ! -f go ]; do sleep 0.01; done")));
  start_agent(c);
  ASSERT_TRUE(wait_until([&] {
    auto r = cp_.last_report("t-quick.1");
    return r && r->state == AttemptState::Running;
  }));
  // Let the agent settle into a held long-poll, then end the attempt.
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(attempt_dir("t-quick.1") + "/work"); }));
  auto ended = std::chrono::steady_clock::now();
  touch(attempt_dir("t-quick.1") + "/work/go");
  ASSERT_TRUE(wait_until([&] {
    auto r = cp_.last_report("t-quick.1");
    return r && r->state == AttemptState::Succeeded;
  }));
  auto took = std::chrono::steady_clock::now() - ended;
  EXPECT_LT(took, std::chrono::milliseconds(2000)) << "the long-poll was not cut short";
}

// With no sync for lease_ttl - margin, the agent stops its attempts itself
// (the whole process group), and reports them Lost when the server is back.
TEST_F(AgentTest, FencesItselfWhenTheServerGoesSilent) {
  const auto c = short_lease();
  const int sleeper = start_sleeper(c, "t-fence");
  ASSERT_GT(sleeper, 0);
  // The agent keeps running happily while the server answers.
  ASSERT_FALSE(process_gone(sleeper));

  server_.set_blackhole(true);
  auto silent_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return process_gone(sleeper); })) << "not fenced";
  auto took = std::chrono::steady_clock::now() - silent_at;
  EXPECT_LT(took, std::chrono::milliseconds(2000)) << "fenced after the server's lease ran out";
  EXPECT_TRUE(wait_until([&] { return executor_->poll().at(0).state == AttemptState::Lost; }));

  server_.set_blackhole(false);
  ASSERT_TRUE(wait_until([&] {
    auto r = cp_.last_report("t-fence.1");
    return r && r->state == AttemptState::Lost;
  }));
  EXPECT_NE(cp_.last_report("t-fence.1")->message.find("lost"), std::string::npos);
}

// The witness (DESIGN.md "Fencing and outages"): with its syncs unanswered,
// the agent reads the beacon. Standing still for F (nobody judges anyone's
// silence): the lease runs on and the task with it, for many leases. Moving
// (a live control plane that cannot hear this agent), unreadable, or behind
// what the server last named: no lease from it, fenced at L - m as before.
class AgentBeaconTest : public AgentTest {
 protected:
  std::string beacon_path() { return dir_.path() + "/witness/beacon"; }
  void write_beacon(std::int64_t term, std::int64_t seq) {
    std::filesystem::create_directories(dir_.path() + "/witness");
    std::ofstream(beacon_path() + ".tmp") << R"({"term":)" << term << R"(,"seq":)" << seq << R"(,"server":"s1"})";
    std::filesystem::rename(beacon_path() + ".tmp", beacon_path());
  }
  // The sleeper runs under a 2 s lease (margin 1 s) with the beacon named
  // at (1, 5), F = 200 ms, read every 50 ms; then the server goes silent.
  int start_watched_sleeper(const std::string& task, const std::string& url) {
    write_beacon(1, 5);
    cp_.set_beacon(url, 1, 5, 200, 50);
    const int sleeper = start_sleeper(short_lease(), task);
    // One answered sync after the sleeper runs carries the witness.
    const auto seen = cp_.syncs().size();
    wait_until([&] { return cp_.syncs().size() > seen + 1; });
    server_.set_blackhole(true);
    return sleeper;
  }
};

TEST_F(AgentBeaconTest, AStillBeaconKeepsTheTasksRunningThroughAnOutage) {
  const int sleeper = start_watched_sleeper("t-still", "file://" + beacon_path());
  ASSERT_GT(sleeper, 0);
  // Four leases of silence: the task runs on.
  std::this_thread::sleep_for(std::chrono::milliseconds(4000));
  EXPECT_FALSE(process_gone(sleeper)) << "fenced although nobody judged";
  EXPECT_EQ(executor_->poll().at(0).state, AttemptState::Running);
  shim::LeaseRecord lease;
  ASSERT_TRUE(shim::read_lease((dir_.path() + "/lease.json").c_str(), lease));
  EXPECT_GT(lease.deadline_ms, BootTimeClock::instance().now_ms()) << "the supervisors hold an extended deadline";

  // The server answers again: the same attempt, still running, attempt 1.
  server_.set_blackhole(false);
  ASSERT_TRUE(wait_until([&] {
    auto r = cp_.last_report("t-still.1");
    return r && r->state == AttemptState::Running && cp_.syncs().back().req.attempts.size() == 1;
  }));
  EXPECT_FALSE(process_gone(sleeper));
}

TEST_F(AgentBeaconTest, AMovingBeaconMeansCutOffAndTheAgentFences) {
  const int sleeper = start_watched_sleeper("t-moving", "file://" + beacon_path());
  ASSERT_GT(sleeper, 0);
  const auto silent_at = std::chrono::steady_clock::now();
  std::atomic<bool> done{false};
  std::thread leader([&] {
    for (std::int64_t seq = 6; !done; ++seq) {
      write_beacon(1, seq);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  const bool gone = wait_until([&] { return process_gone(sleeper); });
  done = true;
  leader.join();
  ASSERT_TRUE(gone) << "a cut-off agent kept its task while the control plane lived";
  EXPECT_LT(std::chrono::steady_clock::now() - silent_at, std::chrono::milliseconds(2500));
  EXPECT_TRUE(wait_until([&] { return executor_->poll().at(0).state == AttemptState::Lost; }));
}

TEST_F(AgentBeaconTest, AnUnreadableBeaconGivesNoLease) {
  const int sleeper = start_watched_sleeper("t-unread", "file://" + dir_.path() + "/no-such-beacon");
  ASSERT_GT(sleeper, 0);
  EXPECT_TRUE(wait_until([&] { return process_gone(sleeper); })) << "kept running on a beacon it cannot read";
}

TEST_F(AgentBeaconTest, ABeaconBehindWhatTheServerNamedGivesNoLease) {
  const int sleeper = start_watched_sleeper("t-behind", "file://" + beacon_path());
  ASSERT_GT(sleeper, 0);
  write_beacon(1, 3);  // an older copy (a lagging replica, a restored backup)
  EXPECT_TRUE(wait_until([&] { return process_gone(sleeper); })) << "kept running on a beacon from the past";
}

// A clean stop leaves attempts running; a restarted agent that cannot reach
// the server still fences them on time (the lease is persisted).
TEST_F(AgentTest, RestartedAgentAdoptsAndStillFences) {
  const auto c = short_lease();
  const int sleeper = start_sleeper(c, "t-restart");
  ASSERT_GT(sleeper, 0);
  stop_agent();
  EXPECT_FALSE(process_gone(sleeper)) << "a clean agent stop must leave attempts running";

  server_.set_blackhole(true);
  start_agent(c);
  ASSERT_TRUE(wait_until([&] { return process_gone(sleeper); }, 5000)) << "adopted attempt not fenced";
  server_.set_blackhole(false);
  ASSERT_TRUE(wait_until([&] {
    auto r = cp_.last_report("t-restart.1");
    return r && r->state == AttemptState::Lost;
  }));
}

// The agent dies (here: stops and never comes back, so nothing extends its
// lease): the supervisors stop its tasks themselves at the lease's deadline,
// before the server could run them elsewhere (L - m after the last answered
// sync; the server waits lost_after_s >= L).
TEST_F(AgentTest, ADeadAgentsTasksAreStoppedByTheirSupervisors) {
  const auto c = short_lease();
  const int sleeper = start_sleeper(c, "t-dead");
  ASSERT_GT(sleeper, 0);
  stop_agent();
  const auto died_at = std::chrono::steady_clock::now();
  ASSERT_TRUE(wait_until([&] { return process_gone(sleeper); }, 5000)) << "still running without its agent";
  EXPECT_LT(std::chrono::steady_clock::now() - died_at, std::chrono::milliseconds(2500));
  const std::string exit_file = attempt_dir("t-dead.1") + "/r0.exit";
  ASSERT_TRUE(wait_until([&] { return std::filesystem::exists(exit_file); }));
  EXPECT_TRUE(slurp(exit_file).starts_with("fenced ")) << slurp(exit_file);
}

// Restarted within its lease, the agent adopts its attempts and extends the
// lease: the task goes on as if nothing happened. Restarted after it, the
// attempts are found fenced and reported Lost, never adopted.
TEST_F(AgentTest, ARestartedAgentAdoptsOnlyWhileItsLeaseHolds) {
  const auto c = short_lease();
  const int sleeper = start_sleeper(c, "t-back");
  ASSERT_GT(sleeper, 0);
  shim::LeaseRecord before;
  ASSERT_TRUE(shim::read_lease((dir_.path() + "/lease.json").c_str(), before));
  stop_agent();
  start_agent(c);  // at once: well within the lease
  std::this_thread::sleep_for(std::chrono::milliseconds(2500));  // past the old deadline: extended meanwhile
  EXPECT_FALSE(process_gone(sleeper)) << "an adopted attempt was stopped although its lease was extended";
  shim::LeaseRecord after;
  ASSERT_TRUE(shim::read_lease((dir_.path() + "/lease.json").c_str(), after));
  EXPECT_STREQ(after.chain, before.chain) << "the same chain goes on";
  EXPECT_GT(after.deadline_ms, before.deadline_ms);
  EXPECT_EQ(cp_.last_report("t-back.1")->state, AttemptState::Running);

  stop_agent();
  ASSERT_TRUE(wait_until([&] { return process_gone(sleeper); }, 5000)) << "not fenced while the agent was away";
  start_agent(c);
  ASSERT_TRUE(wait_until([&] {
    auto r = cp_.last_report("t-back.1");
    return r && r->state == AttemptState::Lost;
  }));
  EXPECT_NE(cp_.last_report("t-back.1")->message.find("lease ran out"), std::string::npos)
      << cp_.last_report("t-back.1")->message;
  ASSERT_TRUE(shim::read_lease((dir_.path() + "/lease.json").c_str(), after));
  EXPECT_STRNE(after.chain, before.chain) << "a lease taken after one ran out begins a new chain";
}

// A credential with little life left is renewed with itself as the bearer.
TEST_F(AgentTest, RenewsTheCredentialBeforeItExpires) {
  cp_.set_credential_life_ms(1500);
  start_agent(agent_config());
  ASSERT_TRUE(wait_until([&] { return cp_.registers().size() >= 2; }));
  auto regs = cp_.registers();
  EXPECT_EQ(regs[1].req.bootstrap_token, "");
  EXPECT_EQ(regs[1].auth, "Bearer cred-1");
  EXPECT_EQ(regs[1].status, 200);
  ASSERT_TRUE(wait_until([&] { return cp_.syncs().back().auth == "Bearer cred-2"; }));
}

// A refused credential is replaced through a new bootstrap token; a spent
// token is not offered again.
TEST_F(AgentTest, ReRegistersWithAFreshBootstrapTokenAfter401) {
  SavedCredential old;
  old.cluster_id = "local-1";
  old.credential = "revoked";
  old.used_bootstrap_sha256 = sha256_hex("cpb_first");
  std::ofstream(dir_.path() + "/credential.json") << dump(to_json(old));

  // Only the spent token: no register call, sync retried with backoff.
  start_agent(agent_config());
  ASSERT_TRUE(wait_until([&] { return cp_.calls() >= 3; }));
  EXPECT_TRUE(cp_.syncs().empty());
  stop_agent();
  EXPECT_TRUE(cp_.registers().empty());

  cp_.accept_bootstrap("cpb_second");
  auto c = agent_config();
  c.bootstrap_token = "cpb_second";
  start_agent(c);
  ASSERT_TRUE(wait_until([&] { return !cp_.syncs().empty(); }));
  ASSERT_EQ(cp_.registers().size(), 1u);
  EXPECT_EQ(cp_.registers()[0].req.bootstrap_token, "cpb_second");
}

// The server refusing an attempt's logs (409, stale epoch) ends shipping for it.
TEST_F(AgentTest, StopsShippingLogsTheServerRefuses) {
  cp_.set_logs_status(409);
  cp_.add_start(order_for("t-stale", sh("echo something")));
  start_agent(agent_config());
  ASSERT_TRUE(wait_until([&] {
    auto r = cp_.last_report("t-stale.1");
    return r && r->state == AttemptState::Succeeded;
  }));
  // Acked and refused: nothing left to keep.
  EXPECT_TRUE(wait_until([&] { return !std::filesystem::exists(attempt_dir("t-stale.1")); }));
  EXPECT_TRUE(cp_.logs().empty());
}

// One round by hand: sync_once registers, syncs and applies the answer.
TEST_F(AgentTest, SyncOnce) {
  auto ex = std::make_unique<LocalExecutor>(executor_config());
  auto* raw = ex.get();
  Agent agent(agent_config(), std::move(ex));
  cp_.add_start(order_for("t-once", {"true"}));
  ASSERT_TRUE(agent.sync_once().ok());
  EXPECT_EQ(cp_.registers().size(), 1u);
  EXPECT_EQ(raw->poll().size(), 1u);
  ASSERT_TRUE(wait_until([&] { return is_terminal(raw->poll().at(0).state); }));
  ASSERT_TRUE(agent.sync_once().ok());  // reports Succeeded; acked
  ASSERT_TRUE(agent.sync_once().ok());
  EXPECT_TRUE(raw->poll().empty());

  auto c = agent_config();
  c.server_url = "http://127.0.0.1:1";
  c.data_dir = dir_.path() + "/other";
  auto other = executor_config();
  other.data_dir = c.data_dir;
  Agent no_server(c, std::make_unique<LocalExecutor>(other));
  auto st = no_server.sync_once();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, "unreachable");
}

// --server with several servers: one that does not answer is passed over;
// the agent registers and syncs through the next, and its credential file
// records the list as configured (spaces and trailing '/' aside).
TEST_F(AgentTest, RegistersAndSyncsThroughTheNextServerWhenTheFirstDoesNotAnswer) {
  ClosedPort closed;
  auto c = agent_config();
  c.server_url = closed.url() + ", " + server_.url() + "/";
  start_agent(c);
  ASSERT_TRUE(wait_until([&] { return cp_.syncs().size() >= 2; }));
  EXPECT_EQ(cp_.registers().size(), 1u);
  EXPECT_EQ(cp_.syncs().back().auth, "Bearer cred-1");
  stop_agent();
  auto cred = decode_json<SavedCredential>(slurp(dir_.path() + "/credential.json"));
  ASSERT_TRUE(cred.ok());
  EXPECT_EQ(cred->server_url, closed.url() + "," + server_.url());
}

// Only no answer or a 502/503/504 moves the next request to the next server;
// any other answer (a 409 here; 401 alike) is the control plane speaking,
// and the agent stays. A request is never sent twice by the switch itself.
TEST_F(AgentTest, OnlyNoAnswerOrA502503504MovesToTheNextServer) {
  std::atomic<int> status{409};
  std::atomic<int> calls{0};
  FakeServer first([&](const FakeRequest&) {
    ++calls;
    return FakeResponse{status.load(), R"({"error":{"code":"refused","message":"not now"}})"};
  });
  auto c = agent_config();
  c.server_url = first.url() + "," + server_.url();
  Agent agent(c, std::make_unique<LocalExecutor>(executor_config()));
  EXPECT_FALSE(agent.sync_once().ok());
  EXPECT_FALSE(agent.sync_once().ok());
  EXPECT_EQ(calls.load(), 2) << "a 409 keeps the server";
  EXPECT_EQ(cp_.calls(), 0);

  for (int gateway : {502, 503, 504}) {
    status = gateway;
    auto c2 = c;
    Agent again(c2, std::make_unique<LocalExecutor>(executor_config()));
    const int before = calls.load();
    const int elsewhere = cp_.calls();
    EXPECT_FALSE(again.sync_once().ok()) << gateway;
    EXPECT_EQ(calls.load(), before + 1) << "sent once: " << gateway;
    EXPECT_EQ(cp_.calls(), elsewhere) << "not retried inside the request: " << gateway;
    // The next request goes to the second server.
    if (gateway == 502) {
      ASSERT_TRUE(again.sync_once().ok());
      EXPECT_EQ(calls.load(), before + 1);
      EXPECT_EQ(cp_.registers().size(), 1u);
      EXPECT_EQ(cp_.syncs().size(), 1u);
    }
  }
}

// A malformed server list stops the agent before any request, naming the
// bad entry in English and Chinese.
TEST_F(AgentTest, AMalformedServerListIsRefusedNamingTheEntry) {
  const std::vector<std::pair<std::string, std::string>> cases{
      {server_.url() + ",,http://b:8080", "entry 2 of the server list"},
      {server_.url() + ",b:8080", "\"b:8080\" is not a server URL: it must start with http:// or https://"},
      {server_.url() + ",http://:8080", "\"http://:8080\" is not a server URL: it names no host"},
      {server_.url() + "," + server_.url() + "/", "listed twice"},
      {" ", "the server URL is required"},
  };
  for (const auto& [list, says] : cases) {
    auto c = agent_config();
    c.server_url = list;
    Agent agent(c, std::make_unique<LocalExecutor>(executor_config()));
    auto st = agent.sync_once();
    ASSERT_FALSE(st.ok()) << list;
    EXPECT_EQ(st.error().code, "invalid_field") << list;
    EXPECT_EQ(st.error().message.rfind("server_url: ", 0), 0u) << st.error().message;
    EXPECT_NE(st.error().message.find(says), std::string::npos) << st.error().message;
    EXPECT_NE(st.error().message_zh.find("server_url："), std::string::npos) << st.error().message_zh;
    std::atomic<bool> stop{false};
    EXPECT_FALSE(agent.run(stop).ok()) << list;
  }
  EXPECT_EQ(cp_.calls(), 0);
}

// The agent sends its nodes when the server does not hold them (the first
// sync, or when asked); otherwise their fingerprint, and GPU figures only
// when they moved (model/inventory.h).
TEST_F(AgentTest, SendsItsNodesOnlyWhenTheServerDoesNotHoldThem) {
  Agent agent(agent_config(), std::make_unique<LocalExecutor>(executor_config()));
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(agent.sync_once().ok());
  auto syncs = cp_.syncs();
  ASSERT_EQ(syncs.size(), 3u);
  ASSERT_EQ(syncs[0].req.nodes.size(), 1u);
  EXPECT_FALSE(syncs[0].req.nodes_unchanged);
  const std::string fingerprint = syncs[0].req.inventory;
  EXPECT_EQ(fingerprint, inventory_fingerprint(syncs[0].req.nodes));
  for (int i = 1; i < 3; ++i) {
    EXPECT_TRUE(syncs[i].req.nodes.empty());
    EXPECT_TRUE(syncs[i].req.nodes_unchanged);
    EXPECT_EQ(syncs[i].req.inventory, fingerprint);
    EXPECT_TRUE(syncs[i].req.gpu_figures.empty()) << "no GPU, nothing moved";
  }
  // Asked for it: the nodes go again, at the next sync.
  cp_.ask_for_inventory();
  ASSERT_TRUE(agent.sync_once().ok());
  ASSERT_TRUE(agent.sync_once().ok());
  syncs = cp_.syncs();
  ASSERT_EQ(syncs.size(), 5u);
  EXPECT_TRUE(syncs[3].req.nodes_unchanged) << "this one was answered send_inventory";
  ASSERT_EQ(syncs[4].req.nodes.size(), 1u);
  EXPECT_FALSE(syncs[4].req.nodes_unchanged);
  EXPECT_EQ(syncs[4].req.inventory, fingerprint);
}

// From its second sync on, the agent reports its clock against the
// server's as measured over its syncs (model/clock_estimate.h).
TEST_F(AgentTest, ReportsItsClockOffsetMeasuredOverItsSyncs) {
  cp_.set_hold_ms(0);
  cp_.set_clock_ahead_ms(5000);
  Agent agent(agent_config(), std::make_unique<LocalExecutor>(executor_config()));
  ASSERT_TRUE(agent.sync_once().ok());
  ASSERT_TRUE(agent.sync_once().ok());
  auto syncs = cp_.syncs();
  ASSERT_EQ(syncs.size(), 2u);
  EXPECT_EQ(syncs[0].req.clock_delay_ms, -1) << "nothing measured before the first answer";
  EXPECT_GE(syncs[1].req.clock_delay_ms, 0);
  // The agent is 5 s behind; the estimate is off by at most half the delay.
  EXPECT_LE(std::llabs(syncs[1].req.clock_offset_ms + 5000), syncs[1].req.clock_delay_ms / 2 + 1);
}

}  // namespace
}  // namespace cp
