#include "agent/executors/local_executor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "agent/executors/file_logs.h"
#include "agent/executors/host_probe.h"
#include "agent/executors/supervised_process.h"
#include "agent/files.h"
#include "common/log.h"

namespace cp {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kLostAfterRestart = "lost: agent restarted and the process is gone";
constexpr std::string_view kLostShim = "lost: the supervisor process is gone";
constexpr std::string_view kFencedByShim =
    "lost: stopped by its supervisor when the agent's lease ran out (the agent was dead, hung or cut off from the "
    "control plane)";
constexpr std::string_view kFencedOnAdoption =
    "lost: the agent's lease ran out before this agent took over (the server may run it elsewhere): stopped, "
    "not adopted";

// Ids from the server become directory names: keep them to a safe alphabet.
bool safe_name(const std::string& s) {
  if (s.empty() || s.size() > 200 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return std::isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

bool valid_env_name(const std::string& s) {
  return !s.empty() && s.find('=') == std::string::npos && s.find('\0') == std::string::npos;
}

bool is_failure(const std::string& outcome) { return !outcome.empty() && outcome != "exit 0"; }

std::string stop_message(const std::string& reason, bool killed) {
  std::string m;
  if (reason == kStopCancel) {
    m = "cancelled";
  } else if (reason == kStopPreempt) {
    m = "preempted";
  } else if (reason == kStopSuperseded) {
    m = "superseded by a newer attempt";
  } else if (reason == kStopLost) {
    m = "lost: stopped by the agent after losing contact with the server";
  } else {
    m = "stopped: " + reason;
  }
  if (killed) m += "; grace expired, killed";
  return m;
}

}  // namespace

LocalExecutor::LocalExecutor(LocalExecutorConfig config, const Clock& clock)
    : config_(std::move(config)), clock_(clock) {
  std::error_code ec;
  fs::path abs = fs::absolute(config_.data_dir.empty() ? fs::path(".") : fs::path(config_.data_dir), ec);
  if (!ec) config_.data_dir = abs.lexically_normal().string();
  while (config_.data_dir.size() > 1 && config_.data_dir.back() == '/') config_.data_dir.pop_back();
  if (config_.log_chunk_bytes == 0) config_.log_chunk_bytes = 256 * 1024;
  for (const char* sub : {"attempts", "checkpoints"}) {
    auto st = agent_files::make_dirs(config_.data_dir + "/" + sub);
    if (!st.ok()) engine_problem_ = st.error().message;
  }
  facts_ = probe_host_facts();
  load_journals();
}

LocalExecutor::~LocalExecutor() {
  for (const auto& [key, fd] : exit_fds_) ::close(fd);
  // The next executor on this data dir adopts what runs: journal the pgids
  // that shims released a moment ago are about to report (a short wait).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
  for (auto& [id, a] : attempts_) {
    bool changed = false;
    for (std::size_t i = 0; i < a.rec.replicas.size(); ++i) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      changed = take_pgid(a, i, static_cast<int>(std::max<std::int64_t>(0, left.count()))) || changed;
    }
    if (changed) (void)save(a);
    drop_reports(a);
  }
}

void LocalExecutor::watch_exit(const std::string& attempt_id, std::size_t replica, int shim_pid) {
  if (shim_pid <= 0 || exit_fds_.count({attempt_id, replica})) return;
  // No pidfd (a kernel before 5.3, out of descriptors): the agent's
  // periodic check still sees the exit, only later.
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, shim_pid, 0));
  if (fd >= 0) exit_fds_.emplace(std::make_pair(attempt_id, replica), fd);
}

std::vector<int> LocalExecutor::exit_fds() {
  std::lock_guard lock(mu_);
  std::vector<int> out;
  for (auto it = exit_fds_.begin(); it != exit_fds_.end();) {
    auto a = attempts_.find(it->first.first);
    const bool running = a != attempts_.end() && it->first.second < a->second.rec.replicas.size() &&
                         a->second.rec.replicas[it->first.second].outcome.empty();
    if (!running) {
      ::close(it->second);
      it = exit_fds_.erase(it);
      continue;
    }
    out.push_back(it->second);
    ++it;
  }
  return out;
}

