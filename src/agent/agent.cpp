#include "agent/agent.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <thread>

#include "agent/executors/shim.h"
#include "agent/files.h"
#include "agent/utf8.h"
#include "common/ids.h"
#include "common/log.h"
#include "common/server_urls.h"

namespace cp {
namespace {

// A new lease chain's id: 16 hex digits.
std::string new_chain_id() {
  std::random_device rd;
  const std::uint64_t v = (static_cast<std::uint64_t>(rd()) << 32) ^ rd();
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

constexpr std::string_view kRegisterPath = "/api/v1/agent/register";
constexpr std::string_view kSyncPath = "/api/v1/agent/sync";
constexpr std::string_view kLogsPath = "/api/v1/agent/logs";

bool is_2xx(long status) { return status >= 200 && status < 300; }

// The message of an error body {"error": {"message": ...}}, else the body's start.
std::string server_message(const HttpResponse& r) {
  auto v = parse_json(r.body);
  if (v.ok() && v->is_object()) {
    const auto& o = v->get_object();
    if (auto* e = o.if_contains("error"); e && e->is_object()) {
      if (auto* m = e->get_object().if_contains("message"); m && m->is_string()) return std::string(m->get_string());
    }
  }
  return "HTTP " + std::to_string(r.status) + (r.body.empty() ? "" : ": " + r.body.substr(0, 200));
}

Error http_error(const std::string& what, const HttpResponse& r) {
  std::string msg = what + ": " + server_message(r);
  if (r.status == 401 || r.status == 403) return errors::unauthenticated(msg, msg);
  Error e{"server_error", static_cast<int>(r.status), msg, msg, {}};
  return e;
}

// What the server must learn about an attempt; times are left out so that a
// report only counts as news when its state, exit code or message changes.
std::string signature(const AttemptReport& r) {
  return std::string(boost::describe::enum_to_string(r.state, "?")) + "|" +
         (r.exit_code ? std::to_string(*r.exit_code) : "-") + "|" + r.message;
}

std::map<std::string, std::string> signatures(const std::vector<AttemptReport>& reports) {
  std::map<std::string, std::string> out;
  for (const auto& r : reports) out[r.attempt_id] = signature(r);
  return out;
}

// An attempt in `now` that `base` does not know, or knows in another state.
bool differs(const std::map<std::string, std::string>& now, const std::map<std::string, std::string>& base) {
  for (const auto& [id, sig] : now) {
    auto it = base.find(id);
    if (it == base.end() || it->second != sig) return true;
  }
  return false;
}

}  // namespace

Agent::Agent(AgentConfig config, std::unique_ptr<Executor> executor, const Clock& clock, const Clock& lease_clock)
    : config_(std::move(config)),
      servers_(parse_server_urls(config_.server_url, "server_url")),
      executor_(std::move(executor)),
      clock_(clock),
      lease_clock_(lease_clock) {
  CP_CHECK(executor_ != nullptr, "Agent needs an executor");
  // As configured, spaces and trailing '/' aside: what the credential file records.
  config_.server_url = normalize_server_urls(config_.server_url);
  instance_ = new_id("agent", clock_.now_ms());
  rng_.seed(config_.seed != 0 ? config_.seed : std::random_device{}());
  load_state();
}

Agent::~Agent() = default;

Status Agent::check_config() const {
  if (!servers_.ok()) return servers_.error();
  if (config_.cluster_id.empty()) return errors::invalid("cluster_id", "the cluster id is required", "必须指定集群 ID");
  if (config_.data_dir.empty())
    return errors::invalid("data_dir", "the data directory is required", "必须指定数据目录");
  return agent_files::make_dirs(config_.data_dir);
}

// ------------------------------------------------------------ local state

void Agent::load_state() {
  last_sync_ok_wall_ = clock_.now_ms();
  if (config_.data_dir.empty()) return;
  if (auto text = agent_files::read_all(config_.data_dir + "/credential.json")) {
    auto c = decode_json<SavedCredential>(*text);
    if (!c.ok()) {
      spdlog::warn("agent: ignoring unreadable {}/credential.json: {}", config_.data_dir, c.error().message);
    } else if (c->cluster_id != config_.cluster_id) {
      spdlog::warn("agent: {}/credential.json belongs to cluster {}, not {}; ignoring it", config_.data_dir,
                   c->cluster_id, config_.cluster_id);
    } else {
      cred_ = std::move(c).value();
    }
  }
  // The lease a previous agent held goes on only while its deadline has not
  // passed (in this boot): then the attempts it ran are adopted and the
  // first answered sync extends it. Otherwise a new chain begins, without a
  // lease until a sync is answered, and the attempts of the old one are
  // stopped (their supervisors stop them too: another chain's record is
  // a lease run out).
  lease_path_ = config_.data_dir + "/lease.json";
  char boot[shim::kBootIdSize + 1];
  if (shim::read_boot_id(boot)) {
    boot_id_ = boot;
  } else {
    spdlog::error("agent: cannot read this machine's boot id (/proc/sys/kernel/random/boot_id): every lease counts "
                  "as run out, and no task can run");
  }
  shim::LeaseRecord held;
  const Millis now = lease_clock_.now_ms();
  if (!boot_id_.empty() && shim::read_lease(lease_path_.c_str(), held) && boot_id_ == held.boot_id &&
      held.deadline_ms > now) {
    chain_ = held.chain;
    lease_end_ = held.deadline_ms;
    if (held.ttl_s > 0) server_ttl_s_ = held.ttl_s;
    spdlog::info("agent: the lease of the previous agent on {} holds for {} ms more: its attempts are adopted",
                 config_.data_dir, lease_end_ - now);
  } else {
    chain_ = new_chain_id();
    lease_end_ = 0;
    fenced_ = true;  // nothing runs under the new chain before a sync is answered
    (void)agent_files::make_dirs(config_.data_dir);
    (void)write_lease();
  }
  executor_->set_lease(lease_path_, chain_);
}

void Agent::save_credential() {
  auto st = agent_files::write_atomic(config_.data_dir + "/credential.json", dump(to_json(cred_)), 0600);
  if (!st.ok()) spdlog::error("agent: cannot persist the credential: {}", st.error().message);
}

bool Agent::write_lease() {
  shim::LeaseRecord rec;
  std::snprintf(rec.boot_id, sizeof rec.boot_id, "%s", boot_id_.c_str());
  std::snprintf(rec.chain, sizeof rec.chain, "%s", chain_.c_str());
  rec.deadline_ms = lease_end_;
  rec.grace_ms = std::min<Millis>(config_.fence_grace_s * 1000, fence_margin_ms() / 2);
  rec.ttl_s = server_ttl_s_;
  const std::string text = shim::encode_lease(rec);
  if (text.empty()) return false;
  // In place, one write of a fixed size: no new blocks (a full disk still
  // takes it), and a reader that catches it half-written sees a bad check.
  int fd = ::open(lease_path_.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && ::pwrite(fd, text.data(), text.size(), 0) == static_cast<ssize_t>(text.size());
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    warn_limited("agent: cannot write the lease file " + lease_path_ + " (" + std::strerror(err) +
                 "): the running tasks' supervisors stop them at the deadline written before");
  }
  return ok;
}

void Agent::take_lease(Millis sent_at) {
  // This chain's lease ran out: its supervisors may be stopping their tasks
  // now, and the server may run them elsewhere. A new chain, so that none
  // of them counts this lease as its own.
  const bool lapsed = lease_end_ != 0 && lease_end_ <= lease_clock_.now_ms();
  if (lapsed) {
    chain_ = new_chain_id();
    lease_end_ = 0;
    spdlog::info("agent: a new lease after the last one ran out (chain {})", chain_);
  }
  lease_end_ = std::max(lease_end_, sent_at + lease_ttl_ms() - fence_margin_ms());
  (void)write_lease();  // before set_lease: a start under the new chain reads its deadline
  if (lapsed) executor_->set_lease(lease_path_, chain_);
}

// ---------------------------------------------------------- registration

bool Agent::bootstrap_usable() const {
  return !config_.bootstrap_token.empty() && sha256_hex(config_.bootstrap_token) != cred_.used_bootstrap_sha256;
}

Status Agent::ensure_registered() {
  const bool expired = cred_.expires_at != 0 && clock_.now_ms() >= cred_.expires_at;
  if (!cred_.credential.empty() && !(expired && bootstrap_usable())) return ok_status();
  if (bootstrap_usable()) return register_with(config_.bootstrap_token);
  std::string msg = "cluster " + config_.cluster_id + " has no usable agent credential" +
                    (config_.bootstrap_token.empty() ? std::string(" and no bootstrap token was given")
                                                     : std::string(" and its bootstrap token was already used")) +
                    ": create one (POST /api/v1/clusters/" + config_.cluster_id +
                    "/bootstrap-tokens) and start the agent with it";
  return errors::unauthenticated(
      msg, "集群 " + config_.cluster_id + " 没有可用的 agent 凭据：请创建新的引导令牌后重启 agent");
}

Status Agent::register_with(const std::string& bootstrap_token) {
  const bool renewing = bootstrap_token.empty();
  RegisterRequest req{config_.cluster_id, bootstrap_token, instance_, config_.agent_version};
  auto r = post(std::string(kRegisterPath), dump(to_json(req)), config_.request_timeout_ms, renewing);
  if (!r.ok()) return r.error();
  if (!is_2xx(r->status)) {
    if ((r->status == 401 || r->status == 403) && !renewing) {
      // Spent or revoked: never offer it again (it is one-time anyway).
      cred_.used_bootstrap_sha256 = sha256_hex(bootstrap_token);
      save_credential();
    }
    return http_error(renewing ? "renewing the agent credential" : "registering with the bootstrap token", *r);
  }
  auto resp = decode_json<RegisterResponse>(r->body);
  if (!resp.ok() || resp->credential.empty()) {
    return errors::unavailable("register: the server's answer carries no credential", "注册：服务器的应答中没有凭据");
  }
  const Millis now = clock_.now_ms();
  cred_.cluster_id = config_.cluster_id;
  cred_.server_url = config_.server_url;
  cred_.credential = resp->credential;
  cred_.expires_at = resp->expires_at;
  cred_.renew_at = 0;
  if (resp->expires_at > 0) {
    // Life measured on the server's clock, applied on ours: renew with a third left.
    Millis life = resp->expires_at - (resp->server_time > 0 ? resp->server_time : now);
    cred_.renew_at = now + std::max<Millis>(0, life) * 2 / 3;
  }
  if (!renewing) {
    cred_.used_bootstrap_sha256 = sha256_hex(bootstrap_token);
    inventory_.reset();  // a new enrollment: the server may hold nothing of ours
  }
  if (resp->lease_ttl_s > 0) server_ttl_s_ = resp->lease_ttl_s;
  save_credential();
  spdlog::info("agent: {} cluster {} (instance {}, credential expires {})", renewing ? "renewed" : "registered",
               config_.cluster_id, instance_, cred_.expires_at ? format_time(cred_.expires_at) : "never");
  return ok_status();
}

void Agent::maybe_renew() {
  const Millis now = clock_.now_ms();
  if (cred_.credential.empty() || cred_.renew_at == 0 || now < cred_.renew_at || now < next_renew_try_) return;
  auto st = register_with("");
  if (st.ok()) return;
  next_renew_try_ = now + config_.backoff_max_ms;
  warn_limited("agent: cannot renew the credential (will retry): " + st.error().message);
}

void Agent::handle_unauthorized(const Error& e) {
  if (bootstrap_usable()) {
    spdlog::warn("agent: the server refused the credential ({}); registering again with the bootstrap token",
                 e.message);
    auto st = register_with(config_.bootstrap_token);
    if (st.ok()) return;
    warn_limited("agent: registering again failed: " + st.error().message);
    return;
  }
  warn_limited("agent: the server refuses the credential of cluster " + config_.cluster_id + " (" + e.message +
               ") and no unused bootstrap token is left: create one (POST /api/v1/clusters/" + config_.cluster_id +
               "/bootstrap-tokens) and restart the agent with it; retrying meanwhile");
}

// ------------------------------------------------------------------- sync

std::vector<AttemptReport> Agent::current_reports() {
  auto reports = executor_->poll();
  for (const auto& [id, r] : refused_starts_) reports.push_back(r);
  return reports;
}

bool Agent::has_news() { return differs(signatures(current_reports()), reported_); }

Result<SyncResponse> Agent::sync(Millis wait_ms, bool abortable) {
  const Millis now = clock_.now_ms();
  const Millis lease_sent = lease_clock_.now_ms();
  if (nodes_.empty() || now - nodes_at_ >= config_.inventory_refresh_ms) {
    nodes_ = executor_->inventory();
    nodes_at_ = now;
    nodes_fingerprint_ = inventory_fingerprint(nodes_);
  }
  SyncRequest req;
  req.cluster_id = config_.cluster_id;
  req.agent_instance = instance_;
  req.seq = ++seq_;
  req.sent_at = now;
  if (auto clock = clock_estimate_.best()) {
    req.clock_offset_ms = clock->offset_ms;
    req.clock_delay_ms = clock->delay_ms;
  }
  inventory_.fill(req, nodes_, nodes_fingerprint_, now);
  req.attempts = current_reports();
  req.engine = executor_->engine();
  req.wait_ms = wait_ms;
  inflight_ = signatures(req.attempts);

  // While the server holds a long-poll, an attempt that ends (or any other
  // change) cuts it short so that the report goes out within ~change_check_ms.
  std::function<bool(const std::vector<AttemptReport>&)> news;
  if (abortable) news = [this](const std::vector<AttemptReport>& now) { return differs(signatures(now), inflight_); };
  auto r = post(std::string(kSyncPath), dump(to_json(req)), config_.request_timeout_ms + wait_ms, true, news);
  spdlog::debug("agent: sync {} (wait {} ms, {} reports) {} after {} ms", req.seq, wait_ms, req.attempts.size(),
                r.ok() ? std::to_string(r->status) : r.error().code, clock_.now_ms() - now);
  if (!r.ok()) return r.error();
  if (!is_2xx(r->status)) return http_error("sync", *r);
  auto resp = decode_json<SyncResponse>(r->body);
  if (!resp.ok()) {
    return errors::unavailable("sync: unreadable answer: " + resp.error().message,
                               "同步：无法解析应答：" + resp.error().message);
  }
  if (auto sample = clock_sample(now, resp->received_at, resp->server_time, clock_.now_ms())) {
    clock_estimate_.add(*sample);
  }
  if (fenced_ && lease_end_ != 0) {
    spdlog::warn("agent: the server answers again; reporting the attempts stopped while fenced");
  }
  inventory_.answered(*resp);
  last_sync_ok_wall_ = now;
  if (resp->lease_ttl_s > 0) server_ttl_s_ = resp->lease_ttl_s;
  take_lease(lease_sent);
  if (stale_logged_) {
    spdlog::info("agent: the server answers again; the lease comes from its syncs again");
    stale_logged_ = false;
  }
  {
    std::lock_guard lock(witness_mu_);
    beacon_url_ = resp->beacon_url;
    beacon_named_ = {resp->beacon_term, resp->beacon_seq};
    beacon_window_ms_ = resp->beacon_window_ms;
    beacon_poll_ms_ = resp->beacon_poll_ms;
    answered_sent_ = lease_sent;
    ++answered_gen_;
  }
  fenced_ = false;
  reported_ = inflight_;
  live_attempts_ = std::any_of(req.attempts.begin(), req.attempts.end(),
                               [](const AttemptReport& a) { return !is_terminal(a.state); });
  return std::move(resp).value();
}

void Agent::apply(const SyncResponse& resp) {
  for (const auto& id : resp.ack) {
    executor_->forget(id);
    refused_starts_.erase(id);
    reported_.erase(id);
  }
  for (const auto& s : resp.stop) executor_->stop(s.attempt_id, s.reason, s.grace_s);
  const auto started = executor_->start_all(resp.start);
  CP_CHECK(started.size() == resp.start.size(), "start_all answered for another number of orders");
  for (std::size_t i = 0; i < resp.start.size(); ++i) {
    const auto& o = resp.start[i];
    const auto& st = started[i];
    if (st.ok()) continue;
    spdlog::error("agent: cannot start attempt {}: {}", o.attempt_id, st.error().message);
    AttemptReport rep;
    rep.attempt_id = o.attempt_id;
    rep.epoch = o.epoch;
    rep.state = AttemptState::Failed;
    rep.started_at = rep.finished_at = clock_.now_ms();
    rep.message = "cannot start: " + st.error().message;
    refused_starts_.emplace(o.attempt_id, std::move(rep));
  }
}

void Agent::ship_logs() {
  auto pieces = executor_->read_new_logs(config_.log_budget_bytes);
  std::size_t total = 0;
  for (const auto& p : pieces) total += p.data.size();
  logs_pending_ = total >= config_.log_budget_bytes;
  for (const auto& p : pieces) {
    LogUpload up;
    up.attempt_id = p.attempt_id;
    up.epoch = p.epoch;
    up.replica = p.replica;
    up.offset = p.offset;
    const std::size_t used = sanitize_utf8(p.data, p.final, up.data);
    if (used == 0) continue;  // only the start of a character so far
    auto r = post(std::string(kLogsPath), dump(to_json(up)), config_.request_timeout_ms, true);
    if (!r.ok()) {
      logs_pending_ = true;
      return;  // the server is away; the sync loop deals with it
    }
    if (is_2xx(r->status)) {
      executor_->logs_shipped(p.attempt_id, p.replica, p.offset + static_cast<std::int64_t>(used));
    } else if (r->status == 409) {
      spdlog::info("agent: the server refuses logs of attempt {} ({}); no longer shipping them", p.attempt_id,
                   server_message(*r));
      executor_->logs_refused(p.attempt_id);
    } else {
      warn_limited("agent: shipping logs of " + p.attempt_id + " failed: " + server_message(*r));
      logs_pending_ = true;
      return;
    }
  }
}

// -------------------------------------------------------------- fencing

Millis Agent::lease_ttl_ms() const { return (config_.lease_ttl_s > 0 ? config_.lease_ttl_s : server_ttl_s_.load()) * 1000; }

Millis Agent::fence_margin_ms() const {
  if (config_.fence_margin_ms > 0) return config_.fence_margin_ms;
  return std::min<Millis>(5000, lease_ttl_ms() / 6);
}

bool Agent::fence_due(Millis now) const { return !fenced_ && now >= lease_end_; }

void Agent::fence(Millis now) {
  fenced_ = true;
  // Dead (SIGKILL at the latest) before the server's deadline t0 + L.
  const std::int64_t grace_s = std::min<std::int64_t>(config_.fence_grace_s, fence_margin_ms() / 2000);
  int stopped = 0;
  for (const auto& r : executor_->poll()) {
    if (is_terminal(r.state)) continue;
    executor_->stop(r.attempt_id, std::string(kStopLost), grace_s);
    ++stopped;
  }
  spdlog::error(
      "agent: the lease ran out {} ms ago (last answered sync sent {}; lease {} s, margin {} ms): fencing, stopped "
      "{} attempt(s); they are reported when the server answers again",
      now - lease_end_, format_time(last_sync_ok_wall_), lease_ttl_ms() / 1000, fence_margin_ms(), stopped);
}

void Agent::apply_stale_verdict(Millis now) {
  const Millis until = stale_until_.load();
  // Only a lease that still holds runs on: once it ran out, the supervisors
  // may be stopping the tasks, and only an answered sync starts a new chain.
  if (fenced_ || until <= lease_end_ || lease_end_ <= now) return;
  lease_end_ = until;
  (void)write_lease();
  if (!stale_logged_) {
    spdlog::warn("agent: the server does not answer and its beacon stands still (nobody is judging liveness): the "
                 "tasks keep running; lease held for {} ms more, renewed while the beacon stays still",
                 lease_end_ - now);
    stale_logged_ = true;
  }
}

std::optional<BeaconMark> Agent::read_beacon(const std::string& url, Millis timeout_ms, std::string& why) {
  std::string body;
  if (url.rfind("file://", 0) == 0) {
    auto text = agent_files::read_all(url.substr(7));
    if (!text) {
      why = "cannot read " + url;
      return std::nullopt;
    }
    body = std::move(*text);
  } else if (url.rfind("http://", 0) == 0 || url.rfind("https://", 0) == 0) {
    static thread_local HttpClient client;
    HttpRequestOptions opts;
    opts.timeout_ms = static_cast<long>(std::max<Millis>(100, timeout_ms));
    opts.should_abort = [this] { return stopping(); };
    auto r = client.request("GET", url, "", "", opts);
    if (!r.ok()) {
      why = r.error().message;
      return std::nullopt;
    }
    if (!is_2xx(r->status)) {
      why = "HTTP " + std::to_string(r->status);
      return std::nullopt;
    }
    body = std::move(r->body);
  } else {
    why = "unsupported witness URL";
    return std::nullopt;
  }
  auto b = parse_beacon(body);
  if (!b) why = "the beacon is not {\"term\", \"seq\"} JSON";
  return b;
}

void Agent::watch_beacon() {
  struct Anchor {
    BeaconMark mark;
    Millis answered = 0;
  };
  std::optional<Anchor> anchor;
  std::uint64_t gen = 0;
  WarnLimiter warnings;  // warn_limited's, for this thread
  auto note = [&](const std::string& what) { warnings.warn(clock_.now_ms(), what); };
  while (!stopping()) {
    std::string url;
    BeaconMark named;
    Millis window = 0, poll = 0, sent_at = 0;
    {
      std::lock_guard lock(witness_mu_);
      url = beacon_url_;
      named = beacon_named_;
      window = beacon_window_ms_;
      poll = beacon_poll_ms_;
      sent_at = answered_sent_;
      if (gen != answered_gen_) anchor.reset();  // an answer: pairs start again
      gen = answered_gen_;
    }
    const Millis pause = std::clamp<Millis>(poll, 50, 1000);
    const Millis usable = lease_ttl_ms() - fence_margin_ms();
    if (url.empty() || window <= 0 || lease_clock_.now_ms() < sent_at + usable / 3) {
      wait_ms_plain(pause);
      continue;
    }
    const Millis sent = lease_clock_.now_ms();
    std::string why;
    auto mark = read_beacon(url, window, why);
    const Millis answered = lease_clock_.now_ms();
    if (!mark || *mark < named) {
      if (mark) why = "the beacon is behind what the server last named";
      anchor.reset();
      note("agent: cannot read the control plane's beacon (" + why +
                   "): no lease from it; the tasks stop when the lease runs out");
    } else if (!anchor || anchor->mark != *mark) {
      if (anchor && anchor->mark < *mark) {
        // A live control plane that cannot hear us: syncing again now is
        // the only way to keep the lease; the tasks stop when it runs out.
        beacon_moved_ = true;
        note("agent: the control plane's beacon moves (it is alive and judging): syncing again at once; no lease "
             "comes from the beacon, so the tasks stop when the lease runs out unless a sync is answered");
      }
      anchor = Anchor{*mark, answered};
    } else if (sent - anchor->answered >= window) {
      // Nobody's chain held between the anchor's answer and this send.
      const Millis until = sent + usable;
      Millis held = stale_until_.load();
      while (held < until && !stale_until_.compare_exchange_weak(held, until)) {
      }
    }
    wait_ms_plain(pause);
  }
}

std::vector<AttemptReport> Agent::tick() {
  const Millis now = lease_clock_.now_ms();
  apply_stale_verdict(now);
  if (fence_due(now)) fence(now);
  return current_reports();
}

// ------------------------------------------------------------- plumbing

void Agent::wait_ms(Millis ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  const auto slice = std::chrono::milliseconds(std::clamp<Millis>(config_.change_check_ms, 1, 100));
  while (!stopping()) {
    auto now = std::chrono::steady_clock::now();
    if (now >= until) break;
    if (beacon_moved_.exchange(false)) break;  // a live control plane: retry at once
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(slice, until - now));
    tick();
  }
}

void Agent::wait_ms_plain(Millis ms) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (!stopping() && std::chrono::steady_clock::now() < until) {
    std::this_thread::sleep_for(std::min<std::chrono::steady_clock::duration>(
        std::chrono::milliseconds(50), until - std::chrono::steady_clock::now()));
  }
}

