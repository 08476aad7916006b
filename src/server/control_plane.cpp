// Construction, authentication, users and tokens, the background loop, metrics.
#include "server/control_plane.h"

#include <spdlog/spdlog.h>

#include "common/ids.h"
#include "model/documents.h"
#include "objstore/retention.h"
#include "server/internal.h"

namespace cp {

using internal::forbidden_for;
using internal::make_event;

bool Principal::can_read_project(const std::string& pg) const {
  if (kind != Kind::user) return false;
  return can_read_all() || project_roles.count(pg) > 0;
}

bool Principal::can_submit_to(const std::string& pg) const {
  if (is_admin()) return true;
  if (kind != Kind::user || role == PlatformRole::viewer) return false;
  auto it = project_roles.find(pg);
  return it != project_roles.end() && (it->second == ProjectRole::admin || it->second == ProjectRole::member);
}

bool Principal::can_admin_project(const std::string& pg) const {
  if (is_admin()) return true;
  if (kind != Kind::user || role == PlatformRole::viewer) return false;
  auto it = project_roles.find(pg);
  return it != project_roles.end() && it->second == ProjectRole::admin;
}

ControlPlane::ControlPlane(Store& store, ObjectStore& objects, const Clock& clock, ServerConfig config)
    : store_(store), objects_(objects), clock_(clock), config_(config), judging_since_(clock.now_ms()) {}

ControlPlane::~ControlPlane() { stop_background(); }

Result<std::optional<std::string>> ControlPlane::ensure_admin_token() {
  std::optional<std::string> secret;
  Millis now = clock_.now_ms();
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto created, tx.get_meta("admin_token_created"));
    if (created) return {};
    CP_ASSIGN(auto existing, tx.get_user("admin"));
    if (!existing) CP_TRY(tx.upsert_user(User{"admin", PlatformRole::admin, now}));
    std::string s = new_secret("cp_");
    CP_TRY(tx.insert_token(ApiToken{new_id("tok", now), sha256_hex(s), "admin", "created at first start", now, 0}));
    CP_TRY(tx.set_meta("admin_token_created", format_time(now)));
    CP_ASSIGN(auto id, tx.append_event(make_event(now, "system", "user", "admin", "user.token_created", "", "",
                                                 "admin token created at first start")));
    (void)id;
    secret = s;
    return {};
  }));
  principals_.clear();
  return secret;
}

static Error bad_token() {
  return errors::unauthenticated("missing or invalid bearer token", "缺少或无效的访问令牌（Bearer token）");
}

Result<Principal> ControlPlane::authenticate(std::string_view bearer) {
  if (bearer.empty()) return bad_token();
  Principal p;
  Millis now = clock_.now_ms();
  std::string hash = sha256_hex(bearer);
  if (auto cached = principals_.get(hash, now)) return *cached;
  const std::uint64_t generation = principals_.generation();
  Millis token_expires_at = 0;
  Status st = store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(auto tok, tx.find_token_by_hash(hash));
    if (!tok) return bad_token();
    token_expires_at = tok->expires_at;
    if (tok->expires_at != 0 && tok->expires_at <= now) {
      return errors::unauthenticated("token expired at " + format_time(tok->expires_at),
                                     "令牌已于 " + format_time(tok->expires_at) + " 过期");
    }
    CP_ASSIGN(auto user, tx.get_user(tok->user));
    if (!user) return bad_token();
    p.kind = Principal::Kind::user;
    p.user = user->name;
    p.role = user->role;
    CP_ASSIGN(auto pgs, tx.list_project_groups());
    for (const auto& pg : pgs) {
      if (auto r = pg.role_of(p.user)) p.project_roles[pg.name] = *r;
    }
    return {};
  });
  if (!st.ok()) return st.error();
  principals_.put(hash, p, token_expires_at, generation, now);
  return p;
}