std::string LocalExecutor::attempt_dir(const std::string& attempt_id) const {
  return config_.data_dir + "/attempts/" + attempt_id;
}
std::string LocalExecutor::log_path(const std::string& attempt_id, int replica) const {
  return attempt_dir(attempt_id) + "/r" + std::to_string(replica) + ".log";
}
std::string LocalExecutor::exit_path(const std::string& attempt_id, int replica) const {
  return attempt_dir(attempt_id) + "/r" + std::to_string(replica) + ".exit";
}

void LocalExecutor::load_journals() {
  std::error_code ec;
  fs::directory_iterator it(config_.data_dir + "/attempts", ec);
  if (ec) return;
  for (const auto& entry : it) {
    if (!entry.is_directory(ec)) continue;
    std::string id = entry.path().filename().string();
    const std::string path = entry.path().string() + "/journal.json";
    if (!fs::exists(path, ec)) continue;  // a start that died before its first journal write: nothing ran
    auto rec = read_journal(path);
    if (!rec.ok() || rec->order.attempt_id != id) {
      spdlog::warn("local executor: ignoring unreadable journal of {}: {}", id,
                   rec.ok() ? std::string("attempt id mismatch") : rec.error().message);
      continue;
    }
    for (const auto& r : rec->replicas) finish_counter_ = std::max(finish_counter_, r.finished_seq);
    Live live{std::move(rec).value(), true};
    for (std::size_t i = 0; i < live.rec.replicas.size(); ++i) {
      const auto& r = live.rec.replicas[i];
      if (r.outcome.empty() && supervised_alive(r.shim_pid, r.shim_start_ticks)) watch_exit(id, i, r.shim_pid);
    }
    attempts_.emplace(id, std::move(live));
    spdlog::info("local executor: adopted attempt {} from its journal", id);
  }
  std::vector<std::string> ids;
  for (const auto& [id, a] : attempts_) ids.push_back(id);
  for (const auto& id : ids) maybe_remove(id);
}

Result<LocalExecutor::AttemptRecord> LocalExecutor::read_journal(const std::string& path) {
  auto records = agent_files::read_records(path);
  if (records.empty()) return errors::internal("the journal " + path + " is empty or unreadable");
  Error last = errors::internal("no readable record in " + path);
  for (const auto& text : records) {  // latest first; a torn one (the agent died writing it) is skipped
    auto rec = decode_json<AttemptRecord>(text);
    if (rec.ok()) return rec;
    last = rec.error();
  }
  return last;
}

Status LocalExecutor::save(const Live& a) {
  const auto& id = a.rec.order.attempt_id;
  // Without fsync: the journal describes processes of this machine, and a
  // crash of the machine takes them along (after it every replica is Lost,
  // journaled or not), while the agent's own crash keeps the page cache. A
  // start writes the journal three times; fsyncs made each start several
  // times slower. Appended (agent_files::append_record), so that only the
  // first write creates a file.
  auto st = agent_files::append_record(attempt_dir(id) + "/journal.json", dump(to_json(a.rec)));
  if (!st.ok()) spdlog::error("local executor: journal of {}: {}", id, st.error().message);
  return st;
}