void Agent::backoff() {
  backoff_ms_ = std::clamp<Millis>(backoff_ms_ == 0 ? config_.backoff_min_ms : backoff_ms_ * 2, config_.backoff_min_ms,
                                   std::max(config_.backoff_min_ms, config_.backoff_max_ms));
  // "Equal jitter": half fixed, half random, so that agents cut off together do not return in step.
  std::uniform_int_distribution<Millis> jitter(0, backoff_ms_ / 2);
  wait_ms(backoff_ms_ - backoff_ms_ / 2 + jitter(rng_));
}

Result<HttpResponse> Agent::post(const std::string& path, const std::string& body, Millis timeout_ms, bool with_auth,
                                 std::function<bool(const std::vector<AttemptReport>&)> extra_abort) {
  HttpRequestOptions opts;
  opts.timeout_ms = static_cast<long>(timeout_ms);
  opts.abort_check_ms = static_cast<long>(std::clamp<Millis>(config_.change_check_ms, 1, 100));
  if (extra_abort) opts.wake_fds = executor_->exit_fds();
  if (with_auth) opts.headers["Authorization"] = "Bearer " + cred_.credential;
  // Runs on this thread every abort_check_ms while the request is in flight:
  // fencing and kill deadlines keep their time even if the server hangs.
  opts.should_abort = [this, extra = std::move(extra_abort)] {
    auto reports = tick();
    return stopping() || (extra && extra(reports));
  };
  CP_CHECK(servers_.ok() && !servers_->empty(), "post before check_config");
  const std::vector<std::string>& servers = *servers_;
  const std::string& server = servers[current_server_];
  auto r = http_.request("POST", server + path, body, "application/json", opts);
  // Another server of the list may answer where this one did not: a gateway
  // in front of a dead server, a server starting or giving up the lead. Any
  // other answer, a 401 or 409 too, is this control plane speaking.
  std::string why;
  if (!r.ok() && r.error().code == "unreachable") {
    why = r.error().message;
  } else if (r.ok() && (r->status == 502 || r->status == 503 || r->status == 504)) {
    why = "HTTP " + std::to_string(r->status);
  }
  if (!why.empty() && servers.size() > 1) {
    current_server_ = (current_server_ + 1) % servers.size();
    spdlog::info("agent: server {} did not answer ({}); next requests go to {}", server, why,
                 servers[current_server_]);
  }
  return r;
}

