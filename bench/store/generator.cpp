#include "generator.h"

#include <boost/describe/enum_to_string.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numbers>

#include "common/result.h"
#include "sched/reasons.h"

namespace cp::bench {
namespace {

constexpr char kBase32[] = "0123456789abcdefghjkmnpqrstvwxyz";

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

void append_base32(std::string& out, std::uint64_t v) {
  char buf[10];
  for (int i = 9; i >= 0; --i) {
    buf[i] = kBase32[v & 31];
    v >>= 5;
  }
  out.append(buf, 10);
}

// The layout of common/ids.h new_id(): prefix, 10 characters of time, then a
// 20-bit counter (here the index) over 30 random bits. Tasks submitted in the
// same millisecond (one pipeline's) sort by index, as the server's do.
std::string make_id(std::string_view prefix, Millis at, std::uint64_t counter, std::uint64_t random) {
  std::string id(prefix);
  id += '-';
  append_base32(id, static_cast<std::uint64_t>(at));
  append_base32(id, ((counter & 0xFFFFF) << 30) | (random & ((1ULL << 30) - 1)));
  return id;
}

std::vector<double> cumulative(const std::vector<double>& weights) {
  std::vector<double> out;
  double sum = 0;
  for (double w : weights) out.push_back(sum += w);
  return out;
}

template <class E>
std::string name_of(E e) {
  return boost::describe::enum_to_string(e, "?");
}

// Streams of one seed: independent draws for each purpose.
enum Stream : std::uint64_t { kWorld = 1, kSizes = 2, kTimes = 3, kPipeline = 4 };
std::uint64_t stream_seed(std::uint64_t seed, Stream s, std::uint64_t n = 0) {
  return mix(mix(seed ^ (static_cast<std::uint64_t>(s) << 56)) ^ mix(n));
}

const std::vector<std::string> kGpuTypes = {"nvidia-a100-80gb", "nvidia-h100-80gb", "nvidia-l40s"};
const std::vector<std::string> kRegions = {"us-east", "us-west", "eu-central", "ap-south"};

struct PriorityChoice {
  const char* name;
  int value;
};
constexpr PriorityChoice kPriorities[] = {{"batch", 100}, {"urgent", 500}, {"inference-high", 1000}};

// How a pipeline's submission rate varies: the platform grows over the year
// (x2.3 from first to last day), weekdays carry twice the load of weekends,
// and the day peaks at 15:00 UTC. Hourly buckets, linear inside each.
class Arrivals {
 public:
  Arrivals(Millis start, int days) : start_(start) {
    const int hours = days * 24;
    cumulative_.reserve(static_cast<std::size_t>(hours) + 1);
    cumulative_.push_back(0);
    double sum = 0;
    for (int h = 0; h < hours; ++h) {
      const Millis t = start + static_cast<Millis>(h) * 3'600'000;
      const double growth = 0.6 + 0.8 * static_cast<double>(h) / hours;
      const int hour_of_day = static_cast<int>((t / 3'600'000) % 24);
      const double daily = 1.0 + 0.6 * std::cos(2 * std::numbers::pi * (hour_of_day - 15) / 24.0);
      const int weekday = static_cast<int>(((t / kDayMs) + 4) % 7);  // 1970-01-01 was a Thursday (4)
      const double weekly = weekday == 0 || weekday == 6 ? 0.5 : 1.0;
      sum += growth * daily * weekly;
      cumulative_.push_back(sum);
    }
  }
  // The time at fraction u (0..1) of all arrivals.
  Millis at(double u) const {
    const double target = u * cumulative_.back();
    auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), target);
    std::size_t h = std::clamp<std::size_t>(static_cast<std::size_t>(it - cumulative_.begin()), 1, cumulative_.size() - 1) - 1;
    const double span = cumulative_[h + 1] - cumulative_[h];
    const double frac = span > 0 ? (target - cumulative_[h]) / span : 0;
    return start_ + static_cast<Millis>((static_cast<double>(h) + std::clamp(frac, 0.0, 1.0)) * 3'600'000.0);
  }

 private:
  Millis start_;
  std::vector<double> cumulative_;
};

Millis seconds(double s) { return static_cast<Millis>(s * 1000.0); }

}  // namespace