std::vector<std::string> LocalExecutor::build_env(const StartOrder& order, const ReplicaPlacement& placement) const {
  std::map<std::string, std::string> env;
  for (const char* name : {"PATH", "HOME"}) {
    if (const char* v = std::getenv(name)) env[name] = v;
  }
  for (const auto& [k, v] : order.env) env[k] = v;
  // The platform's variables win over the order's: CUDA_VISIBLE_DEVICES is what keeps replicas apart.
  std::string gpus;
  for (int g : placement.gpu_indices) {
    if (!gpus.empty()) gpus += ',';
    gpus += std::to_string(g);
  }
  env["CUDA_VISIBLE_DEVICES"] = gpus;
  env["CUBEPLANE_TASK_ID"] = order.task_id;
  env["CUBEPLANE_ATTEMPT"] = std::to_string(order.attempt_number);
  env["CUBEPLANE_ATTEMPT_ID"] = order.attempt_id;
  env["CUBEPLANE_REPLICA"] = std::to_string(placement.replica);
  env["CUBEPLANE_REPLICAS"] = std::to_string(std::max<std::size_t>(1, order.placements.size()));
  env["CUBEPLANE_NODE"] = placement.node;
  env["CUBEPLANE_CHECKPOINT_DIR"] = config_.data_dir + "/checkpoints/" + order.task_id;
  if (order.attempt_number > 1) {
    env["CUBEPLANE_RESUME"] = "1";
    env["CUBEPLANE_RESTART_COUNT"] = std::to_string(order.attempt_number - 1);
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

Status LocalExecutor::start(const StartOrder& order) { return start_all({order}).front(); }

// The orders of one sync start side by side: every shim is forked and
// journaled first, then all gates open at once and the shims fork their
// commands in parallel, and only then are the pgids collected. One start
// after another (fork, journal, release, wait for the pgid) made a batch of
// 8 short tasks take ~35 ms on two cores (docs/benchmarks.md, "Short tasks").
// Each attempt keeps the journal order of supervised_process.h: journal,
// fork shims, journal their pids, release, journal the pgids.
std::vector<Status> LocalExecutor::start_all(const std::vector<StartOrder>& orders) {
  std::lock_guard lock(mu_);
  std::vector<Status> out;
  out.reserve(orders.size());
  std::vector<std::pair<Live*, std::vector<std::optional<SpawnedProcess>>>> spawned;
  for (const auto& order : orders) {
    auto live = record_start(order);
    if (!live.ok()) {
      out.push_back(live.error());
      continue;
    }
    out.push_back(ok_status());
    if (*live == nullptr) continue;  // known already: idempotent
    Live& a = **live;
    const bool runnable = std::all_of(a.rec.replicas.begin(), a.rec.replicas.end(),
                                      [](const ReplicaRecord& r) { return r.outcome.empty(); });
    if (!runnable) {
      refresh(a);
      continue;
    }
    spawned.emplace_back(&a, spawn_shims(a));
  }
  for (auto& [a, gated] : spawned) {
    for (std::size_t i = 0; i < gated.size(); ++i) {
      if (!gated[i]) continue;
      open_supervised_gate(*gated[i]);
      a->reports.emplace(i, std::move(*gated[i]));
    }
  }
  // The pgids are taken as the shims report them (take_pgid, which
  // refresh() calls and journals): now if already there, else in a later
  // poll, or at once by a stop. Waiting here held the sync's whole batch
  // back until the last shim had forked its command.
  for (auto& [a, gated] : spawned) {
    spdlog::info("local executor: started attempt {} ({} replica(s))", a->rec.order.attempt_id,
                 a->rec.replicas.size());
    refresh(*a);
  }
  return out;
}

bool LocalExecutor::take_pgid(Live& a, std::size_t replica, int timeout_ms) {
  auto it = a.reports.find(replica);
  if (it == a.reports.end()) return false;
  if (!await_supervised_pgid(it->second, timeout_ms)) return false;
  auto& r = a.rec.replicas[replica];
  const int pgid = it->second.pgid;
  a.reports.erase(it);
  if (pgid == 0 || r.pgid == pgid) return false;
  r.pgid = pgid;
  return true;
}

void LocalExecutor::drop_reports(Live& a) {
  for (auto& [replica, p] : a.reports) {
    if (p.report_fd >= 0) ::close(p.report_fd);
  }
  a.reports.clear();
}

Result<LocalExecutor::Live*> LocalExecutor::record_start(const StartOrder& order) {
  if (!safe_name(order.attempt_id)) {
    return errors::invalid("attempt_id", "attempt id \"" + order.attempt_id + "\" is not usable as a directory name",
                           "attempt id \"" + order.attempt_id + "\" 不能用作目录名");
  }
  if (!safe_name(order.task_id)) {
    return errors::invalid("task_id", "task id \"" + order.task_id + "\" is not usable as a directory name",
                           "task id \"" + order.task_id + "\" 不能用作目录名");
  }
  if (attempts_.count(order.attempt_id) || forgotten_.count(order.attempt_id)) return nullptr;  // idempotent

  Live a;
  a.rec.order = order;
  a.rec.started_at = clock_.now_ms();
  a.rec.lease_chain = lease_chain_;
  std::vector<ReplicaPlacement> placements = order.placements;
  if (placements.empty()) placements.push_back(ReplicaPlacement{});
  for (const auto& p : placements) {
    ReplicaRecord r;
    r.replica = p.replica;
    r.node = p.node;
    a.rec.replicas.push_back(r);
  }
  const std::string dir = attempt_dir(order.attempt_id);
  CP_TRY(agent_files::make_dirs(dir));  // its work and checkpoint directories are the shims' to make

  // Problems of the order itself end the attempt as Failed, reported like any other end.
  std::string problem;
  std::set<int> seen;
  for (const auto& p : placements) {
    if (p.replica < 0 || !seen.insert(p.replica).second) problem = "invalid replica numbers in the placements";
  }
  if (order.command.empty() || order.command[0].empty()) problem = "empty command";
  for (const auto& [k, v] : order.env) {
    if (!valid_env_name(k)) problem = "invalid environment variable name \"" + k + "\"";
  }
  if (!problem.empty()) {
    for (auto& r : a.rec.replicas) {
      r.outcome = "error: " + problem;
      r.finished_seq = ++finish_counter_;
    }
  }
  // A runnable attempt is journaled once its shims are forked and still
  // gated (spawn_shims): should the agent die before that, nothing ran and
  // nothing is journaled, and the start order the server resends starts it
  // afresh. One that fails at once is journaled here, to be reported.
  if (!problem.empty()) CP_TRY(save(a));
  auto [it, inserted] = attempts_.emplace(order.attempt_id, std::move(a));
  return &it->second;
}

std::vector<std::optional<SpawnedProcess>> LocalExecutor::spawn_shims(Live& a) {
  const auto& order = a.rec.order;
  std::vector<ReplicaPlacement> placements = order.placements;
  if (placements.empty()) placements.push_back(ReplicaPlacement{});
  std::vector<std::optional<SpawnedProcess>> gated(a.rec.replicas.size());
  for (std::size_t i = 0; i < a.rec.replicas.size(); ++i) {
    auto& r = a.rec.replicas[i];
    SpawnSpec spec;
    spec.argv = order.command;
    spec.env = build_env(order, placements[i]);
    spec.work_dir = attempt_dir(order.attempt_id) + "/work";
    spec.log_path = log_path(order.attempt_id, r.replica);
    spec.exit_path = exit_path(order.attempt_id, r.replica);
    spec.shim_program = config_.shim_program;
    spec.dirs = {spec.work_dir, config_.data_dir + "/checkpoints/" + order.task_id};
    spec.lease_path = lease_path_;
    spec.lease_chain = a.rec.lease_chain;
    auto spawned = spawn_supervised(spec);
    if (!spawned.ok()) {
      r.outcome = "error: " + spawned.error().message;
      r.finished_seq = ++finish_counter_;
      continue;
    }
    r.shim_pid = spawned->shim_pid;
    r.shim_start_ticks = spawned->shim_start_ticks;
    watch_exit(order.attempt_id, i, r.shim_pid);
    gated[i] = std::move(spawned).value();
  }
  // Journal the shims before any command may run (supervised_process.h).
  // Without a journal nothing may run: the gates close unopened, the shims
  // exit, and the attempt fails with the reason.
  auto journaled = save(a);
  if (!journaled.ok()) {
    for (std::size_t i = 0; i < gated.size(); ++i) {
      if (!gated[i]) continue;
      ::close(gated[i]->go_fd);
      ::close(gated[i]->report_fd);
      gated[i].reset();
      auto& r = a.rec.replicas[i];
      r.outcome = "error: " + journaled.error().message;
      r.finished_seq = ++finish_counter_;
    }
  }
  return gated;
}

void LocalExecutor::signal_running(Live& a, int sig) {
  for (std::size_t i = 0; i < a.rec.replicas.size(); ++i) {
    auto& r = a.rec.replicas[i];
    if (!r.outcome.empty() || r.shim_pid == 0) continue;
    // A shim released a moment ago may not have forked its command yet.
    if (r.pgid == 0) take_pgid(a, i, 1000);
    // Only while its shim lives is the pgid surely still this replica's.
    if (supervised_alive(r.shim_pid, r.shim_start_ticks)) signal_group(r.pgid, sig);
  }
}

void LocalExecutor::refresh(Live& a) {
  auto& rec = a.rec;
  if (rec.terminal) return;
  bool changed = false;
  for (std::size_t i = 0; i < rec.replicas.size(); ++i) {
    auto& r = rec.replicas[i];
    if (!r.outcome.empty()) continue;
    if (r.pgid == 0 && take_pgid(a, i, 0)) changed = true;
    // Alive first, then the exit file: the shim renames the file before it
    // exits, so a dead shim without one really died without recording.
    if (r.shim_pid != 0 && supervised_alive(r.shim_pid, r.shim_start_ticks)) {
      // Released but the agent died before journaling the pgid: ask /proc.
      if (r.pgid == 0 && !a.reports.count(i)) {
        r.pgid = supervised_child(r.shim_pid);
        if (r.pgid != 0) changed = true;
      }
      continue;
    }
    if (auto ex = read_exit_file(exit_path(rec.order.attempt_id, r.replica))) {
      r.outcome = ex->text();
    } else {
      r.outcome = "lost";
      // The command's leader died with its shim (PR_SET_PDEATHSIG), but its
      // children may live on in the group: no orphans. The pgid alone is no
      // proof after a while, the attempt id in their environment is.
      const std::string marker = "CUBEPLANE_ATTEMPT_ID=" + rec.order.attempt_id;
      if (r.pgid == 0 && r.shim_pid != 0) {
        for (int pgid : groups_with_marker(marker)) signal_group(pgid, SIGKILL);  // released, pgid never recorded
      } else if (group_has_marker(r.pgid, marker)) {
        signal_group(r.pgid, SIGKILL);
      }
    }
    r.finished_seq = ++finish_counter_;
    changed = true;
  }

  const ReplicaRecord* first_failure = nullptr;
  bool running = false;
  for (const auto& r : rec.replicas) {
    if (r.outcome.empty()) running = true;
    if (is_failure(r.outcome) && (!first_failure || r.finished_seq < first_failure->finished_seq)) {
      first_failure = &r;
    }
  }
  const Millis now = clock_.now_ms();
  if (running) {
    // Gang semantics: one replica failed, so the others cannot make progress.
    if (first_failure && !rec.gang_stop && rec.stop_reason.empty()) {
      rec.gang_stop = true;
      rec.kill_at = now + std::max<std::int64_t>(0, rec.order.grace_s) * 1000;
      signal_running(a, SIGTERM);
      changed = true;
    }
    if (rec.kill_at != 0 && now >= rec.kill_at && !rec.killed) {
      signal_running(a, SIGKILL);
      rec.killed = true;
      changed = true;
    }
  } else {
    std::optional<int> exit_code = 0;
    std::string failure;
    // No exit record: the outcome is unknown (e.g. the agent died between
    // journaling and spawning). Lost, not Failed, so the server runs it anew.
    const bool outcome_unknown = first_failure && first_failure->outcome == "lost";
    if (first_failure) {
      const auto& o = first_failure->outcome;
      if (auto ex = parse_exit_record(o)) {
        exit_code = ex->exit_code();
        failure = ex->signaled ? "killed by signal " + std::to_string(ex->number)
                               : "exited with code " + std::to_string(ex->number);
        // Stopped by its shim at the lease's deadline: Lost (the fence note
        // below), so that the server runs it again (it may have already).
        if (ex->fenced && rec.fence_note.empty()) rec.fence_note = kFencedByShim;
      } else {
        exit_code.reset();
        failure = o == "lost" ? std::string(a.adopted ? kLostAfterRestart : kLostShim) : o.substr(7);  // "error: "
      }
      if (rec.replicas.size() > 1) failure = "replica " + std::to_string(first_failure->replica) + ": " + failure;
    }
    rec.exit_code = exit_code;
    if (!rec.fence_note.empty() && (rec.stop_reason.empty() || rec.stop_reason == kStopLost)) {
      rec.state = AttemptState::Lost;
      rec.message = rec.fence_note;
    } else if (!rec.stop_reason.empty()) {
      rec.state = reason_state(rec.stop_reason);
      rec.message = stop_message(rec.stop_reason, rec.killed);
    } else if (first_failure) {
      rec.state = outcome_unknown ? AttemptState::Lost : AttemptState::Failed;
      rec.message = failure;
    } else {
      rec.state = AttemptState::Succeeded;
      rec.message.clear();
    }
    rec.finished_at = now;
    rec.terminal = true;
    rec.kill_at = 0;
    drop_reports(a);
    changed = true;
    spdlog::info("local executor: attempt {} ended: {} {}", rec.order.attempt_id,
                 boost::describe::enum_to_string(rec.state, "?"), rec.message);
  }
  if (changed) (void)save(a);
}

void LocalExecutor::stop(const std::string& attempt_id, const std::string& reason, std::int64_t grace_s) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end()) return;
  Live& a = it->second;
  refresh(a);
  auto& rec = a.rec;
  if (rec.terminal) return;
  const bool already_stopping = rec.kill_at != 0 || rec.killed;
  // A gang already failing stays Failed: the failure came first.
  if (rec.stop_reason.empty() && !rec.gang_stop) rec.stop_reason = reason.empty() ? std::string(kStopCancel) : reason;
  const Millis deadline = clock_.now_ms() + std::max<std::int64_t>(0, grace_s) * 1000;
  if (rec.kill_at == 0 || deadline < rec.kill_at) rec.kill_at = deadline;
  if (!already_stopping) {
    spdlog::info("local executor: stopping attempt {} ({}, grace {} s)", attempt_id, reason, grace_s);
    signal_running(a, SIGTERM);
  }
  if (grace_s <= 0 && !rec.killed) {
    signal_running(a, SIGKILL);
    rec.killed = true;
  }
  (void)save(a);
}

