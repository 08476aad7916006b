#include "server/beacon.h"

#include <algorithm>

#include "common/json.h"
#include "common/log.h"
#include "server/control_plane.h"

namespace cp {
namespace {

constexpr const char* kLeaderMeta = "leader";
constexpr Millis kRoundTrips = 1000;      // two agent round trips, as DESIGN.md budgets them
constexpr Millis kUrlRefreshMs = 86'400'000;  // read URLs are made for 7 days, again after one

// The store's meta `leader` row: {term, server, seq, renewed_at}; server
// "" once its leader resigned.
struct LeaderRow {
  std::int64_t term = 0;
  std::int64_t seq = 0;
  std::string server;
};

LeaderRow parse_leader(const std::optional<std::string>& held) {
  LeaderRow row;
  if (!held) return row;
  auto v = parse_json(*held, 4);
  if (!v.ok() || !v->is_object()) return row;
  const auto& o = v->as_object();
  if (auto* t = o.if_contains("term"); t && t->is_int64()) row.term = t->as_int64();
  if (auto* q = o.if_contains("seq"); q && q->is_int64()) row.seq = q->as_int64();
  if (auto* srv = o.if_contains("server"); srv && srv->is_string()) row.server = std::string(srv->as_string());
  return row;
}

// The term the store's meta `leader` names; 0 when none (or unreadable).
Result<std::int64_t> stored_term(Tx& tx) {
  CP_ASSIGN(auto held, tx.get_meta(kLeaderMeta));
  return parse_leader(held).term;
}

}  // namespace

Result<FenceTiming> fence_timing(const ServerConfig& config) {
  FenceTiming t;
  t.lease = config.lease_ttl_s * 1000;
  t.margin = std::min<Millis>(5000, t.lease / 6);
  t.period = config.beacon_period_ms > 0 ? config.beacon_period_ms : std::clamp<Millis>(t.lease / 15, 200, 2000);
  t.deadline = config.beacon_deadline_ms > 0 ? config.beacon_deadline_ms : std::clamp<Millis>(t.lease / 10, 300, 3000);
  t.window = t.period + t.deadline;
  t.poll = std::max<Millis>(100, t.period / 2);
  t.lost_after = std::max<Millis>(config.lost_after_s * 1000, t.lease + t.window + t.margin);
  const Millis need = t.window + t.poll + config.sync_interval_ms + kRoundTrips;
  if (t.lease - t.margin < need) {
    const std::string figures = "lease_ttl_s " + std::to_string(config.lease_ttl_s) + " less its margin " +
                                std::to_string(t.margin) + " ms is under " + std::to_string(need) +
                                " ms (beacon period + deadline + poll + sync interval + 2 round trips)";
    return errors::invalid("spec.lease_ttl_s",
                           figures + ": agents would fence during any control-plane outage; raise lease_ttl_s or "
                                     "lower beacon_period_ms / beacon_deadline_ms",
                           figures + "：控制面任何中断都会让 agent 自行隔离任务；请调大 lease_ttl_s 或调小 "
                                     "beacon_period_ms / beacon_deadline_ms");
  }
  return t;
}

BeaconChain::BeaconChain(Store& store, ObjectStore& objects, const Clock& clock, const Clock& mono, FenceTiming timing,
                         std::string server_id, bool shared)
    : store_(store),
      objects_(objects),
      clock_(clock),
      mono_(mono),
      timing_(timing),
      server_id_(std::move(server_id)),
      shared_(shared) {}

BeaconChain::~BeaconChain() { stop(); }

Status BeaconChain::sample_store_clock(Tx& tx) {
  if (aligned_ == nullptr) return {};
  const Millis before = aligned_->base().now_ms();
  auto store_now = tx.store_time_ms();
  // A store without a clock of its own: this process's is the store's. (On
  // PostgreSQL a failed statement fails the transaction's next one anyway.)
  if (store_now.ok()) aligned_->sample(*store_now, before, aligned_->base().now_ms());
  return {};
}

Status BeaconChain::renew_term(std::int64_t term, std::int64_t seq, Take take, const std::string& seen) {
  std::int64_t taken = 0;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_TRY(sample_store_clock(tx));
    CP_ASSIGN(auto held, tx.get_meta(kLeaderMeta));
    const std::int64_t stored = parse_leader(held).term;
    if (take == Take::if_unchanged && held.value_or("") != seen) {
      return errors::conflict("the leader row changed", "领导者记录已变化");
    }
    std::int64_t writing = term, writing_seq = seq;
    if (take != Take::renew) {
      writing = taken = stored + 1;
      writing_seq = 0;
    } else if (stored != term) {
      deposed_ = true;
      return errors::conflict("term " + std::to_string(term) + " was superseded by term " + std::to_string(stored),
                              "任期 " + std::to_string(term) + " 已被任期 " + std::to_string(stored) + " 取代");
    }
    json::object o;
    o["term"] = writing;
    o["server"] = server_id_;
    o["seq"] = writing_seq;
    o["renewed_at"] = clock_.now_ms();
    return tx.set_meta(kLeaderMeta, dump(o));
  }));
  if (take != Take::renew) {
    // Committed: the term is ours (state set only now, never for a
    // transaction that rolled back).
    std::lock_guard lock(mu_);
    term_ = taken;
    seq_ = 0;
    alive_ = false;
    leading_since_ = clock_.now_ms();
    deposed_ = false;
    term_held_ = true;
  }
  return {};
}

