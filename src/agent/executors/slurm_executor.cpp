#include "agent/executors/slurm_executor.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "agent/executors/file_logs.h"
#include "agent/executors/run_command.h"
#include "agent/executors/supervised_process.h"
#include "agent/files.h"
#include "common/log.h"

namespace cp {
namespace fs = std::filesystem;

namespace {

// A job that ended COMPLETED or FAILED after running has written its exit
// file; on a shared filesystem with attribute caching (NFS) it may show up
// here a moment later than slurmctld's word. Waited for this long before
// falling back to `scontrol show job`.
constexpr std::int64_t kExitFileWaitNs = 3'000'000'000;

std::int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

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

// sbatch's failures that say nothing about the job itself: it is submitted
// again later (after a look in squeue by name, in case it went through).
bool transient_failure(const CommandOutput& out) {
  if (out.timed_out) return true;
  const std::string text = out.err + out.out;
  for (const char* s : {"Unable to contact slurm controller", "Socket timed out", "temporarily unable",
                        "Zero Bytes were transmitted", "Resource temporarily unavailable",
                        "Communication connection failure", "Slurm backup controller in standby"}) {
    if (text.find(s) != std::string::npos) return true;
  }
  return false;
}

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

// What one replica's outcome means for the attempt.
struct Verdict {
  bool failure = false;
  AttemptState state = AttemptState::Failed;  // when this is the first failure and nobody asked for a stop
  std::optional<int> exit_code;
  std::string message;
};

Verdict verdict_of(const std::string& outcome) {
  Verdict v;
  if (outcome.empty() || outcome == "exit 0" || outcome == "unsubmitted") return v;
  v.failure = true;
  if (auto ex = parse_exit_record(outcome)) {
    v.exit_code = ex->exit_code();
    v.message = ex->signaled ? "killed by signal " + std::to_string(ex->number)
                             : "exited with code " + std::to_string(ex->number);
  } else if (outcome.rfind("slurm ", 0) == 0) {
    const std::string st = outcome.substr(6);
    if (st == "NODE_FAIL" || st == "BOOT_FAIL") {
      v.state = AttemptState::Lost;
      v.message = "lost: the Slurm job ended " + st;
    } else if (st == "PREEMPTED") {
      v.state = AttemptState::Preempted;
      v.message = "preempted by Slurm";
    } else if (st == "CANCELLED") {
      v.message = "the Slurm job was cancelled outside Cubeplane";
    } else if (st == "TIMEOUT") {
      v.message = "the Slurm job reached its time limit";
    } else if (st == "OUT_OF_MEMORY") {
      v.message = "the Slurm job ran out of memory";
    } else {
      v.message = "the Slurm job ended " + st;
    }
  } else if (outcome == "lost") {
    v.state = AttemptState::Lost;
    v.message = "lost: the Slurm job is gone and left no exit status";
  } else if (outcome.rfind("error: ", 0) == 0) {
    v.message = outcome.substr(7);
  } else {
    v.message = outcome;
  }
  return v;
}

}  // namespace

SlurmExecutor::SlurmExecutor(SlurmExecutorConfig config, const Clock& clock)
    : config_(std::move(config)), clock_(clock) {
  std::error_code ec;
  fs::path abs = fs::absolute(config_.data_dir.empty() ? fs::path(".") : fs::path(config_.data_dir), ec);
  if (!ec) config_.data_dir = abs.lexically_normal().string();
  while (config_.data_dir.size() > 1 && config_.data_dir.back() == '/') config_.data_dir.pop_back();
  if (config_.log_chunk_bytes == 0) config_.log_chunk_bytes = 256 * 1024;
  if (config_.command_timeout_ms <= 0) config_.command_timeout_ms = 15000;
  for (const char* sub : {"attempts", "checkpoints"}) {
    auto st = agent_files::make_dirs(config_.data_dir + "/" + sub);
    if (!st.ok()) setup_problem_ = st.error().message;
  }
  load_journals();
}

SlurmExecutor::~SlurmExecutor() = default;

std::string SlurmExecutor::attempt_dir(const std::string& attempt_id) const {
  return config_.data_dir + "/attempts/" + attempt_id;
}
std::string SlurmExecutor::log_path(const std::string& attempt_id, int replica) const {
  return attempt_dir(attempt_id) + "/r" + std::to_string(replica) + ".log";
}
std::string SlurmExecutor::exit_path(const std::string& attempt_id, int replica) const {
  return attempt_dir(attempt_id) + "/r" + std::to_string(replica) + ".exit";
}
std::string SlurmExecutor::script_path(const std::string& attempt_id, int replica) const {
  return attempt_dir(attempt_id) + "/r" + std::to_string(replica) + ".sh";
}

std::string SlurmExecutor::bin(const std::string& name) const {
  if (config_.bin_dir.empty()) return name;
  std::string dir = config_.bin_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/" + name;
}

CommandOutput SlurmExecutor::run(std::vector<std::string> argv, std::string* spawn_error) const {
  CommandSpec spec;
  spec.argv = std::move(argv);
  spec.timeout_ms = config_.command_timeout_ms;
  if (!config_.slurm_conf.empty()) spec.env["SLURM_CONF"] = config_.slurm_conf;
  auto r = run_command(spec);
  if (!r.ok()) {
    if (spawn_error) *spawn_error = r.error().message;
    CommandOutput failed;
    failed.err = r.error().message;
    return failed;
  }
  if (r->timed_out) spdlog::warn("slurm executor: {} timed out after {} ms", spec.argv[0], spec.timeout_ms);
  return std::move(r).value();
}

// ------------------------------------------------------------------ journals

void SlurmExecutor::load_journals() {
  std::error_code ec;
  fs::directory_iterator it(config_.data_dir + "/attempts", ec);
  if (ec) return;
  for (const auto& entry : it) {
    if (!entry.is_directory(ec)) continue;
    std::string id = entry.path().filename().string();
    auto text = agent_files::read_all(entry.path().string() + "/journal.json");
    if (!text) continue;  // died before its first journal write: nothing was submitted
    auto rec = decode_json<AttemptRecord>(*text);
    if (!rec.ok() || rec->order.attempt_id != id) {
      spdlog::warn("slurm executor: ignoring unreadable journal of {}: {}", id,
                   rec.ok() ? std::string("attempt id mismatch") : rec.error().message);
      continue;
    }
    for (const auto& r : rec->replicas) finish_counter_ = std::max(finish_counter_, r.finished_seq);
    Live live;
    live.rec = std::move(rec).value();
    live.adopted = true;
    // known_since_ns stays 0 for every replica: any squeue from now on may
    // prove a journaled job gone, and find an unjournaled one by name.
    attempts_.emplace(id, std::move(live));
    spdlog::info("slurm executor: adopted attempt {} from its journal", id);
  }
  std::vector<std::string> ids;
  for (const auto& [id, a] : attempts_) ids.push_back(id);
  for (const auto& id : ids) maybe_remove(id);
}

Status SlurmExecutor::save(const Live& a) {
  const auto& id = a.rec.order.attempt_id;
  auto st = agent_files::write_atomic(attempt_dir(id) + "/journal.json", dump(to_json(a.rec)));
  if (!st.ok()) spdlog::error("slurm executor: journal of {}: {}", id, st.error().message);
  return st;
}

// -------------------------------------------------------------------- start

std::vector<std::pair<std::string, std::string>> SlurmExecutor::build_env(const StartOrder& order,
                                                                          const ReplicaPlacement& placement) const {
  std::map<std::string, std::string> env;
  for (const char* name : {"PATH", "HOME"}) {
    if (const char* v = std::getenv(name)) env[name] = v;
  }
  for (const auto& [k, v] : order.env) env[k] = v;
  // Slurm picks the GPUs of a job and sets CUDA_VISIBLE_DEVICES to them
  // (gpu_indices are the scheduler's guess, not Slurm's choice): the order
  // may not override it. A job without GPUs sees none, as a local replica.
  env.erase("CUDA_VISIBLE_DEVICES");
  if (order.resources.gpus() == 0) env["CUDA_VISIBLE_DEVICES"] = "";
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
  return {env.begin(), env.end()};
}

Status SlurmExecutor::start(const StartOrder& order) {
  std::lock_guard lock(mu_);
  if (!safe_name(order.attempt_id)) {
    return errors::invalid("attempt_id", "attempt id \"" + order.attempt_id + "\" is not usable as a directory name",
                           "attempt id \"" + order.attempt_id + "\" 不能用作目录名");
  }
  if (!safe_name(order.task_id)) {
    return errors::invalid("task_id", "task id \"" + order.task_id + "\" is not usable as a directory name",
                           "task id \"" + order.task_id + "\" 不能用作目录名");
  }
  if (attempts_.count(order.attempt_id) || forgotten_.count(order.attempt_id)) return ok_status();  // idempotent

  Live a;
  a.rec.order = order;
  a.rec.submitted_at = clock_.now_ms();
  std::vector<ReplicaPlacement> placements = order.placements;
  if (placements.empty()) placements.push_back(ReplicaPlacement{});
  for (const auto& p : placements) {
    ReplicaRecord r;
    r.replica = p.replica;
    r.node = p.node;
    r.job_name = "cp_" + order.attempt_id + "_r" + std::to_string(p.replica);
    a.rec.replicas.push_back(r);
  }
  const std::string dir = attempt_dir(order.attempt_id);
  CP_TRY(agent_files::make_dirs(dir + "/work"));
  CP_TRY(agent_files::make_dirs(config_.data_dir + "/checkpoints/" + order.task_id));

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
  if (auto res = slurm::resource_args(order.resources); !res.ok()) problem = res.error().message;
  for (std::size_t i = 0; i < placements.size() && problem.empty(); ++i) {
    slurm::BatchScript b;
    b.attempt_id = order.attempt_id;
    b.replica = placements[i].replica;
    b.command = order.command;
    b.env = build_env(order, placements[i]);
    b.exit_path = exit_path(order.attempt_id, placements[i].replica);
    auto st = agent_files::write_atomic(script_path(order.attempt_id, placements[i].replica), slurm::batch_script(b),
                                        0755);
    if (!st.ok()) problem = "cannot write the batch script: " + st.error().message;
  }
  if (!problem.empty()) {
    for (auto& r : a.rec.replicas) {
      r.outcome = "error: " + problem;
      r.finished_seq = ++finish_counter_;
    }
  }
  // Journal first: should the agent die inside sbatch, the next one looks
  // for the job by name before submitting anything.
  CP_TRY(save(a));
  auto [it, inserted] = attempts_.emplace(order.attempt_id, std::move(a));
  Live& live = it->second;
  if (problem.empty()) {
    for (auto& r : live.rec.replicas) submit(live, r);
    (void)save(live);
  }
  spdlog::info("slurm executor: submitted attempt {} ({} replica(s))", order.attempt_id, live.rec.replicas.size());
  return ok_status();
}

void SlurmExecutor::submit(Live& a, ReplicaRecord& r) {
  const auto& order = a.rec.order;
  std::vector<std::string> argv = {bin("sbatch"),
                                   "--parsable",
                                   "--job-name=" + r.job_name,
                                   // Reruns are the server's business (a new attempt, a new epoch).
                                   "--no-requeue",
                                   // The environment is in the script, not the agent's own.
                                   "--export=NONE",
                                   // A job that Slurm restarts anyway must not truncate what was shipped.
                                   "--open-mode=append",
                                   "--output=" + slurm::escape_filename_pattern(log_path(order.attempt_id, r.replica)),
                                   "--chdir=" + attempt_dir(order.attempt_id) + "/work",
                                   "--nodes=1",
                                   "--ntasks=1"};
  if (!r.node.empty()) argv.push_back("--nodelist=" + r.node);
  if (!config_.partition.empty()) argv.push_back("--partition=" + config_.partition);
  auto res = slurm::resource_args(order.resources);
  if (res.ok()) argv.insert(argv.end(), res->begin(), res->end());
  argv.insert(argv.end(), config_.sbatch_args.begin(), config_.sbatch_args.end());
  argv.push_back(script_path(order.attempt_id, r.replica));

  ++submissions_;
  std::string spawn_error;
  CommandOutput out = run(argv, &spawn_error);
  a.known_since_ns[r.replica] = steady_ns();
  if (out.ok()) {
    if (auto id = slurm::parse_sbatch_job_id(out.out)) {
      r.job_id = *id;
      spdlog::info("slurm executor: attempt {} replica {} is job {}", order.attempt_id, r.replica, r.job_id);
      return;
    }
  }
  if (!spawn_error.empty() || out.ok() || transient_failure(out)) {
    // Maybe submitted, maybe not: squeue tells by name before it is tried again.
    spdlog::warn("slurm executor: sbatch of {} did not answer clearly ({}); looking for it by name next",
                 r.job_name, spawn_error.empty() ? out.problem() : spawn_error);
    return;
  }
  r.outcome = "error: sbatch: " + out.problem();
  r.finished_seq = ++finish_counter_;
  spdlog::warn("slurm executor: sbatch of {} failed: {}", r.job_name, out.problem());
}

// ------------------------------------------------------------------ observe

void SlurmExecutor::refresh_snapshot(bool force) {
  const std::int64_t now = steady_ns();
  if (!force && last_squeue_ns_ != 0 && now - last_squeue_ns_ < config_.squeue_interval_ms * 1'000'000) return;
  bool needed = false;
  for (const auto& [id, a] : attempts_) needed = needed || !a.rec.terminal;
  if (!needed) return;
  last_squeue_ns_ = now;
  // Every state (-t all): a job that ended a moment ago is still listed,
  // with how it ended, until MinJobAge passes.
  CommandOutput out = run({bin("squeue"), "--me", "--noheader", "--states=all",
                           "--format=" + std::string(slurm::kSqueueFormat)});
  if (!out.ok()) {
    if (squeue_problem_ != out.problem()) spdlog::warn("slurm executor: squeue failed: {}", out.problem());
    squeue_problem_ = out.problem();
    return;  // the last snapshot stays; nothing is concluded from a missing job meanwhile
  }
  squeue_problem_.clear();
  Snapshot s;
  s.ok = true;
  s.taken_ns = now;
  for (auto& row : slurm::parse_squeue(out.out)) {
    if (row.name.rfind("cp_", 0) != 0) continue;
    s.by_name.emplace(row.name, row);
    s.by_id.emplace(row.job_id, std::move(row));
  }
  snapshot_ = std::move(s);
}

// How a replica whose job ended (or vanished) came out: its exit file, else
// what slurmctld still remembers, else lost.
std::string SlurmExecutor::finished_outcome(const Live& a, const ReplicaRecord& r) {
  if (auto ex = read_exit_file(exit_path(a.rec.order.attempt_id, r.replica))) return ex->text();
  CommandOutput out = run({bin("scontrol"), "--oneliner", "show", "job", r.job_id});
  if (out.ok()) {
    auto kv = slurm::parse_scontrol_line(out.out);
    const std::string state = kv["JobState"];
    auto ex = slurm::parse_job_exit(kv["ExitCode"]);
    if ((state == "COMPLETED" || state == "FAILED") && ex) {
      return ex->signal != 0 ? "signal " + std::to_string(ex->signal) : "exit " + std::to_string(ex->exit_code);
    }
    if (!state.empty() && slurm::job_phase(state) == slurm::JobPhase::Ended) return "slurm " + state;
  }
  if (r.slurm_state == "COMPLETED") return "exit 0";
  if (!r.slurm_state.empty() && slurm::job_phase(r.slurm_state) == slurm::JobPhase::Ended) {
    return "slurm " + r.slurm_state;
  }
  return "lost";
}

void SlurmExecutor::refresh(Live& a) {
  auto& rec = a.rec;
  if (rec.terminal) return;
  bool changed = false;
  const Millis now = clock_.now_ms();
  const bool stopping = !rec.stop_reason.empty() || rec.gang_stop;
  auto finish = [&](ReplicaRecord& r, std::string outcome) {
    r.outcome = std::move(outcome);
    r.finished_seq = ++finish_counter_;
    changed = true;
  };
  for (auto& r : rec.replicas) {
    if (!r.outcome.empty()) continue;
    const std::int64_t known_since = a.known_since_ns.count(r.replica) ? a.known_since_ns[r.replica] : 0;
    const bool fresh = snapshot_.ok && snapshot_.taken_ns > known_since;
    if (r.job_id.empty()) {
      // Journaled without a job id: find it by name before submitting again.
      if (!fresh) continue;
      const slurm::JobRow* match = nullptr;
      auto [lo, hi] = snapshot_.by_name.equal_range(r.job_name);
      for (auto m = lo; m != hi; ++m) {
        const bool ended = slurm::job_phase(m->second.state) == slurm::JobPhase::Ended;
        if (!match || (!ended && slurm::job_phase(match->state) == slurm::JobPhase::Ended)) match = &m->second;
      }
      if (match) {
        r.job_id = match->job_id;
        spdlog::info("slurm executor: found job {} of {} in squeue", r.job_id, r.job_name);
        changed = true;
      } else if (auto ex = read_exit_file(exit_path(rec.order.attempt_id, r.replica))) {
        finish(r, ex->text());
        continue;
      } else if (stopping) {
        finish(r, "unsubmitted");
        continue;
      } else {
        submit(a, r);
        changed = true;
        continue;
      }
    }
    if (auto ex = read_exit_file(exit_path(rec.order.attempt_id, r.replica))) {
      r.started = true;
      finish(r, ex->text());
      continue;
    }
    auto row = snapshot_.ok ? snapshot_.by_id.find(r.job_id) : snapshot_.by_id.end();
    if (row != snapshot_.by_id.end()) {
      const auto& job = row->second;
      if (job.state != r.slurm_state) {
        r.slurm_state = job.state;
        changed = true;
      }
      const auto phase = slurm::job_phase(job.state);
      if (phase != slurm::JobPhase::Pending && !r.started && job.state != "CANCELLED") {
        r.started = true;
        changed = true;
      }
      if (phase != slurm::JobPhase::Ended) continue;
      if (r.started && !rec.killed && (job.state == "COMPLETED" || job.state == "FAILED")) {
        // The exit file may lag behind on a shared filesystem (a killed
        // job's script wrote none).
        auto& first_seen = a.ended_seen_ns[r.replica];
        if (first_seen == 0) first_seen = steady_ns();
        if (steady_ns() - first_seen < kExitFileWaitNs) continue;
      }
      finish(r, finished_outcome(a, r));
    } else if (fresh) {
      // Gone from squeue: MinJobAge passed while nobody looked, or slurmctld lost it.
      finish(r, finished_outcome(a, r));
    }
  }
  if (rec.started_at == 0 &&
      std::any_of(rec.replicas.begin(), rec.replicas.end(), [](const ReplicaRecord& r) { return r.started; })) {
    rec.started_at = now;
    changed = true;
  }

  const ReplicaRecord* first_failure = nullptr;
  bool running = false;
  for (const auto& r : rec.replicas) {
    if (r.outcome.empty()) running = true;
    if (verdict_of(r.outcome).failure && (!first_failure || r.finished_seq < first_failure->finished_seq)) {
      first_failure = &r;
    }
  }
  if (running) {
    // Gang semantics: one replica failed, so the others cannot make progress.
    if (first_failure && !rec.gang_stop && rec.stop_reason.empty()) {
      rec.gang_stop = true;
      rec.kill_at = now + std::max<std::int64_t>(0, rec.order.grace_s) * 1000;
      changed = true;
    }
    if (rec.kill_at != 0 && !rec.killed) {
      if (now >= rec.kill_at) {
        kill_hard(a);
        changed = true;
      } else if (a.stop_snapshot_ns != snapshot_.taken_ns) {
        // Each new look at the jobs: cancel what is still pending, TERM
        // what has started since.
        a.stop_snapshot_ns = snapshot_.taken_ns;
        stop_politely(a);
        changed = true;
      }
    }
  } else {
    Verdict v = first_failure ? verdict_of(first_failure->outcome) : Verdict{};
    if (first_failure && rec.replicas.size() > 1) {
      v.message = "replica " + std::to_string(first_failure->replica) + ": " + v.message;
    }
    rec.exit_code = first_failure ? v.exit_code : std::optional<int>(0);
    if (!rec.stop_reason.empty()) {
      rec.state = reason_state(rec.stop_reason);
      rec.message = stop_message(rec.stop_reason, rec.killed);
    } else if (first_failure) {
      rec.state = v.state;
      rec.message = v.message;
    } else {
      rec.state = AttemptState::Succeeded;
      rec.message.clear();
    }
    rec.finished_at = now;
    rec.terminal = true;
    rec.kill_at = 0;
    changed = true;
    spdlog::info("slurm executor: attempt {} ended: {} {}", rec.order.attempt_id,
                 boost::describe::enum_to_string(rec.state, "?"), rec.message);
  }
  if (changed) (void)save(a);
}

// -------------------------------------------------------------------- stop

// A pending job is cancelled outright (nothing runs yet); a running one gets
// TERM, the batch script and every process of the job (--full). A TERM that
// reaches a job which slurmctld already calls RUNNING but whose batch step
// has not started yet is lost: the kill at the deadline then ends it.
void SlurmExecutor::stop_politely(Live& a) {
  std::vector<std::string> pending, running;
  for (auto& r : a.rec.replicas) {
    if (!r.outcome.empty() || r.job_id.empty()) continue;
    const auto phase = r.slurm_state.empty() ? slurm::JobPhase::Pending : slurm::job_phase(r.slurm_state);
    if (phase == slurm::JobPhase::Pending) {
      pending.push_back(r.job_id);
    } else if (phase == slurm::JobPhase::Running && !r.term_sent) {
      running.push_back(r.job_id);
      r.term_sent = true;
    }
  }
  if (!pending.empty()) {
    // --state=PENDING: a job that started meanwhile is left to the TERM of the next look.
    std::vector<std::string> argv = {bin("scancel"), "--state=PENDING"};
    argv.insert(argv.end(), pending.begin(), pending.end());
    CommandOutput out = run(argv);
    if (!out.ok()) spdlog::warn("slurm executor: scancel of pending jobs failed: {}", out.problem());
  }
  if (!running.empty()) {
    std::vector<std::string> argv = {bin("scancel"), "--signal=TERM", "--full"};
    argv.insert(argv.end(), running.begin(), running.end());
    CommandOutput out = run(argv);
    if (!out.ok()) spdlog::warn("slurm executor: scancel --signal=TERM failed: {}", out.problem());
  }
}

// KILL to every process of the jobs, then the jobs cancelled, so that their
// allocations go without waiting for Slurm's KillWait.
void SlurmExecutor::kill_hard(Live& a) {
  std::vector<std::string> ids;
  for (const auto& r : a.rec.replicas) {
    if (r.outcome.empty() && !r.job_id.empty()) ids.push_back(r.job_id);
  }
  a.rec.killed = true;
  if (ids.empty()) return;
  spdlog::info("slurm executor: grace of attempt {} expired, killing its jobs", a.rec.order.attempt_id);
  std::vector<std::string> argv = {bin("scancel"), "--signal=KILL", "--full"};
  argv.insert(argv.end(), ids.begin(), ids.end());
  (void)run(argv);  // fails for jobs still pending: the plain cancel below ends those
  argv = {bin("scancel")};
  argv.insert(argv.end(), ids.begin(), ids.end());
  CommandOutput out = run(argv);
  if (!out.ok()) spdlog::debug("slurm executor: scancel: {}", out.problem());
}

void SlurmExecutor::stop(const std::string& attempt_id, const std::string& reason, std::int64_t grace_s) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end()) return;
  Live& a = it->second;
  refresh_snapshot(false);
  refresh(a);
  auto& rec = a.rec;
  if (rec.terminal) return;
  const bool already_stopping = rec.kill_at != 0 || rec.killed;
  // A gang already failing stays Failed: the failure came first.
  if (rec.stop_reason.empty() && !rec.gang_stop) rec.stop_reason = reason.empty() ? std::string(kStopCancel) : reason;
  const Millis deadline = clock_.now_ms() + std::max<std::int64_t>(0, grace_s) * 1000;
  if (rec.kill_at == 0 || deadline < rec.kill_at) rec.kill_at = deadline;
  if (!already_stopping) {
    spdlog::info("slurm executor: stopping attempt {} ({}, grace {} s)", attempt_id, reason, grace_s);
    a.stop_snapshot_ns = snapshot_.taken_ns;
    stop_politely(a);
  }
  if (grace_s <= 0 && !rec.killed) kill_hard(a);
  (void)save(a);
}