AttemptReport LocalExecutor::report_of(const AttemptRecord& r) const {
  AttemptReport rep;
  rep.attempt_id = r.order.attempt_id;
  rep.epoch = r.order.epoch;
  rep.started_at = r.started_at;
  if (r.terminal) {
    // What it used goes with the end only: histograms on every sync of
    // every running attempt would be most of the agent's traffic, and of
    // what the scheduler reads back with the live attempts.
    rep.use = r.use;
    rep.state = r.state;
    rep.exit_code = r.exit_code;
    rep.finished_at = r.finished_at;
    rep.message = r.message;
  } else {
    rep.state = (r.kill_at != 0 || r.killed) ? AttemptState::Stopping : AttemptState::Running;
  }
  return rep;
}

// One sample of every running replica: CPU over the time since the last
// sample (the first sample of a replica only sets its baseline), resident
// memory now, and on a machine whose GPUs NVML reports (not declared ones)
// the utilization and memory of the replica's devices. Real time, not the
// injected clock: the processes' CPU time is real.
void LocalExecutor::sample_use() {
  if (config_.use_sample_ms <= 0) return;
  const std::int64_t now_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count();
  const std::int64_t dt_ns = now_ns - last_sample_ns_;
  if (last_sample_ns_ != 0 && dt_ns < config_.use_sample_ms * 1'000'000) return;
  std::set<int> groups;
  for (const auto& [id, a] : attempts_) {
    if (a.rec.terminal) continue;
    for (const auto& r : a.rec.replicas) {
      if (r.outcome.empty() && r.pgid > 1) groups.insert(r.pgid);
    }
  }
  last_sample_ns_ = now_ns;
  if (groups.empty()) return;
  const auto usage = read_group_usage(groups);
  std::vector<GpuDevice> gpus;
  if (config_.nodes.empty() && nvml_ && nvml_->available()) gpus = nvml_->devices();
  const std::int64_t tps = clock_ticks_per_second();
  for (auto& [id, a] : attempts_) {
    if (a.rec.terminal) continue;
    bool sampled = false;
    for (const auto& r : a.rec.replicas) {
      if (!r.outcome.empty() || r.pgid <= 1) continue;
      auto u = usage.find(r.pgid);
      if (u == usage.end() || u->second.processes == 0) continue;
      // A replica's first reading (none kept yet) only sets its baseline.
      auto prev = a.cpu_ticks.find(r.pgid);
      const bool baseline_only = prev == a.cpu_ticks.end();
      const std::int64_t delta = baseline_only ? 0 : std::max<std::int64_t>(0, u->second.cpu_ticks - prev->second);
      a.cpu_ticks[r.pgid] = u->second.cpu_ticks;
      if (baseline_only || dt_ns <= 0) continue;
      UseSample s;
      // ticks / tps seconds of CPU over dt_ns: in millicores.
      s.cpu_milli = static_cast<std::int64_t>(static_cast<double>(delta) * 1e12 /
                                              (static_cast<double>(tps) * static_cast<double>(dt_ns)));
      s.memory_bytes = u->second.rss_bytes;
      const auto& placement = r.replica < static_cast<int>(a.rec.order.placements.size())
                                  ? a.rec.order.placements[static_cast<std::size_t>(r.replica)].gpu_indices
                                  : std::vector<int>{};
      std::int64_t util = 0, memory = 0, measured = 0;
      for (int index : placement) {
        for (const auto& g : gpus) {
          if (g.index != index || g.utilization < 0) continue;
          util += g.utilization;
          memory += g.memory_used;
          ++measured;
        }
      }
      if (measured > 0) {
        s.gpu_util_pct = util / measured;
        s.gpu_memory_bytes = memory;
      }
      a.rec.use.add(s);
      sampled = true;
    }
    if (sampled) (void)save(a);
  }
}

