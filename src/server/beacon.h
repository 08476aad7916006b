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
#pragma once

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
};

class BeaconChain {
 public:
  BeaconChain(Store& store, ObjectStore& objects, const Clock& clock, const Clock& mono, FenceTiming timing,
              std::string server_id);
  ~BeaconChain();
  BeaconChain(const BeaconChain&) = delete;
  BeaconChain& operator=(const BeaconChain&) = delete;

  // Takes the next term (store meta "leader") and makes the first round.
  // An error when the store or the witness cannot be written: the server
  // must not start judging then (main.cpp refuses to start).
  Status begin();
  // One round; false when it broke the chain.
  bool round();
  // begin() done, then a round every G until stop().
  void start();
  void stop();

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
  Status renew_term(std::int64_t term, bool take);
  bool holds_locked(Millis mono_now) const;
  void break_locked(const std::string& why);  // under mu_: stop judging, say why once

  Store& store_;
  ObjectStore& objects_;
  const Clock& clock_;
  const Clock& mono_;
  const FenceTiming timing_;
  const std::string server_id_;

  mutable std::mutex mu_;
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