Status BeaconChain::begin() {
  if (shared_) {
    // Followers write no beacon; that the witness takes writes is checked
    // with a mark of this server's own.
    json::object o;
    o["server"] = server_id_;
    o["started_at"] = clock_.now_ms();
    if (auto put = objects_.put("control-plane/servers/" + server_id_, dump(o)); !put.ok()) {
      return errors::unavailable("the object store " + objects_.url() + " refuses writes: " + put.error().message,
                                 "对象存储 " + objects_.url() + " 拒绝写入：" + put.error().message);
    }
    // A follower writes nothing for a while, but must be able to lead:
    // a store that takes no writes (read-only, a standby) refuses the start.
    if (auto wrote = store_.write([&](Tx& tx) { return tx.set_meta("servers/last_start", dump(o)); });
        !wrote.ok()) {
      return errors::unavailable("the metadata store refuses writes: " + wrote.error().message,
                                 "元数据存储拒绝写入：" + wrote.error().message);
    }
    if (follow()) return {};
    spdlog::info("control plane: following; the store names {} as leader (term {})", latest_leader(), leader_mark_.term);
    return {};
  }
  CP_TRY(renew_term(0, 0, Take::next));
  if (!round()) {
    std::lock_guard lock(mu_);
    return errors::unavailable("the control plane cannot keep its beacon: " + broken_why_,
                               "控制面无法维持信标：" + broken_why_);
  }
  spdlog::info("control plane: term {}, beacon {} every {} ms (deadline {} ms)", latest().term, objects_.url(),
               timing_.period, timing_.deadline);
  return {};
}

bool BeaconChain::follow() {
  if (leading()) return false;
  std::optional<std::string> held;
  if (!store_.read([&](Tx& tx) -> Status {
         CP_TRY(sample_store_clock(tx));
         CP_ASSIGN(held, tx.get_meta(kLeaderMeta));
         return {};
       }).ok()) {
    // Time it could not look does not count as the leader's silence: the
    // store was away for everyone (the leader could not renew either).
    std::lock_guard lock(mu_);
    seen_row_.clear();
    return false;
  }
  const std::string row = held.value_or("");
  const LeaderRow leader = parse_leader(held);
  const Millis now = mono_.now_ms();
  {
    std::lock_guard lock(mu_);
    leader_mark_ = {leader.term, leader.seq};
    leader_ = leader.server;
    const bool vacant = leader.server.empty();
    if (row != seen_row_) {
      seen_row_ = row;
      seen_since_ = now;
      if (!vacant) return false;
    } else if (!vacant && now - seen_since_ < takeover_ms()) {
      return false;
    }
  }
  if (!renew_term(0, 0, Take::if_unchanged, row).ok()) return false;
  spdlog::info("control plane: this server leads now (term {}; {} led before{})", latest().term,
               leader.server.empty() ? std::string("nobody") : leader.server,
               leader.server.empty() ? "" : ", silent for " + std::to_string(now - seen_since_) + " ms");
  return round();  // the term stays ours even if this round breaks: the next may hold
}