Result<Principal> ControlPlane::authenticate_agent(std::string_view bearer) {
  if (bearer.empty()) return bad_token();
  Millis now = clock_.now_ms();
  std::string hash = sha256_hex(bearer);
  std::optional<AgentCredential> cred;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(cred, tx.find_agent_credential(hash));
    return {};
  }));
  if (!cred) {
    return errors::unauthenticated("invalid agent credential", "无效的 agent 凭据");
  }
  if (cred->expires_at <= now) {
    // Say so on the cluster: a refused sync must not look like a network outage.
    CP_TRY(store_.write([&](Tx& tx) -> Status {
      CP_ASSIGN(auto c, tx.get_cluster(cred->cluster_id));
      if (!c || (c->state == ClusterState::offline && c->state_reason == "credential_expired")) return {};
      std::string from = boost::describe::enum_to_string(c->state, "?");
      c->state = ClusterState::offline;
      c->state_reason = "credential_expired";
      c->state_message = "agent credential expired at " + format_time(cred->expires_at) + "; sync refused";
      c->updated_at = now;
      CP_TRY(tx.update_cluster(*c));
      CP_ASSIGN(auto id, tx.append_event(make_event(now, "system", "cluster", c->id, "cluster.state", from, "offline",
                                                   c->state_message)));
      (void)id;
      return {};
    }));
    Error e{"credential_expired", 401, "agent credential expired at " + format_time(cred->expires_at),
            "agent 凭据已于 " + format_time(cred->expires_at) + " 过期", {}};
    e.details["cluster_id"] = cred->cluster_id;
    return e;
  }
  Principal p;
  p.kind = Principal::Kind::agent;
  p.user = "agent:" + cred->cluster_id;
  p.cluster_id = cred->cluster_id;
  return p;
}

namespace {
struct UserBody {
  std::string name;
  PlatformRole role = PlatformRole::user;
};
BOOST_DESCRIBE_STRUCT(UserBody, (), (name, role))

struct TokenBody {
  std::string description;
  std::int64_t ttl_s = 0;
};
BOOST_DESCRIBE_STRUCT(TokenBody, (), (description, ttl_s))
}  // namespace

Result<User> ControlPlane::create_user(const Principal& p, const json::value& body) {
  if (!p.is_admin()) return forbidden_for(p, "create users", "创建用户");
  UserBody b;
  CP_TRY(from_json(body, b, DecodeContext{"", true}));
  CP_TRY(validate_name(b.name, "name"));
  Millis now = clock_.now_ms();
  User u{b.name, b.role, now};
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto existing, tx.get_user(b.name));
    if (existing) return errors::already_exists("user", b.name);
    CP_TRY(tx.upsert_user(u));
    CP_ASSIGN(auto id, tx.append_event(make_event(now, p.user, "user", u.name, "user.created", "", "",
                                                 "role " + std::string(boost::describe::enum_to_string(u.role, "?")))));
    (void)id;
    return {};
  }));
  principals_.clear();
  return u;
}

Result<std::vector<User>> ControlPlane::list_users(const Principal& p) {
  if (!p.can_read_all()) return forbidden_for(p, "list users", "查看用户列表");
  std::vector<User> out;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(out, tx.list_users());
    return {};
  }));
  return out;
}

Result<json::object> ControlPlane::create_token(const Principal& p, const std::string& user, const json::value& body) {
  if (!p.is_admin() && !(p.kind == Principal::Kind::user && p.user == user)) {
    return forbidden_for(p, "create tokens for " + user, "为 " + user + " 创建令牌");
  }
  TokenBody b;
  if (!body.is_null()) CP_TRY(from_json(body, b, DecodeContext{"", true}));
  if (b.ttl_s < 0 || b.ttl_s > 10LL * 365 * 86400) {
    return errors::invalid("ttl_s", "must be between 0 (never expires) and 10 years", "应在 0（永不过期）到 10 年之间");
  }
  Millis now = clock_.now_ms();
  std::string secret = new_secret("cp_");
  ApiToken t{new_id("tok", now), sha256_hex(secret), user, b.description, now, b.ttl_s ? now + b.ttl_s * 1000 : 0};
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(auto u, tx.get_user(user));
    if (!u) return errors::not_found("user", user);
    CP_TRY(tx.insert_token(t));
    CP_ASSIGN(auto id, tx.append_event(make_event(now, p.user, "user", user, "user.token_created", "", "", t.id)));
    (void)id;
    return {};
  }));
  principals_.clear();
  json::object out;
  out["id"] = t.id;
  out["token"] = secret;
  out["user"] = user;
  out["expires_at"] = t.expires_at;
  return out;
}

json::object ControlPlane::whoami(const Principal& p) {
  json::object out;
  out["user"] = p.user;
  out["kind"] = p.kind == Principal::Kind::user ? "user" : "agent";
  out["role"] = boost::describe::enum_to_string(p.role, "?");
  json::object roles;
  for (const auto& [pg, r] : p.project_roles) roles[pg] = boost::describe::enum_to_string(r, "?");
  out["project_groups"] = std::move(roles);
  if (!p.cluster_id.empty()) out["cluster_id"] = p.cluster_id;
  return out;
}