// ---------------------------------------------------------------------- Rng

std::uint64_t Rng::next() {
  s_ += 0x9E3779B97F4A7C15ULL;
  std::uint64_t z = s_;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

double Rng::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::int64_t Rng::below(std::int64_t n) { return n <= 1 ? 0 : static_cast<std::int64_t>(next() % static_cast<std::uint64_t>(n)); }

double Rng::normal() {
  // Box-Muller; u1 in (0, 1] so that log is finite.
  const double u1 = 1.0 - uniform();
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * std::numbers::pi * u2);
}

double Rng::lognormal(double median, double sigma) { return median * std::exp(sigma * normal()); }

std::size_t Rng::pick(const std::vector<double>& cumulative) {
  const double x = uniform() * cumulative.back();
  auto it = std::upper_bound(cumulative.begin(), cumulative.end(), x);
  return std::min<std::size_t>(static_cast<std::size_t>(it - cumulative.begin()), cumulative.size() - 1);
}

// ------------------------------------------------------------------- months

Millis month_start(Millis t, int months) {
  using namespace std::chrono;
  const year_month_day ymd{floor<days>(sys_time<milliseconds>(milliseconds(t)))};
  const year_month first = year_month{ymd.year(), ymd.month()} + std::chrono::months(months);
  const sys_days d{first / 1};
  return duration_cast<milliseconds>(d.time_since_epoch()).count();
}

// ---------------------------------------------------------------- usage_of

// Products of bytes and milliseconds overflow 64 bits (2 TiB for a day).
__extension__ using Wide = __int128;

std::vector<UsageRow> usage_of(const Task& task, const Attempt& a) {
  // Mirrors cp::internal::usage_of (src/server/internal.cpp) line for line;
  // the bench does not link the server layer.
  std::vector<UsageRow> rows;
  if (a.started_at == 0 || a.finished_at <= a.started_at) return rows;
  const Resources total = a.resources.times(static_cast<std::int64_t>(std::max<std::size_t>(1, a.placements.size())));
  const auto gpus = static_cast<Wide>(total.gpus());
  const auto cpu_milli = static_cast<Wide>(total.cpu_milli());
  const auto memory_bytes = static_cast<Wide>(total.memory_bytes());
  for (Millis s = a.started_at; s < a.finished_at;) {
    const Millis day = day_start(s);
    const Millis e = std::min(a.finished_at, day + kDayMs);
    const auto ms = static_cast<Wide>(e - s);
    UsageRow r;
    r.day = day;
    r.project_group = task.project_group;
    r.resource_group = task.resource_group;
    r.cluster = a.cluster_id;
    r.user = task.user;
    r.gpu_type = total.gpus() > 0 ? total.gpu_type() : "";
    r.outcome = name_of(a.state);
    r.attempts = s == a.started_at ? 1 : 0;
    r.gpu_ms = static_cast<std::int64_t>(gpus * ms);
    r.cpu_core_ms = static_cast<std::int64_t>(cpu_milli * ms / 1000);
    r.memory_mib_s = static_cast<std::int64_t>(memory_bytes * ms / (Wide{1 << 20} * 1000));
    rows.push_back(std::move(r));
    s = e;
  }
  return rows;
}

// ---------------------------------------------------------------- the world