// ------------------------------------------------------------------- report

AttemptReport SlurmExecutor::report_of(const AttemptRecord& r) const {
  AttemptReport rep;
  rep.attempt_id = r.order.attempt_id;
  rep.epoch = r.order.epoch;
  rep.started_at = r.started_at;
  if (r.terminal) {
    rep.state = r.state;
    rep.exit_code = r.exit_code;
    rep.finished_at = r.finished_at;
    rep.message = r.message;
  } else if (r.kill_at != 0 || r.killed) {
    rep.state = AttemptState::Stopping;
  } else {
    // Queued in Slurm, nothing started: what the protocol calls Dispatched.
    rep.state = r.started_at != 0 ? AttemptState::Running : AttemptState::Dispatched;
  }
  return rep;
}

std::vector<AttemptReport> SlurmExecutor::poll() {
  std::lock_guard lock(mu_);
  refresh_snapshot(false);
  std::vector<AttemptReport> out;
  for (auto& [id, a] : attempts_) {
    if (a.rec.acked) continue;
    refresh(a);
    out.push_back(report_of(a.rec));
  }
  return out;
}

void SlurmExecutor::forget(const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end() || it->second.rec.acked) return;
  if (!it->second.rec.terminal) {
    spdlog::warn("slurm executor: ignoring an ack of attempt {}, which is still running", attempt_id);
    return;
  }
  it->second.rec.acked = true;
  (void)save(it->second);
  maybe_remove(attempt_id);
}