std::vector<AttemptReport> LocalExecutor::poll() {
  std::lock_guard lock(mu_);
  sample_use();
  std::vector<AttemptReport> out;
  for (auto& [id, a] : attempts_) {
    if (a.rec.acked) continue;
    refresh(a);
    out.push_back(report_of(a.rec));
  }
  return out;
}

void LocalExecutor::forget(const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end() || it->second.rec.acked) return;
  if (!it->second.rec.terminal) {
    spdlog::warn("local executor: ignoring an ack of attempt {}, which is still running", attempt_id);
    return;
  }
  it->second.rec.acked = true;
  (void)save(it->second);
  maybe_remove(attempt_id);
}

void LocalExecutor::maybe_remove(const std::string& attempt_id) {
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end()) return;
  if (!file_logs::done_with(attempt_id, it->second.rec, [this](const std::string& id, int r) { return log_path(id, r); })) {
    return;
  }
  std::error_code ec;
  fs::remove_all(attempt_dir(attempt_id), ec);
  if (ec) spdlog::warn("local executor: cannot remove {}: {}", attempt_dir(attempt_id), ec.message());
  drop_reports(it->second);
  attempts_.erase(it);
  forgotten_.insert(attempt_id);
}

std::vector<LogPiece> LocalExecutor::read_new_logs(std::size_t max_bytes) {
  std::lock_guard lock(mu_);
  return file_logs::read_new(
      attempts_, [this](const std::string& id, int r) { return log_path(id, r); }, config_.log_chunk_bytes, max_bytes);
}