void Agent::WarnLimiter::warn(Millis now, const std::string& what) {
  if (what == last && now - at < 30000) return;
  last = what;
  at = now;
  spdlog::warn("{}", what);
}

void Agent::warn_limited(const std::string& what) { warnings_.warn(clock_.now_ms(), what); }

// ------------------------------------------------------------ the loop

Status Agent::run(std::atomic<bool>& stop) {
  CP_TRY(check_config());
  stop_ = &stop;
  spdlog::info("agent: cluster {} -> {} (instance {}, executor {})", config_.cluster_id, config_.server_url, instance_,
               executor_->kind());
  beacon_thread_ = std::thread([this] { watch_beacon(); });
  while (!stopping()) {
    tick();
    auto reg = ensure_registered();
    if (!reg.ok()) {
      warn_limited("agent: not registered: " + reg.error().message);
      backoff();
      continue;
    }
    maybe_renew();
    Millis wait = 0;
    if (!has_news()) wait = (live_attempts_ || logs_pending_) ? config_.busy_poll_ms : config_.long_poll_ms;
    // A long-poll must end well before the fence deadline it would otherwise
    // trip. The lease of one answered sync must last until the next is
    // answered, which is sent when this one is: two waits and two round
    // trips within L - m, so a third each (at half, an idle agent's lease
    // ran out by a few ms at every sync).
    wait = std::min(wait, std::max<Millis>(0, (lease_ttl_ms() - fence_margin_ms()) / 3));
    auto r = sync(wait, wait > 0);
    if (!r.ok()) {
      if (r.error().code == "aborted") continue;  // stop, or news to report at once
      if (r.error().code == "unauthenticated") {
        handle_unauthorized(r.error());
      } else {
        warn_limited("agent: sync failed: " + r.error().message);
      }
      backoff();
      continue;
    }
    backoff_ms_ = 0;
    apply(r.value());
    ship_logs();
  }
  if (beacon_thread_.joinable()) beacon_thread_.join();
  stop_ = nullptr;
  spdlog::info("agent: stopped; running attempts keep running and the next agent on {} adopts them", config_.data_dir);
  return ok_status();
}

Status Agent::sync_once() {
  CP_TRY(check_config());
  tick();
  CP_TRY(ensure_registered());
  maybe_renew();
  auto r = sync(0, false);
  if (!r.ok()) {
    if (r.error().code == "unauthenticated") handle_unauthorized(r.error());
    return r.error();
  }
  apply(r.value());
  ship_logs();
  return ok_status();
}

}  // namespace cp