void BeaconChain::resign() {
  stop();
  std::int64_t term = 0;
  {
    std::lock_guard lock(mu_);
    term = term_;
  }
  if (!leading()) return;
  deposed_ = true;  // no more rounds, no more judging, whatever the store says
  auto st = store_.write([&](Tx& tx) -> Status {
    CP_ASSIGN(const std::int64_t stored, stored_term(tx));
    if (stored != term) return {};
    json::object o;
    o["term"] = term;
    o["server"] = "";
    o["resigned_by"] = server_id_;
    return tx.set_meta(kLeaderMeta, dump(o));
  });
  if (st.ok()) {
    spdlog::info("control plane: resigned term {}", term);
  } else {
    spdlog::warn("control plane: could not resign term {} ({}); another server takes over after {} ms", term,
                 st.error().message, takeover_ms());
  }
}

Status BeaconChain::check_leader(Tx& tx) const {
  std::int64_t term = 0;
  {
    std::lock_guard lock(mu_);
    term = term_;
  }
  if (!leading()) return errors::conflict("this server does not lead", "本服务器不是领导者");
  CP_ASSIGN(const std::int64_t stored, stored_term(tx));
  if (stored != term) {
    return errors::conflict("term " + std::to_string(term) + " is no longer the store's (" + std::to_string(stored) +
                                ")",
                            "任期 " + std::to_string(term) + " 已不是存储中的任期（" + std::to_string(stored) + "）");
  }
  return {};
}

BeaconMark BeaconChain::named_mark() const {
  std::lock_guard lock(mu_);
  if (term_held_ && !deposed_) return {term_, seq_};
  return leader_mark_;
}

std::string BeaconChain::latest_leader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

bool BeaconChain::round() {
  if (deposed_) return false;
  const Millis start = mono_.now_ms();
  std::int64_t term = 0, seq = 0;
  {
    std::lock_guard lock(mu_);
    term = term_;
    seq = seq_ + 1;
  }
  std::string why;
  bool put_tried = false;
  if (auto st = renew_term(term, seq, Take::renew); !st.ok()) {
    why = "renewing the term in the store failed: " + st.error().message;
  } else {
    put_tried = true;
    if (auto put = objects_.put(kBeaconKey, encode_beacon({term, seq}, server_id_)); !put.ok()) {
      why = "writing the beacon failed: " + put.error().message;
    }
  }
  const Millis end = mono_.now_ms();
  if (why.empty() && end - start > timing_.deadline) {
    why = "the round took " + std::to_string(end - start) + " ms, over its deadline of " +
          std::to_string(timing_.deadline) + " ms";
  }
  std::lock_guard lock(mu_);
  // A seq is never written twice: a put that failed or ran late may still
  // land, and an agent that read it must see the next chain's seq move.
  if (put_tried) seq_ = std::max(seq_, seq);
  if (!why.empty()) {
    break_locked(why);
    return false;
  }
  // A gap since the last good round's start over F (this process stalled,
  // or a round failed) ends the old chain; this round begins a new one.
  if (!alive_ || end - last_start_ > timing_.window) {
    judging_since_ = clock_.now_ms();
    if (!broken_why_.empty() || alive_) spdlog::info("control plane: judging liveness again (term {}, seq {})", term, seq);
    broken_why_.clear();
  }
  alive_ = true;
  last_start_ = start;
  return true;
}