void LocalExecutor::logs_shipped(const std::string& attempt_id, int replica, std::int64_t new_offset) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end()) return;
  if (file_logs::mark_shipped(it->second.rec, replica, new_offset)) (void)save(it->second);
  maybe_remove(attempt_id);
}

void LocalExecutor::logs_refused(const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end() || it->second.rec.logs_refused) return;
  it->second.rec.logs_refused = true;
  (void)save(it->second);
  maybe_remove(attempt_id);
}

void LocalExecutor::set_lease(const std::string& lease_path, const std::string& chain) {
  std::lock_guard lock(mu_);
  lease_path_ = lease_path;
  if (chain == lease_chain_) return;
  lease_chain_ = chain;
  for (auto& [id, a] : attempts_) {
    refresh(a);
    if (a.rec.terminal || a.rec.lease_chain == chain) continue;
    // Its lease ran out before this chain began: its shim stops it too, at
    // its next look at the lease file; this does not wait for that.
    spdlog::warn("local executor: attempt {} ran under a lease that has run out; stopping it", id);
    if (a.rec.stop_reason.empty() && !a.rec.gang_stop) a.rec.stop_reason = kStopLost;
    a.rec.fence_note = kFencedOnAdoption;
    a.rec.kill_at = clock_.now_ms();
    signal_running(a, SIGKILL);
    a.rec.killed = true;
    (void)save(a);
    refresh(a);
  }
}

