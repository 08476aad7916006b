// The leader's chain and its beacon (DESIGN.md "Fencing and outages").
//
// While the control plane judges liveness, it proves it to the agents
// through a witness they can read without it: every G it renews its term in
// the metadata store and writes {term, seq+1} to the beacon object in the
// object store, the whole round within p. A round that fails or runs late
// breaks the chain: the server stops judging at once, and a new chain (a new
// J) begins with the next good round. An agent whose syncs fail reads the
// beacon: a seq that stands still for F = G + p means nobody is judging, so
// nobody can be counting its silence, and it keeps its tasks running.
//
//   round k:  start s_k ── renew term (store) ── put {term, seq} (witness) ── end e_k
//   holds at t  <=>  every round since J ended within F of the previous
//                    one's start, and t - s_last <= F
//
// So between J and any moment the chain holds, every window of length F
// saw the seq move. J is on `clock` (the server's, which also dates
// last_contact); deadlines are on `mono` (this process's, never across
// machines).
//
// Several servers on one store (PostgreSQL): the chain is also the
// leadership. The store's meta `leader` row names the term, its server and
// the seq of its round; the leader rewrites it every round. A server that
// does not lead follows that row: when it stood still for takeover_ms on
// this server's own clock (no timestamp read from another machine), or
// names nobody (its leader resigned), the follower takes the next term in a
// transaction that finds the row as it last saw it. Write transactions are
// SERIALIZABLE, so a leader-only write that read the old term and the
// takeover cannot both commit out of order: a deposed leader's late plan
// fails its term check (check_leader) and changes nothing.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>

#include "common/clock.h"
#include "common/result.h"
#include "model/beacon_mark.h"
#include "model/types.h"
#include "objstore/object_store.h"
#include "store/store.h"

namespace cp {

struct ServerConfig;

// The figures of DESIGN.md, derived from the server's configuration.
struct FenceTiming {
  Millis lease = 0;       // L
  Millis margin = 0;      // m: an agent's default (min(5 s, L/6)); kill time, stalls, drift
  Millis period = 0;      // G
  Millis deadline = 0;    // p
  Millis window = 0;      // F = G + p
  Millis poll = 0;        // how often a cut-off agent reads the beacon
  Millis lost_after = 0;  // D = max(lost_after_s, L + F + m)
};
// Refused when L - m < F + poll + sync period + 2 round trips (1 s): an
// agent would fence before a stale verdict could ever renew its lease.
Result<FenceTiming> fence_timing(const ServerConfig& config);


// What GET /api/v1/control-plane and /metrics say of a server's chain.
struct BeaconStatus {
  std::string server_id;
  std::int64_t term = 0, seq = 0;
  Millis leading_since = 0;  // clock: when this term was taken
  Millis judging_since = 0;  // J; 0 while the chain does not hold
  std::string not_judging;   // why, while it does not
  bool deposed = false;
  std::string witness;  // the object store's URL
  bool leading = false;
  std::string leader;  // the server the store names as leader ("" = none)
  std::int64_t leader_term = 0;
};

class BeaconChain {
 public:
  // `shared`: other servers may share the store (PostgreSQL), so this one
  // leads only once it won a term (follow()); else begin() takes the next
  // term at once (SQLite: one server per store, store/server_lock.h).
  BeaconChain(Store& store, ObjectStore& objects, const Clock& clock, const Clock& mono, FenceTiming timing,
              std::string server_id, bool shared = false);
  ~BeaconChain();
  BeaconChain(const BeaconChain&) = delete;
  BeaconChain& operator=(const BeaconChain&) = delete;

  // Takes the next term (store meta "leader") and makes the first round;
  // shared: writes this server's mark to the witness, then follows once
  // (leading at once if nobody leads). An error when the store or the
  // witness cannot be written: the server must not start (main.cpp).
  Status begin();
  // One round; false when it broke the chain.
  bool round();
  // One look at the leader row by a server that does not lead; true when
  // it took the term (and made its first round).
  bool follow();
  // begin() done, then a round every G while leading, a follow() every
  // follow_poll() while not, until stop().
  void start();
  void stop();
  // On a clean stop: the row says that nobody leads, so that a follower
  // takes over at once instead of after takeover_ms. This chain leads no
  // more.
  void resign();

  // Whether this server holds the store's term (as of its last round).
  bool leading() const { return term_held_.load() && !deposed_.load(); }
  // Inside a leader-only write transaction (a scheduling cycle's apply):
  // the store still names this server's term. Else an error, and the
  // transaction rolls back.
  Status check_leader(Tx& tx) const;
  Millis takeover_ms() const { return std::max<Millis>(1000, 2 * timing_.period); }
  Millis follow_poll() const { return std::max<Millis>(100, timing_.period / 4); }
  // The mark a sync answer names: this chain's latest while it leads, else
  // the leader's as its row last said.
  BeaconMark named_mark() const;
  // The server the leader row named at the last follow() ("" = nobody).
  std::string latest_leader() const;
  // Several servers: `clock` (the one this chain dates J with, and the
  // control plane dates contacts with) follows the store's clock, sampled
  // in every round's and every follow()'s transaction. Before begin().
  void align(OffsetClock* clock) { aligned_ = clock; }
  // J while the chain holds now; 0 when it does not (never counts silence).
  Millis judging_since() const;
  // Inside a transaction that declares clusters silent: the store still
  // names this term, and the chain still holds. Else an error, and the
  // transaction rolls back.
  Status check_term(Tx& tx) const;
  // Breaks the chain from outside (a liveness write failed: the server
  // could not record, so it could not hear).
  void break_chain(const std::string& why);

  // The latest mark written (term 0 before begin()).
  BeaconMark latest() const;
  // For GET /api/v1/control-plane and /metrics.
  BeaconStatus status() const;
  // The URL agents read the beacon at (ObjectStore::read_url), made again
  // when a day old; "" when the store cannot make one.
  std::string read_url();
  const FenceTiming& timing() const { return timing_; }
  bool deposed() const { return deposed_.load(); }

 private:
  enum class Take { renew, next, if_unchanged };
  // In one transaction: renew `term` (must still be the store's), or take
  // the next one (if_unchanged: only if the row is still `seen`).
  Status renew_term(std::int64_t term, std::int64_t seq, Take take, const std::string& seen = {});
  bool holds_locked(Millis mono_now) const;
  void break_locked(const std::string& why);  // under mu_: stop judging, say why once

  Store& store_;
  ObjectStore& objects_;
  const Clock& clock_;
  const Clock& mono_;
  const FenceTiming timing_;
  const std::string server_id_;
  const bool shared_;
  OffsetClock* aligned_ = nullptr;
  // In a transaction of the chain's: the store's time against this process's.
  Status sample_store_clock(Tx& tx);

  mutable std::mutex mu_;
  std::atomic<bool> term_held_{false};
  // follow(): the leader row as last read, and since when (mono) it reads so.
  std::string seen_row_;
  Millis seen_since_ = 0;
  BeaconMark leader_mark_;
  std::string leader_;
  std::int64_t term_ = 0;
  std::int64_t seq_ = 0;
  bool alive_ = false;        // the chain holds as of the last round
  Millis last_start_ = 0;     // mono: start of the last good round
  Millis judging_since_ = 0;  // clock: J
  Millis leading_since_ = 0;  // clock: when the term was taken
  std::string url_;
  Millis url_made_ = 0;  // mono
  std::atomic<bool> deposed_{false};
  std::string broken_why_;

  std::mutex loop_mu_;
  std::condition_variable loop_cv_;
  bool stop_ = false;
  std::thread loop_;
};

}  // namespace cp