void BeaconChain::start() {
  std::lock_guard lock(loop_mu_);
  if (loop_.joinable()) return;
  stop_ = false;
  loop_ = std::thread([this] {
    std::unique_lock lk(loop_mu_);
    while (!stop_) {
      const Millis started = mono_.now_ms();
      const bool led = leading();
      lk.unlock();
      if (led) {
        round();
        if (deposed_) spdlog::warn("control plane: a newer term took over; this server follows now");
      } else if (shared_) {
        follow();
      }
      lk.lock();
      const Millis next = started + (led || !shared_ ? timing_.period : follow_poll());
      const Millis wait = std::max<Millis>(0, next - mono_.now_ms());
      loop_cv_.wait_for(lk, std::chrono::milliseconds(wait), [this] { return stop_; });
    }
  });
}

void BeaconChain::stop() {
  {
    std::lock_guard lock(loop_mu_);
    stop_ = true;
  }
  loop_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
}

bool BeaconChain::holds_locked(Millis mono_now) const {
  return alive_ && !deposed_ && mono_now - last_start_ <= timing_.window;
}

Millis BeaconChain::judging_since() const {
  std::lock_guard lock(mu_);
  return holds_locked(mono_.now_ms()) ? judging_since_ : 0;
}

Status BeaconChain::check_term(Tx& tx) const {
  std::int64_t term = 0;
  {
    std::lock_guard lock(mu_);
    term = term_;
    if (!holds_locked(mono_.now_ms())) {
      return errors::unavailable("the beacon chain broke: not judging liveness", "信标链已中断：暂不判定存活");
    }
  }
  CP_ASSIGN(const std::int64_t stored, stored_term(tx));
  if (stored != term) {
    return errors::conflict("term " + std::to_string(term) + " is no longer the store's (" + std::to_string(stored) +
                                "): not judging liveness",
                            "任期 " + std::to_string(term) + " 已不是存储中的任期（" + std::to_string(stored) +
                                "）：不再判定存活");
  }
  return {};
}

void BeaconChain::break_chain(const std::string& why) {
  std::lock_guard lock(mu_);
  break_locked(why);
}

void BeaconChain::break_locked(const std::string& why) {
  if (alive_ || broken_why_ != why) spdlog::error("control plane: not judging liveness: {}", why);
  alive_ = false;
  judging_since_ = 0;
  broken_why_ = why;
}

BeaconStatus BeaconChain::status() const {
  std::lock_guard lock(mu_);
  BeaconStatus s;
  s.server_id = server_id_;
  s.term = term_;
  s.seq = seq_;
  s.leading_since = leading_since_;
  s.deposed = deposed_;
  s.witness = objects_.url();
  s.leading = term_held_ && !deposed_;
  s.leader = s.leading ? server_id_ : leader_;
  s.leader_term = s.leading ? term_ : leader_mark_.term;
  if (holds_locked(mono_.now_ms())) {
    s.judging_since = judging_since_;
  } else if (shared_ && !s.leading) {
    s.not_judging = "a follower: the leader judges";
  } else if (deposed_) {
    s.not_judging = "a newer term took over";
  } else if (!broken_why_.empty()) {
    s.not_judging = broken_why_;
  } else {
    s.not_judging = "no beacon round within the last " + std::to_string(timing_.window) + " ms";
  }
  return s;
}

BeaconMark BeaconChain::latest() const {
  std::lock_guard lock(mu_);
  return {term_, seq_};
}

std::string BeaconChain::read_url() {
  const Millis now = mono_.now_ms();
  {
    std::lock_guard lock(mu_);
    if (!url_.empty() && now - url_made_ < kUrlRefreshMs) return url_;
  }
  auto u = objects_.read_url(kBeaconKey, kMaxReadUrlTtlS);
  std::lock_guard lock(mu_);
  if (!u.ok()) {
    if (!url_.empty()) return url_;  // the one made before holds for days more
    return "";
  }
  url_ = std::move(u).value();
  url_made_ = now;
  return url_;
}

}  // namespace cp