Signal& ControlPlane::cluster_signal(const std::string& cluster_id) {
  std::lock_guard lock(signals_mu_);
  auto& s = cluster_signals_[cluster_id];
  if (!s) s = std::make_unique<Signal>();
  return *s;
}

void ControlPlane::wake_scheduler() {
  {
    std::lock_guard lock(loop_mu_);
    loop_wake_ = true;
  }
  loop_cv_.notify_one();
}

void ControlPlane::start_background(std::int64_t idle_ms) {
  loop_stop_ = false;
  loop_ = std::thread([this, idle_ms] {
    using Steady = std::chrono::steady_clock;
    Steady::duration last_cycle{};
    Steady::time_point last_end{};
    while (!loop_stop_) {
      {
        std::unique_lock lock(loop_mu_);
        loop_cv_.wait_for(lock, std::chrono::milliseconds(idle_ms), [&] { return loop_wake_ || loop_stop_.load(); });
        // Under a stream of wakes (submits, syncs) cycles would run back to
        // back: rest at least as long as the last cycle took, so that
        // scheduling keeps to half of the time and the store to the API the
        // other half. But only while the stream lasts: once no wake has come
        // for kQuiet, the burst is over, and what it queued is placed at
        // once instead of after the rest (the end of a burst of 10,000
        // submits waited 0.2-0.7 s for nothing). After an idle spell the
        // first wake is served at once.
        constexpr auto kQuiet = std::chrono::milliseconds(10);
        const auto rest_until = last_end + last_cycle;
        while (!loop_stop_ && rest_until - Steady::now() > std::chrono::milliseconds(1)) {
          loop_wake_ = false;
          const auto left = rest_until - Steady::now();
          const bool woken = loop_cv_.wait_for(lock, std::min<Steady::duration>(left, kQuiet),
                                               [&] { return loop_wake_ || loop_stop_.load(); });
          if (!woken) break;  // quiet
        }
        loop_wake_ = false;
      }
      if (loop_stop_) break;
      const auto started = Steady::now();
      if (!leads()) continue;  // a follower serves requests; the leader's loops wait for its term
      if (auto st = check_liveness(); !st.ok()) spdlog::warn("liveness check: {}", st.error().to_string());
      if (auto st = schedule_once(); !st.ok()) spdlog::warn("scheduling cycle: {}", st.error().to_string());
      last_end = Steady::now();
      last_cycle = last_end - started;
    }
  });
  // Monitoring: history samples and alert passes, each on its own cadence,
  // off the scheduling loop so that neither waits for the other.
  monitor_ = std::thread([this] {
    using Steady = std::chrono::steady_clock;
    Steady::time_point next_sample{};
    while (!loop_stop_) {
      if (leads() && Steady::now() >= next_sample) {
        if (auto st = sample_fleet(); !st.ok()) spdlog::warn("fleet sample: {}", st.error().to_string());
        next_sample = Steady::now() + std::chrono::seconds(std::max<std::int64_t>(1, config_.sample_interval_s));
      }
      if (leads()) {
        if (auto st = evaluate_alerts(); !st.ok()) spdlog::warn("alert rules: {}", st.error().to_string());
        if (auto st = deliver_alerts(); !st.ok()) spdlog::warn("alert delivery: {}", st.error().to_string());
      }
      std::unique_lock lock(loop_mu_);
      retention_cv_.wait_for(lock, std::chrono::seconds(std::max<std::int64_t>(1, config_.alert_interval_s)),
                             [&] { return loop_stop_.load(); });
    }
  });
  retention_ = std::thread([this] {
    while (!loop_stop_) {
      // A follower looks again within a few seconds: it may lead by then.
      if (!leads()) {
        std::unique_lock lock(loop_mu_);
        retention_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return loop_stop_.load(); });
        continue;
      }
      auto pass = run_retention();
      if (!pass.ok()) spdlog::warn("retention: {}", pass.error().to_string());
      // A full batch means more is waiting: go on after a breath, so that
      // the API and the scheduler get the store in between.
      auto wait = pass.ok() && pass->more ? std::chrono::milliseconds(100)
                                          : std::chrono::milliseconds(config_.retention_interval_s * 1000);
      std::unique_lock lock(loop_mu_);
      retention_cv_.wait_for(lock, wait, [&] { return loop_stop_.load(); });
    }
  });
}