Generator::Generator(std::uint64_t seed, std::int64_t tasks, Millis now, WorldShape shape)
    : seed_(seed), tasks_(tasks), now_(now), start_(now - static_cast<Millis>(shape.days) * kDayMs) {
  Rng r(stream_seed(seed, kWorld));
  World& w = world_;
  char buf[64];
  for (int c = 0; c < shape.clusters; ++c) {
    std::snprintf(buf, sizeof buf, "%s-%02d", kRegions[static_cast<std::size_t>(c) % kRegions.size()].c_str(),
                  c / static_cast<int>(kRegions.size()) + 1);
    w.clusters.emplace_back(buf);
    // 35% A100, 25% H100, 15% L40S clusters; the rest have two of them.
    std::vector<std::string> types;
    const double u = r.uniform();
    if (u < 0.35) types = {kGpuTypes[0]};
    else if (u < 0.60) types = {kGpuTypes[1]};
    else if (u < 0.75) types = {kGpuTypes[2]};
    else types = {kGpuTypes[0], kGpuTypes[static_cast<std::size_t>(1 + r.below(2))]};
    w.cluster_gpu_types.push_back(std::move(types));
  }
  for (int g = 0; g < shape.resource_groups; ++g) {
    std::snprintf(buf, sizeof buf, g < shape.project_groups ? "rg-team-%03d" : "rg-pool-%03d", g);
    w.resource_groups.emplace_back(buf);
    std::vector<int> clusters;
    const int n = 1 + static_cast<int>(r.below(3));
    while (static_cast<int>(clusters.size()) < n) {
      int c = static_cast<int>(r.below(shape.clusters));
      if (std::find(clusters.begin(), clusters.end(), c) == clusters.end()) clusters.push_back(c);
    }
    w.rg_clusters.push_back(std::move(clusters));
  }
  // Project groups: Zipf shares (s = 1), so a few teams submit most of the work.
  std::vector<double> weights;
  for (int g = 0; g < shape.project_groups; ++g) {
    std::snprintf(buf, sizeof buf, "proj-%03d", g);
    w.project_groups.emplace_back(buf);
    weights.push_back(1.0 / (g + 1));
    w.pg_default_rg.push_back(g % shape.resource_groups);
    std::vector<int> extra;
    const int n = 1 + static_cast<int>(r.below(3));
    const int pool = std::max(1, shape.resource_groups - shape.project_groups);
    while (static_cast<int>(extra.size()) < n) {
      int rg = shape.project_groups + static_cast<int>(r.below(pool));
      if (rg >= shape.resource_groups) rg = static_cast<int>(r.below(shape.resource_groups));
      if (std::find(extra.begin(), extra.end(), rg) == extra.end()) extra.push_back(rg);
    }
    w.pg_extra_rgs.push_back(std::move(extra));
  }
  w.pg_cumulative = cumulative(weights);
  // Users: every group has a first member; the others join groups in
  // proportion to the square root of their size (big teams, more people),
  // and 40% of users are in a second or third group as well.
  std::vector<double> sqrt_weights;
  for (double x : weights) sqrt_weights.push_back(std::sqrt(x));
  const auto sqrt_cumulative = cumulative(sqrt_weights);
  w.pg_members.resize(weights.size());
  for (int u = 0; u < shape.users; ++u) {
    std::snprintf(buf, sizeof buf, "user-%04d", u);
    w.users.emplace_back(buf);
    std::vector<int> groups;
    groups.push_back(u < shape.project_groups ? u : static_cast<int>(r.pick(sqrt_cumulative)));
    const int more = r.chance(0.3) ? 1 : r.chance(0.15) ? 2 : 0;
    for (int k = 0; k < more; ++k) {
      int g = static_cast<int>(r.pick(sqrt_cumulative));
      if (std::find(groups.begin(), groups.end(), g) == groups.end()) groups.push_back(g);
    }
    for (int g : groups) w.pg_members[static_cast<std::size_t>(g)].push_back(u);
    w.user_groups.push_back(std::move(groups));
  }

  // Pipelines: 1 step (58%), 2 (17%), 3 (12%), 4 (7%), 5-8 (6%), until
  // there are `tasks` tasks (the last one cut short).
  Rng sizes(stream_seed(seed, kSizes));
  for (std::int64_t n = 0; n < tasks;) {
    const double u = sizes.uniform();
    std::int64_t k = u < 0.58 ? 1 : u < 0.75 ? 2 : u < 0.87 ? 3 : u < 0.94 ? 4 : 5 + sizes.below(4);
    k = std::min(k, tasks - n);
    pipeline_first_.push_back(n);
    n += k;
  }
  // Submission times: sorted uniforms (cumulative exponential gaps,
  // normalised) mapped through the arrival rate.
  const std::size_t pipelines = pipeline_first_.size();
  Rng gaps(stream_seed(seed, kTimes));
  double total = 0;
  for (std::size_t i = 0; i <= pipelines; ++i) total += -std::log(1.0 - gaps.uniform());
  Rng again(stream_seed(seed, kTimes));
  const Arrivals arrivals(start_, shape.days);
  pipeline_created_.reserve(pipelines);
  double sum = 0;
  for (std::size_t i = 0; i < pipelines; ++i) {
    sum += -std::log(1.0 - again.uniform());
    pipeline_created_.push_back(std::min(now_ - 1, arrivals.at(sum / total)));
  }
}