void SlurmExecutor::maybe_remove(const std::string& attempt_id) {
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end()) return;
  if (!file_logs::done_with(attempt_id, it->second.rec, [this](const std::string& id, int r) { return log_path(id, r); })) {
    return;
  }
  std::error_code ec;
  fs::remove_all(attempt_dir(attempt_id), ec);
  if (ec) spdlog::warn("slurm executor: cannot remove {}: {}", attempt_dir(attempt_id), ec.message());
  attempts_.erase(it);
  forgotten_.insert(attempt_id);
}

// --------------------------------------------------------------------- logs

std::vector<LogPiece> SlurmExecutor::read_new_logs(std::size_t max_bytes) {
  std::lock_guard lock(mu_);
  return file_logs::read_new(
      attempts_, [this](const std::string& id, int r) { return log_path(id, r); }, config_.log_chunk_bytes, max_bytes);
}

void SlurmExecutor::logs_shipped(const std::string& attempt_id, int replica, std::int64_t new_offset) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end()) return;
  if (file_logs::mark_shipped(it->second.rec, replica, new_offset)) (void)save(it->second);
  maybe_remove(attempt_id);
}

void SlurmExecutor::logs_refused(const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end() || it->second.rec.logs_refused) return;
  it->second.rec.logs_refused = true;
  (void)save(it->second);
  maybe_remove(attempt_id);
}