namespace {
constexpr std::int64_t kTasksPerTx = 100;
constexpr std::int64_t kEventsPerTx = 1000;
}  // namespace

Result<ControlPlane::RetentionPass> ControlPlane::run_retention() {
  const Millis now = clock_.now_ms();
  const std::int64_t batch = config_.retention_batch;
  RetentionPass pass;
  auto note = [&](std::int64_t removed, const char* what, Millis cutoff) {
    if (removed >= batch) pass.more = true;
    if (removed > 0) spdlog::info("retention: removed {} {} older than {}", removed, what, format_time(cutoff));
  };

  Millis cutoff = now - config_.tmp_retention_s * 1000;
  CP_ASSIGN(pass.tmp_objects, remove_older_than(objects_, "tmp/", cutoff, 100, batch));
  note(pass.tmp_objects, "object(s) under tmp/", cutoff);

  if (config_.log_retention_s > 0) {
    cutoff = now - config_.log_retention_s * 1000;
    CP_ASSIGN(pass.log_objects, remove_older_than(objects_, "logs/", cutoff, 100, batch));
    note(pass.log_objects, "log chunk(s)", cutoff);
  }

  if (config_.event_retention_s > 0) {
    cutoff = now - config_.event_retention_s * 1000;
    while (pass.events < batch) {
      std::int64_t removed = 0;
      CP_TRY(store_.write([&](Tx& tx) -> Status {
        CP_ASSIGN(removed, tx.delete_events_before(cutoff, static_cast<int>(std::min(kEventsPerTx, batch - pass.events))));
        return {};
      }));
      pass.events += removed;
      if (removed == 0) break;
    }
    note(pass.events, "event(s)", cutoff);
  }

  // The fleet's history, each width after its own age, and resolved alerts.
  const std::pair<std::int64_t, std::int64_t> history[] = {
      {60, config_.history_minutes_s}, {3600, config_.history_hours_s}, {86400, config_.history_days_s}};
  for (const auto& [width, age] : history) {
    if (age <= 0) continue;
    cutoff = now - age * 1000;
    std::int64_t removed = 0;
    CP_TRY(store_.write([&](Tx& tx) -> Status {
      CP_ASSIGN(removed, tx.delete_cluster_samples_before(width, cutoff, static_cast<int>(std::min(kEventsPerTx, batch))));
      return {};
    }));
    pass.history += removed;
    if (removed >= std::min(kEventsPerTx, batch)) pass.more = true;
  }
  // The audit log, resolved alerts, measured use and idempotency keys: one
  // batch each.
  using Prune = Result<std::int64_t> (Tx::*)(Millis, int);
  const std::pair<std::int64_t, Prune> kept[] = {{config_.audit_retention_s, &Tx::delete_audit_before},
                                                 {config_.alert_history_s, &Tx::delete_alerts_resolved_before},
                                                 {config_.use_history_s, &Tx::delete_resource_use_before},
                                                 {config_.idempotency_retention_s, &Tx::delete_idempotency_before}};
  for (const auto& [age, prune] : kept) {
    if (age <= 0) continue;
    cutoff = now - age * 1000;
    std::int64_t removed = 0;
    CP_TRY(store_.write([&](Tx& tx) -> Status {
      CP_ASSIGN(removed, (tx.*prune)(cutoff, static_cast<int>(std::min(kEventsPerTx, batch))));
      return {};
    }));
    pass.history += removed;
    if (removed >= std::min(kEventsPerTx, batch)) pass.more = true;
  }

  if (config_.task_retention_s > 0) {
    cutoff = now - config_.task_retention_s * 1000;
    while (pass.tasks < batch) {
      std::vector<std::string> ids;
      CP_TRY(store_.read([&](Tx& tx) -> Status {
        CP_ASSIGN(ids, tx.finished_tasks_before(cutoff, static_cast<int>(std::min(kTasksPerTx, batch - pass.tasks))));
        return {};
      }));
      if (ids.empty()) break;
      // Objects first: a crash in between leaves a task without its logs
      // (which were going anyway), never objects that nothing points to.
      for (const auto& id : ids) {
        for (const std::string& prefix : {"logs/" + id + "/", "checkpoints/" + id + "/"}) {
          CP_TRY(remove_older_than(objects_, prefix, std::numeric_limits<std::int64_t>::max()));
        }
      }
      CP_TRY(store_.write([&](Tx& tx) -> Status {
        for (const auto& id : ids) CP_TRY(tx.delete_task(id));
        return {};
      }));
      pass.tasks += static_cast<std::int64_t>(ids.size());
    }
    note(pass.tasks, "finished task(s)", cutoff);
  }
  return pass;
}