ResourceUse LocalExecutor::use_so_far(const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  return it == attempts_.end() ? ResourceUse{} : it->second.rec.use;
}

std::vector<int> LocalExecutor::process_groups(const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  std::vector<int> out;
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end()) return out;
  auto& a = it->second;
  bool changed = false;
  for (std::size_t i = 0; i < a.rec.replicas.size(); ++i) {
    changed = take_pgid(a, i, 1000) || changed;  // a shim released a moment ago reports at once
    out.push_back(a.rec.replicas[i].pgid);
  }
  if (changed) (void)save(a);
  return out;
}

EngineStatus LocalExecutor::engine() {
  std::lock_guard lock(mu_);
  EngineStatus st;
  if (!engine_problem_.empty()) {
    st.ok = false;
    st.message = engine_problem_;
  } else if (::access((config_.data_dir + "/attempts").c_str(), W_OK) != 0) {
    st.ok = false;
    st.message = "data directory " + config_.data_dir + " is not writable: " + std::strerror(errno);
  } else {
    st.message = "local processes";
  }
  return st;
}

std::vector<NodeReport> LocalExecutor::inventory() {
  std::lock_guard lock(mu_);
  if (!nvml_probed_) {
    nvml_ = std::make_unique<Nvml>(config_.nvml_library);
    nvml_probed_ = true;
    if (nvml_->available()) {
      facts_.driver = nvml_->driver_version();
      facts_.cuda = nvml_->cuda_version();
    } else {
      spdlog::debug("local executor: no NVML ({}); reporting no GPUs", nvml_->problem());
    }
  }
  std::vector<NodeReport> out;
  if (!config_.nodes.empty()) {
    for (const auto& d : config_.nodes) {
      NodeReport n;
      n.name = d.name;
      n.labels = d.labels;
      n.facts = facts_;
      n.capacity.set(kCpu, d.cpu_milli > 0 ? d.cpu_milli : host_cpu_millis());
      n.capacity.set(kMemory, d.memory_bytes > 0 ? d.memory_bytes : host_memory_bytes());
      if (d.gpus.count > 0 && !d.gpus.type.empty()) {
        n.capacity.set(std::string(kGpuPrefix) + d.gpus.type, d.gpus.count);
        n.labels.emplace(std::string(kLabelGpuType), d.gpus.type);
        for (int i = 0; i < d.gpus.count; ++i) {
          GpuDevice g;
          g.index = i;
          g.uuid = "declared-" + d.name + "-" + std::to_string(i);
          g.model = d.gpus.type;
          g.memory_total = d.gpus.memory_bytes;
          g.utilization = -1;  // declared, not measured
          n.gpus.push_back(std::move(g));
        }
      }
      n.allocatable = n.capacity;
      out.push_back(std::move(n));
    }
    return out;
  }
  NodeReport n;
  n.name = host_name();
  n.facts = facts_;
  n.capacity.set(kCpu, host_cpu_millis());
  n.capacity.set(kMemory, host_memory_bytes());
  n.gpus = nvml_->devices();
  for (const auto& g : n.gpus) {
    n.capacity.set(std::string(kGpuPrefix) + g.model, n.capacity.get(std::string(kGpuPrefix) + g.model) + 1);
  }
  if (!n.gpus.empty()) n.labels[std::string(kLabelGpuType)] = n.gpus.front().model;
  n.allocatable = n.capacity;
  out.push_back(std::move(n));
  return out;
}

}  // namespace cp