std::int64_t Generator::pipeline_of(std::int64_t task) const {
  auto it = std::upper_bound(pipeline_first_.begin(), pipeline_first_.end(), task);
  return static_cast<std::int64_t>(it - pipeline_first_.begin()) - 1;
}

std::string Generator::task_id(std::int64_t task) const {
  const Millis created = pipeline_created_[static_cast<std::size_t>(pipeline_of(task))];
  return make_id("t", created, static_cast<std::uint64_t>(task), mix(seed_ ^ mix(static_cast<std::uint64_t>(task))));
}

// ------------------------------------------------------------ the pipelines

namespace {

// internal::transition (src/server/internal.cpp): the task's new state and
// its "task.state" event.
Event transition(Task& task, TaskState to, Millis now, const std::string& actor, const std::string& message,
                 json::object data = {}) {
  CP_CHECK(can_transition(task.state, to), "generator: illegal task transition");
  const TaskState from = task.state;
  task.state = to;
  task.updated_at = now;
  if (to == TaskState::Queued) {
    task.queued_at = now;
    task.assigned_cluster.clear();
  }
  if (to == TaskState::Running && task.started_at == 0) task.started_at = now;
  if (is_terminal(to)) task.finished_at = now;
  if (to != TaskState::Queued) task.reasons.clear();
  Event ev;
  ev.at = now;
  ev.actor = actor;
  ev.object_kind = "task";
  ev.object_id = task.id;
  ev.type = "task.state";
  ev.from = name_of(from);
  ev.to = name_of(to);
  ev.message = message;
  ev.data = std::move(data);
  ev.data["pipeline_id"] = task.pipeline_id;
  ev.data["project_group"] = task.project_group;
  ev.data["resource_group"] = task.resource_group;
  if (!task.assigned_cluster.empty()) ev.data["cluster"] = task.assigned_cluster;
  return ev;
}

Event attempt_event(Millis at, const std::string& actor, const Attempt& a, const std::string& from,
                    const std::string& message, json::object data = {}) {
  Event ev;
  ev.at = at;
  ev.actor = actor;
  ev.object_kind = "attempt";
  ev.object_id = a.id;
  ev.type = "attempt.state";
  ev.from = from;
  ev.to = name_of(a.state);
  ev.message = message;
  ev.data = std::move(data);
  return ev;
}

const char* kStepNames[] = {"prepare", "train", "evaluate", "export", "publish", "report", "archive", "notify"};
const char* kModules[] = {"trainer.main", "data.prepare", "eval.run", "export.onnx", "serve.publish"};

struct StepResources {
  Resources per_replica;
  int replicas = 1;
  bool long_running = false;
};

StepResources draw_resources(Rng& r, const std::vector<std::string>& gpu_types) {
  StepResources s;
  if (r.chance(0.25)) {
    const std::int64_t cores = std::int64_t{2} << r.below(4);  // 2, 4, 8, 16
    s.per_replica.set("cpu", cores * 1000);
    s.per_replica.set("memory", cores * (std::int64_t{4} << 30));
    return s;
  }
  const double u = r.uniform();
  const std::int64_t gpus = u < 0.40 ? 1 : u < 0.60 ? 2 : u < 0.75 ? 4 : 8;
  s.per_replica.set("gpu/" + gpu_types[static_cast<std::size_t>(r.below(static_cast<std::int64_t>(gpu_types.size())))],
                    gpus);
  s.per_replica.set("cpu", gpus * 12'000);
  s.per_replica.set("memory", gpus * (std::int64_t{96} << 30));
  if (gpus == 8 && r.chance(0.35)) s.replicas = 2 + static_cast<int>(r.below(7));  // a gang of 2-8 nodes
  s.long_running = gpus >= 8;
  return s;
}

}  // namespace

std::vector<GeneratedTask> Generator::make_pipeline(std::int64_t p) const {
  const auto pi = static_cast<std::size_t>(p);
  Rng r(stream_seed(seed_, kPipeline, static_cast<std::uint64_t>(p)));
  const World& w = world_;
  const std::int64_t first = pipeline_first_[pi];
  const std::int64_t size =
      (pi + 1 < pipeline_first_.size() ? pipeline_first_[pi + 1] : tasks_) - first;
  const Millis created = pipeline_created_[pi];
  const Millis age = now_ - created;

  const auto pg = static_cast<int>(r.pick(w.pg_cumulative));
  const auto& members = w.pg_members[static_cast<std::size_t>(pg)];
  const int user = members[static_cast<std::size_t>(r.below(static_cast<std::int64_t>(members.size())))];
  const auto& extras = w.pg_extra_rgs[static_cast<std::size_t>(pg)];
  const int rg = r.chance(0.65) ? w.pg_default_rg[static_cast<std::size_t>(pg)]
                                : extras[static_cast<std::size_t>(r.below(static_cast<std::int64_t>(extras.size())))];
  const auto& rg_clusters = w.rg_clusters[static_cast<std::size_t>(rg)];
  const double pu = r.uniform();
  const PriorityChoice& priority = pu < 0.75 ? kPriorities[0] : pu < 0.90 ? kPriorities[1] : kPriorities[2];
  const std::string pipeline_id = make_id("p", created, static_cast<std::uint64_t>(p), mix(seed_ ^ ~static_cast<std::uint64_t>(p)));
  const std::string& pg_name = w.project_groups[static_cast<std::size_t>(pg)];
  const std::string& rg_name = w.resource_groups[static_cast<std::size_t>(rg)];
  const std::string& user_name = w.users[static_cast<std::size_t>(user)];
  const int experiment = static_cast<int>(r.below(10'000));
  // A backlog: recent pipelines of busy groups wait long, and their first
  // step runs for days. This is what leaves a few % of the tasks Queued or
  // Running at the end of the year.
  const bool backlog = r.chance(0.8 * std::exp(-static_cast<double>(age) / (15.0 * kDayMs)));

  std::vector<GeneratedTask> out;
  out.reserve(static_cast<std::size_t>(size));
  // How the previous step ended: its tasks' dependents follow it.
  enum class Upstream { none, succeeded, failed, cancelled, live } upstream = Upstream::none;
  Millis upstream_end = created;
  std::string upstream_actor;

  for (std::int64_t j = 0; j < size; ++j) {
    const std::int64_t index = first + j;
    GeneratedTask g;
    Task& t = g.task;
    t.id = task_id(index);
    t.pipeline_id = pipeline_id;
    t.name = size == 1 ? "run" : kStepNames[j];
    t.project_group = pg_name;
    t.resource_group = rg_name;
    t.priority_class = priority.name;
    t.priority = priority.value;
    t.user = user_name;
    const int home = rg_clusters[static_cast<std::size_t>(r.below(static_cast<std::int64_t>(rg_clusters.size())))];
    const std::string& cluster = w.clusters[static_cast<std::size_t>(home)];
    const StepResources res = draw_resources(r, w.cluster_gpu_types[static_cast<std::size_t>(home)]);
    Step& s = t.step;
    s.name = t.name;
    s.command = {"python", "-m", kModules[r.below(5)], "--config",
                 "configs/" + pg_name + "/exp-" + std::to_string(experiment) + ".yaml"};
    s.image = "registry.internal/" + pg_name + "/trainer:2026." + std::to_string(1 + r.below(12)) + "." +
              std::to_string(r.below(20));
    s.env = {{"PROJECT", pg_name}, {"EXPERIMENT", std::to_string(experiment)}};
    s.resources = res.per_replica;
    s.replicas = res.replicas;
    s.checkpoint = res.long_running;
    s.max_retries = r.chance(0.2) ? 1 : 0;
    if (j > 0) {
      s.depends_on = {out.back().task.step.name};
      t.depends_on = {out.back().task.id};
    }
    t.state = TaskState::Queued;
    t.created_at = t.updated_at = t.queued_at = created;

    auto emit = [&](Event ev, std::vector<UsageRow> usage = {}) { g.events.push_back({std::move(ev), std::move(usage)}); };
    json::object submitted;
    submitted["pipeline_id"] = pipeline_id;
    submitted["project_group"] = pg_name;
    submitted["resource_group"] = rg_name;
    Event submit;
    submit.at = created;
    submit.actor = user_name;
    submit.object_kind = "task";
    submit.object_id = t.id;
    submit.type = "task.state";
    submit.from = "";
    submit.to = "Queued";
    submit.message = "submitted";
    submit.data = std::move(submitted);
    emit(std::move(submit));

    // Draws made for every task, used or not, so that one task's path does
    // not shift the next one's draws.
    const double outcome_u = r.uniform();
    const double path_u = r.uniform();
    const double first_wait = backlog && j == 0 ? static_cast<double>(age) * r.uniform(0.1, 1.4)
                                                : std::clamp(r.lognormal(90'000, 1.8), 1'000.0, 3.0 * kDayMs);
    const double duration = backlog && j == 0 ? std::clamp(r.lognormal(6.0 * kDayMs, 0.8), 3'600'000.0, 45.0 * kDayMs)
                                              : std::clamp(r.lognormal(res.long_running ? 75 * 60'000.0 : 25 * 60'000.0, 1.6),
                                                           20'000.0, 7.0 * kDayMs);

    if (upstream == Upstream::failed || upstream == Upstream::cancelled) {
      // cancel_dependents, in the transaction that ended the upstream task.
      if (upstream_end <= now_) {
        emit(transition(t, TaskState::Cancelled, upstream_end, upstream_actor,
                        "upstream task " + out.back().task.id + " did not succeed"));
      } else {
        t.reasons = {sched::reasons::dependencies(t.depends_on)};
        upstream = Upstream::live;
      }
      out.push_back(std::move(g));
      continue;
    }
    if (upstream == Upstream::live) {
      t.reasons = {sched::reasons::dependencies(t.depends_on)};
      out.push_back(std::move(g));
      continue;
    }
    const Millis ready = j == 0 ? created : upstream_end;

    // The attempts' ends, in order: 94% succeed (5% of them after a
    // preemption, some after a failed try), 4% fail (retried once when the
    // step allows it), 2% are cancelled (40% of those while still queued).
    // A failed or cancelled step cancels the rest of its pipeline.
    std::vector<AttemptState> plan;
    bool cancel_queued = false;
    if (outcome_u < 0.94) {
      if (path_u < 0.05) plan = {AttemptState::Preempted, AttemptState::Succeeded};
      else if (s.max_retries > 0 && path_u < 0.15) plan = {AttemptState::Failed, AttemptState::Succeeded};
      else plan = {AttemptState::Succeeded};
    } else if (outcome_u < 0.98) {
      plan = s.max_retries > 0 ? std::vector<AttemptState>{AttemptState::Failed, AttemptState::Failed}
                               : std::vector<AttemptState>{AttemptState::Failed};
    } else if (path_u < 0.4) {
      cancel_queued = true;
    } else {
      plan = {AttemptState::Cancelled};
    }

    auto quota_reason = [&] {
      // The figures hold views: the resource's name must outlive them.
      const std::string gpu = res.per_replica.gpu_type();
      const std::string resource = gpu.empty() ? "cpu" : "gpu/" + gpu;
      sched::reasons::QuotaFigures f;
      f.resource_group = rg_name;
      f.resource = resource;
      f.requested = gpu.empty() ? res.per_replica.cpu_milli() : res.per_replica.gpus() * res.replicas;
      f.guaranteed = f.limit = f.requested * (8 + r.below(56));
      f.used = f.limit - r.below(f.requested);
      const sched::reasons::NamedAmounts holders{{pg_name, f.used}};
      f.holders = holders;
      return sched::reasons::quota(f);
    };
    // Ends the task's history at `now` in its current state.
    auto live = [&] {
      upstream = Upstream::live;
      if (t.state == TaskState::Queued && t.reasons.empty()) t.reasons = {quota_reason()};
      for (auto& a : g.attempts) {
        if (!is_terminal(a.state)) a.lease_renewed_at = now_ - r.below(10'000);
      }
    };

    Millis queued_since = ready;
    if (cancel_queued) {
      const Millis at = queued_since + static_cast<Millis>(first_wait * r.uniform(0.2, 1.0));
      if (at > now_) {
        live();
      } else {
        t.cancel_requested = true;
        t.reasons = {PendingReason{"cancelled", "cancelled by " + user_name, "已被 " + user_name + " 取消", {}}};
        emit(transition(t, TaskState::Cancelled, at, user_name, "cancelled by " + user_name));
        upstream = Upstream::cancelled;
        upstream_end = at;
        upstream_actor = user_name;
      }
      out.push_back(std::move(g));
      continue;
    }

    bool ended = false;
    for (std::size_t k = 0; k < plan.size() && !ended; ++k) {
      const int number = static_cast<int>(k) + 1;
      const Millis wait = k == 0 ? static_cast<Millis>(first_wait) : static_cast<Millis>(r.lognormal(300'000, 1.2));
      const Millis dispatched = queued_since + wait;
      const Millis started = dispatched + seconds(r.uniform(2, 25));
      const double run_fraction = plan[k] == AttemptState::Succeeded ? 1.0 : r.uniform(0.02, 0.95);
      const Millis stop_at = started + static_cast<Millis>(duration * run_fraction);  // end, preemption or cancel
      const Millis grace_end = stop_at + seconds(r.uniform(1, 30));
      if (dispatched > now_) {
        live();
        break;
      }
      // scheduling.cpp place(): the attempt, and Queued -> Dispatched.
      Attempt a;
      a.number = number;
      a.id = t.id + "." + std::to_string(number);
      a.task_id = t.id;
      a.epoch = number;
      a.cluster_id = cluster;
      const std::int64_t gpus = res.per_replica.gpus();
      for (int rep = 0; rep < res.replicas; ++rep) {
        ReplicaPlacement rp;
        rp.replica = rep;
        char node[64];
        std::snprintf(node, sizeof node, "%s-n%04d", cluster.c_str(), static_cast<int>(r.below(160)));
        rp.node = node;
        const std::int64_t base = gpus > 0 ? gpus * r.below(8 / gpus) : 0;
        for (std::int64_t gi = 0; gi < gpus; ++gi) rp.gpu_indices.push_back(static_cast<int>(base + gi));
        a.placements.push_back(std::move(rp));
      }
      a.resources = res.per_replica;
      a.state = AttemptState::Dispatched;
      a.created_at = dispatched;
      a.lease_renewed_at = dispatched;
      t.attempts = number;
      t.current_attempt = a.id;
      t.assigned_cluster = cluster;
      json::object data;
      data["attempt"] = a.id;
      json::array nodes;
      for (const auto& rp : a.placements) nodes.push_back(json::string(rp.node));
      data["nodes"] = std::move(nodes);
      data["shape"] = 0;
      data["borrowing"] = false;
      emit(transition(t, TaskState::Dispatched, dispatched, "scheduler",
                      "placed on " + cluster + "/" + a.placements.front().node, std::move(data)));
      g.attempts.push_back(a);
      Attempt& att = g.attempts.back();
      const std::string agent = "agent:" + cluster;
      if (started > now_) {
        live();
        break;
      }
      // agents.cpp: the first Running report. The server also appends a
      // Dispatched -> Running task.state event here; the bench leaves it out
      // (see docs/benchmarks.md) and applies the state change alone.
      att.state = AttemptState::Running;
      att.started_at = started;
      (void)transition(t, TaskState::Running, started, agent, "attempt " + std::to_string(number) + " started");
      if (stop_at > now_) {
        live();
        break;
      }
      std::string agent_message;
      if (plan[k] == AttemptState::Preempted) {
        // scheduling.cpp preempt(): Stopping, and the task Preempting.
        const std::string preemptor = make_id("t", stop_at, static_cast<std::uint64_t>(index) ^ 0xABCDE, r.next());
        att.state = AttemptState::Stopping;
        att.stop_reason = "preempt";
        att.message = "preempted by " + preemptor + " (urgent, priority 500 > " + std::to_string(priority.value) + ")";
        json::object adata;
        adata["stop_reason"] = "preempt";
        adata["preemptor"] = preemptor;
        emit(attempt_event(stop_at, "scheduler", att, "Running", att.message, std::move(adata)));
        json::object tdata;
        tdata["attempt"] = att.id;
        tdata["preemptor"] = preemptor;
        tdata["kind"] = "priority";
        tdata["message_zh"] = "被 " + preemptor + " 抢占";
        emit(transition(t, TaskState::Preempting, stop_at, "scheduler", att.message, std::move(tdata)));
        agent_message = "stopped (SIGTERM)";
      } else if (plan[k] == AttemptState::Cancelled) {
        // pipelines.cpp cancel: the attempt is told to stop.
        t.cancel_requested = true;
        att.state = AttemptState::Stopping;
        att.stop_reason = "cancel";
        t.updated_at = stop_at;
        Event ev;
        ev.at = stop_at;
        ev.actor = user_name;
        ev.object_kind = "task";
        ev.object_id = t.id;
        ev.type = "task.cancel_requested";
        ev.message = "cancel requested; the agent stops attempt " + att.id;
        emit(std::move(ev));
        agent_message = "cancelled";
      }
      const bool stops_later = plan[k] == AttemptState::Preempted || plan[k] == AttemptState::Cancelled;
      const Millis finished = stops_later ? grace_end : stop_at;
      if (finished > now_) {
        live();
        break;
      }
      // agents.cpp finish_attempt(): the attempt's end, its ledger rows, and
      // the task's transition.
      std::optional<int> exit_code;
      switch (plan[k]) {
        case AttemptState::Succeeded: exit_code = 0; break;
        case AttemptState::Failed: {
          const int codes[] = {1, 1, 1, 2, 137, 139};
          exit_code = codes[r.below(6)];
          agent_message = *exit_code == 137 ? "OOMKilled (exit code 137)" : "exit code " + std::to_string(*exit_code);
          break;
        }
        default: exit_code = 143; break;
      }
      const bool preempted = plan[k] == AttemptState::Preempted;
      att.state = plan[k];
      att.exit_code = exit_code;
      att.finished_at = finished;
      att.lease_renewed_at = finished;
      if (!preempted) att.message = agent_message;
      else att.message += " (" + agent_message + ")";
      emit(attempt_event(finished, agent, att, "", agent_message), usage_of(t, att));
      t.exit_code = exit_code;
      switch (plan[k]) {
        case AttemptState::Succeeded:
          emit(transition(t, TaskState::Succeeded, finished, agent, agent_message));
          upstream = Upstream::succeeded;
          upstream_end = finished;
          ended = true;
          break;
        case AttemptState::Cancelled:
          t.reasons = {PendingReason{"cancelled", "cancelled", "已取消", {}}};
          emit(transition(t, TaskState::Cancelled, finished, agent, agent_message));
          upstream = Upstream::cancelled;
          upstream_end = finished;
          upstream_actor = agent;
          ended = true;
          break;
        case AttemptState::Failed:
          if (k + 1 < plan.size()) {
            ++t.retries;
            t.reasons = {PendingReason{"retrying",
                                       "attempt " + std::to_string(number) + " failed (" + agent_message +
                                           "); retry " + std::to_string(t.retries) + " of " +
                                           std::to_string(s.max_retries),
                                       "第 " + std::to_string(number) + " 次尝试失败（" + agent_message + "）；重试 " +
                                           std::to_string(t.retries) + "/" + std::to_string(s.max_retries),
                                       {}}};
            emit(transition(t, TaskState::Queued, finished, agent, "retry after failure: " + agent_message));
            queued_since = finished;
          } else {
            t.reasons = {PendingReason{"failed", agent_message, agent_message, {}}};
            emit(transition(t, TaskState::Failed, finished, agent, agent_message));
            upstream = Upstream::failed;
            upstream_end = finished;
            upstream_actor = agent;
            ended = true;
          }
          break;
        default:  // Preempted: back to the queue, to resume from its checkpoint
          t.reasons = {PendingReason{"requeued_after_preemption",
                                     "attempt " + std::to_string(number) + " was preempted (" + att.message +
                                         "); waiting for a new placement to resume",
                                     "第 " + std::to_string(number) + " 次尝试被抢占（" + att.message +
                                         "）；等待重新调度以恢复",
                                     {}}};
          emit(transition(t, TaskState::Queued, finished, agent, att.message));
          queued_since = finished;
          break;
      }
    }
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace cp::bench