Status ControlPlane::start_beacon(const std::string& server_id, const Clock& mono, bool run_rounds, bool shared,
                                  OffsetClock* store_clock) {
  CP_CHECK(store_clock == nullptr || store_clock == &clock_, "the store clock is the control plane's own");
  CP_CHECK(beacon_ == nullptr, "start_beacon runs once");
  CP_ASSIGN(auto timing, fence_timing(config_));
  if (timing.lost_after > config_.lost_after_s * 1000) {
    spdlog::warn("lost_after_s {} is under lease + beacon window + margin: a silent cluster is judged after {} ms",
                 config_.lost_after_s, timing.lost_after);
  }
  auto chain = std::make_unique<BeaconChain>(store_, objects_, clock_, mono, timing, server_id, shared);
  chain->align(store_clock);
  // Before the first term: a follower that takes over must know every
  // write since (its first cycle reads everything anyway).
  if (shared) store_.follow_other_writers([this](const ChangedRows& rows) { heard_other_writes(rows); });
  CP_TRY(chain->begin());
  if (chain->read_url().empty()) {
    spdlog::warn("the object store {} cannot hand agents a read URL for the beacon: agents fence after every "
                 "control-plane outage longer than lease_ttl_s less its margin",
                 objects_.url());
  }
  if (run_rounds) chain->start();
  beacon_ = std::move(chain);
  return {};
}

void ControlPlane::heard_other_writes(const ChangedRows& rows) {
  // Empty: the feed was cut and is back, anything may have changed.
  if (rows.empty() || !rows.tasks.empty() || !rows.attempts.empty()) wake_scheduler();
  for (const auto& c : rows.clusters) cluster_signal(c).notify();
  if (!rows.attempts.empty()) log_signal_.notify();
}

void ControlPlane::stop_background() {
  // A clean stop hands the term over at once (a follower need not wait).
  if (beacon_) beacon_->resign();
  {
    std::lock_guard lock(loop_mu_);
    loop_stop_ = true;
  }
  loop_cv_.notify_all();
  retention_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  if (retention_.joinable()) retention_.join();
  if (monitor_.joinable()) monitor_.join();
}

bool ControlPlane::store_healthy() {
  return store_.read([](Tx& tx) -> Status {
                 CP_ASSIGN(auto v, tx.get_meta("admin_token_created"));
                 (void)v;
                 return {};
               })
      .ok();
}

Result<MetricsSnapshot> ControlPlane::metrics() {
  MetricsSnapshot m;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(auto counts, tx.count_tasks());
    for (const auto& [rg, state, n] : counts) {
      m.tasks_by_state[boost::describe::enum_to_string(state, "?")] += n;
      if (state == TaskState::Queued) m.queued_by_group[rg] += n;
    }
    CP_ASSIGN(auto rgs, tx.list_resource_groups());
    CP_ASSIGN(auto used, internal::used_by_resource_group(tx));
    for (const auto& rg : rgs) {
      for (const auto& [res, q] : rg.quota) m.quota[{rg.name, res}] = {used[rg.name].get(res), q.guaranteed};
      m.queued_by_group.try_emplace(rg.name, 0);
    }
    CP_ASSIGN(auto clusters, tx.list_clusters());
    for (const auto& c : clusters) m.cluster_states[c.id] = boost::describe::enum_to_string(c.state, "?");
    CP_ASSIGN(auto alerts, tx.open_alerts());
    for (const auto& a : alerts) {
      if (a.state != AlertState::resolved) {
        m.alerts[{a.rule, a.severity, boost::describe::enum_to_string(a.state, "?")}] += 1;
      }
      for (const auto& d : a.deliveries) {
        if (d.state == "pending") ++m.alert_deliveries_pending;
        if (d.state == "failed") ++m.alert_deliveries_failed;
      }
    }
    return {};
  }));
  m.last_cycle = last_cycle();
  return m;
}

}  // namespace cp