std::vector<std::string> SlurmExecutor::job_ids(const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  std::vector<std::string> out;
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end()) return out;
  for (const auto& r : it->second.rec.replicas) out.push_back(r.job_id);
  return out;
}

// ------------------------------------------------------------ engine, nodes

EngineStatus SlurmExecutor::engine() {
  std::lock_guard lock(mu_);
  EngineStatus st;
  if (!setup_problem_.empty()) {
    st.ok = false;
    st.message = setup_problem_;
    return st;
  }
  if (::access((config_.data_dir + "/attempts").c_str(), W_OK) != 0) {
    st.ok = false;
    st.message = "data directory " + config_.data_dir + " is not writable: " + std::strerror(errno);
    return st;
  }
  // "Slurmctld(primary) at head is UP"; exit 1 and "... is DOWN" (then a
  // banner of asterisks) when it does not answer: its first line says it.
  CommandOutput out = run({bin("scontrol"), "ping"});
  st.ok = out.ok();
  std::string first = out.out.substr(0, out.out.find('\n'));
  st.message = "slurm: " + (first.find("Slurmctld") != std::string::npos ? first : out.problem());
  return st;
}

std::vector<NodeReport> SlurmExecutor::inventory() {
  std::lock_guard lock(mu_);
  std::vector<NodeReport> out;
  CommandOutput res = run({bin("scontrol"), "--oneliner", "show", "node"});
  if (!res.ok()) {
    // An empty list would tell the server every node is gone: the last one
    // stands until Slurm answers again, and engine() says why.
    spdlog::warn("slurm executor: scontrol show node failed: {}", res.problem());
    return last_inventory_;
  }
  for (const auto& n : slurm::parse_nodes(res.out)) {
    if (!config_.partition.empty() &&
        std::find(n.partitions.begin(), n.partitions.end(), config_.partition) == n.partitions.end()) {
      continue;
    }
    out.push_back(slurm::node_report(n, config_.partition));
  }
  last_inventory_ = out;
  return out;
}

}  // namespace cp
