// cubeplane-bench-store: the store at 10 million tasks.
//
//   1. load: a year of generated history (generator.h) written through the
//      Store/Tx interface as the server writes it, in large transactions;
//      on PostgreSQL optionally by COPY (--load copy) of the same rows;
//   2. ANALYZE, then a sample of tasks read back (get_task, attempts_of_task,
//      list_events) must equal what was generated;
//   3. the task list page (Tx::list_tasks, limit 50, one Store::read each) in
//      the shapes the API and UI ask for, the month's usage grouped by
//      project group and cluster (Tx::usage_totals), and the events after a
//      recent id (Tx::list_events, limit 100): p50/p99/max per shape;
//   4. every page is checked (filter and order), a sample of them against
//      the generated tasks, and every month's sums against the generator's.
//
// The last line is for scripts and CI, always in this form when every check
// passed (otherwise an ERROR line comes last):
//   list_p99_ms=X usage_p99_ms=X events_p99_ms=X tasks=N backend=B
// Targets are judged in docs/benchmarks.md, never asserted here.
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "database.h"
#include "generator.h"
#include "store/row_codec.h"
#include "store/shared_sql.h"
#include "store/store.h"
#include "store/task_cursor.h"

namespace cp::bench {
namespace {

using SteadyClock = std::chrono::steady_clock;

struct Options {
  std::string store;
  std::int64_t tasks = 10'000'000;
  std::uint64_t seed = 1;
  bool quick = false;
  int batch = 10'000;
  int samples = 1000;
  int usage_samples = 50;
  int event_samples = 1000;
  int verify_pages = 30;  // pages per shape compared with the generated tasks (--quick: all)
  int verify_tasks = 1000;
  std::string load = "tx";
  bool skip_load = false;
  bool explain = false;
  bool table_sizes = false;
  int nice = 0;  // for the measurements: this thread and the server processes of our connections
};

// "2.31 3.02 2.87 ..." from /proc/loadavg, with its newline.
std::string load_average() {
  std::FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return "?\n";
  char buf[128] = {};
  const char* got = std::fgets(buf, sizeof buf, f);
  std::fclose(f);
  return got ? buf : "?\n";
}

double since_ms(SteadyClock::time_point start) {
  return std::chrono::duration<double, std::milli>(SteadyClock::now() - start).count();
}

// Nearest rank: the smallest value with at least p of the samples at or below it.
double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto rank = static_cast<std::size_t>(std::ceil(p * static_cast<double>(v.size())));
  return v[std::clamp<std::size_t>(rank, 1, v.size()) - 1];
}

std::string thousands(std::int64_t n) {
  std::string s = std::to_string(n < 0 ? -n : n);
  for (int i = static_cast<int>(s.size()) - 3; i > 0; i -= 3) s.insert(static_cast<std::size_t>(i), ",");
  return n < 0 ? "-" + s : s;
}

// Checks that failed: printed as they happen, counted for the last line.
struct Failures {
  int count = 0;
  void add(const std::string& what) {
    if (++count <= 20) std::printf("CHECK FAILED: %s\n", what.c_str());
  }
};

// ------------------------------------------------------------------- load

struct Loaded {
  std::vector<TaskKey> keys;
  std::map<TaskState, std::int64_t> states;
  std::int64_t attempts = 0, events = 0, usage_rows = 0;
  std::map<std::tuple<Millis, std::string, std::string>, UsageSums> usage;  // day, project group, cluster
  double load_ms = 0, db_ms = 0, generate_ms = 0;  // wall, wall writing, CPU generating
};

Status write_batch(Store& store, Database& db, const Options& o, const Batch& b) {
  if (o.load == "copy") return db.copy_batch(b);
  return store.write([&](Tx& tx) -> Status {
    for (const auto& t : b.tasks) CP_TRY(tx.insert_task(t));
    for (const auto& a : b.attempts) CP_TRY(tx.insert_attempt(a));
    for (const auto& e : b.events) {
      CP_ASSIGN(auto id, tx.append_event(e.event));
      (void)id;
      if (!e.usage.empty()) CP_TRY(tx.add_usage(e.usage));
    }
    return {};
  });
}

// Batches from the generating thread to the writing one; at most two wait.
class BatchQueue {
 public:
  void push(Batch b) {
    std::unique_lock lock(mu_);
    space_.wait(lock, [&] { return queue_.size() < 2 || closed_; });
    if (closed_) return;
    queue_.push_back(std::move(b));
    ready_.notify_one();
  }
  std::optional<Batch> pop() {
    std::unique_lock lock(mu_);
    ready_.wait(lock, [&] { return !queue_.empty() || done_; });
    if (queue_.empty()) return std::nullopt;
    Batch b = std::move(queue_.front());
    queue_.pop_front();
    space_.notify_one();
    return b;
  }
  void finish() {  // the producer has pushed its last batch
    std::lock_guard lock(mu_);
    done_ = true;
    ready_.notify_all();
  }
  void close() {  // the consumer gives up: the producer stops at its next push
    std::lock_guard lock(mu_);
    closed_ = true;
    space_.notify_all();
  }
  bool closed() {
    std::lock_guard lock(mu_);
    return closed_;
  }

 private:
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::deque<Batch> queue_;
  bool done_ = false, closed_ = false;
};

// Walks the pipelines in order of submission. Each event is appended when
// the history reaches its time (a min-heap of what is due later), so event
// ids increase with time as the server's do; a task's row is written once,
// in its final state, when it is submitted. One thread generates, this one
// writes.
Result<Loaded> load(const Generator& gen, Store& store, Database& db, const Options& o) {
  Loaded out;
  out.keys.resize(static_cast<std::size_t>(gen.task_count()));
  const bool writing = !o.skip_load;
  auto start = SteadyClock::now();
  BatchQueue queue;
  double generate_ms = 0;

  std::thread producer([&] {
    const double cpu_start = thread_cpu_ms();
    std::unordered_map<std::string, int> pg_index, rg_index;
    for (std::size_t i = 0; i < gen.world().project_groups.size(); ++i) pg_index[gen.world().project_groups[i]] = static_cast<int>(i);
    for (std::size_t i = 0; i < gen.world().resource_groups.size(); ++i) rg_index[gen.world().resource_groups[i]] = static_cast<int>(i);
    // The heap holds small entries; the events wait in a slab of reused slots.
    struct Pending {
      Millis at;
      std::uint64_t seq;
      std::size_t slot;
    };
    std::vector<TimedEvent> slab;
    std::vector<std::size_t> free_slots;
    auto later = [](const Pending& a, const Pending& b) { return std::tie(a.at, a.seq) > std::tie(b.at, b.seq); };
    std::vector<Pending> heap;
    std::uint64_t seq = 0;
    Batch batch;
    auto hand_over = [&] {
      queue.push(std::move(batch));
      batch = Batch();
    };

    for (std::int64_t p = 0; p < gen.pipeline_count() && !queue.closed(); ++p) {
      auto tasks = gen.make_pipeline(p);
      const Millis created = tasks.front().task.created_at;
      while (!heap.empty() && heap.front().at <= created) {
        std::pop_heap(heap.begin(), heap.end(), later);
        batch.events.push_back(std::move(slab[heap.back().slot]));
        free_slots.push_back(heap.back().slot);
        heap.pop_back();
      }
      std::int64_t index = gen.first_task_of(p);
      for (auto& g : tasks) {
        TaskKey& k = out.keys[static_cast<std::size_t>(index++)];
        k.created_at = g.task.created_at;
        k.project_group = static_cast<std::uint8_t>(pg_index.at(g.task.project_group));
        k.resource_group = static_cast<std::uint16_t>(rg_index.at(g.task.resource_group));
        k.state = static_cast<std::uint8_t>(g.task.state);
        out.states[g.task.state]++;
        out.attempts += static_cast<std::int64_t>(g.attempts.size());
        out.events += static_cast<std::int64_t>(g.events.size());
        for (auto& te : g.events) {
          for (const auto& r : te.usage) {
            auto& s = out.usage[{r.day, r.project_group, r.cluster}];
            s.attempts += r.attempts;
            s.gpu_ms += r.gpu_ms;
            s.cpu_core_ms += r.cpu_core_ms;
            s.memory_mib_s += r.memory_mib_s;
            ++out.usage_rows;
          }
          const Millis at = te.event.at;
          std::size_t slot;
          if (free_slots.empty()) {
            slot = slab.size();
            slab.push_back(std::move(te));
          } else {
            slot = free_slots.back();
            free_slots.pop_back();
            slab[slot] = std::move(te);
          }
          heap.push_back({at, seq++, slot});
          std::push_heap(heap.begin(), heap.end(), later);
        }
        batch.tasks.push_back(std::move(g.task));
        for (auto& a : g.attempts) batch.attempts.push_back(std::move(a));
      }
      if (static_cast<int>(batch.tasks.size()) >= o.batch) hand_over();
    }
    std::sort_heap(heap.begin(), heap.end(), later);  // descending by (at, seq)
    for (auto it = heap.rbegin(); it != heap.rend(); ++it) {
      batch.events.push_back(std::move(slab[it->slot]));
      if (batch.events.size() >= static_cast<std::size_t>(o.batch) * 4) hand_over();
    }
    hand_over();
    generate_ms = thread_cpu_ms() - cpu_start;
    queue.finish();
  });

  std::optional<Error> failed;
  std::int64_t done = 0, reported = 0;
  const std::int64_t report_every = std::max<std::int64_t>(100'000, gen.task_count() / 20);
  while (auto b = queue.pop()) {
    if (!failed && writing && (!b->tasks.empty() || !b->events.empty())) {
      auto t0 = SteadyClock::now();
      auto st = write_batch(store, db, o, *b);
      out.db_ms += since_ms(t0);
      if (!st.ok()) {
        failed = st.error();
        queue.close();
      }
    }
    done += static_cast<std::int64_t>(b->tasks.size());
    if (done - reported >= report_every) {
      reported = done;
      const double secs = since_ms(start) / 1000;
      std::printf("  %s tasks %s in %.0f s (%.0f tasks/s; writing %.0f%% of the time)\n", thousands(done).c_str(),
                  writing ? "loaded" : "generated", secs, static_cast<double>(done) / secs,
                  100.0 * out.db_ms / (since_ms(start) + 1e-9));
    }
  }
  producer.join();
  if (failed) return *failed;
  if (writing) CP_TRY(db.finish_copy());
  out.load_ms = since_ms(start);
  out.generate_ms = generate_ms;
  return out;
}

// ------------------------------------------------------------ the shapes

enum class Shape { all, group, group_running, group_failed, member, member_states, rg_state, pages_2_5 };
constexpr Shape kShapes[] = {Shape::all,    Shape::group,         Shape::group_running, Shape::group_failed,
                             Shape::member, Shape::member_states, Shape::rg_state,      Shape::pages_2_5};

const char* shape_name(Shape s) {
  switch (s) {
    case Shape::all: return "all tasks (admin)";
    case Shape::group: return "project group";
    case Shape::group_running: return "project group + Running";
    case Shape::group_failed: return "project group + Failed";
    case Shape::member: return "member (1-3 groups)";
    case Shape::member_states: return "member + 2-3 states";
    case Shape::rg_state: return "resource group + state";
    case Shape::pages_2_5: return "pages 2-5 (cursor)";
  }
  return "?";
}

class Queries {
 public:
  Queries(const Generator& gen, const std::vector<TaskKey>& keys) : gen_(gen), keys_(keys) {
    const World& w = gen.world();
    std::vector<double> rg_tasks(w.resource_groups.size(), 0);
    for (const auto& k : keys) rg_tasks[k.resource_group] += 1;
    double sum = 0;
    for (double n : rg_tasks) rg_cumulative_.push_back(sum += n);
    for (std::size_t i = 0; i < w.project_groups.size(); ++i) pg_index_[w.project_groups[i]] = static_cast<int>(i);
    for (std::size_t i = 0; i < w.resource_groups.size(); ++i) rg_index_[w.resource_groups[i]] = static_cast<int>(i);
  }

  TaskQuery make(Shape s, Rng& r) const {
    const World& w = gen_.world();
    TaskQuery q;
    q.limit = 50;
    auto group = [&] { return w.project_groups[r.pick(w.pg_cumulative)]; };
    auto member_groups = [&] {
      const auto& members = w.pg_members[r.pick(w.pg_cumulative)];
      const int user = members[static_cast<std::size_t>(r.below(static_cast<std::int64_t>(members.size())))];
      std::set<std::string> visible;
      for (int g : w.user_groups[static_cast<std::size_t>(user)]) visible.insert(w.project_groups[static_cast<std::size_t>(g)]);
      return visible;
    };
    switch (s) {
      case Shape::all: break;
      case Shape::group: q.project_group = group(); break;
      case Shape::group_running:
        q.project_group = group();
        q.states = {TaskState::Running};
        break;
      case Shape::group_failed:
        q.project_group = group();
        q.states = {TaskState::Failed};
        break;
      case Shape::member: q.project_groups = member_groups(); break;
      case Shape::member_states: {
        q.project_groups = member_groups();
        static const std::vector<std::set<TaskState>> kSets = {
            {TaskState::Queued, TaskState::Running},
            {TaskState::Failed, TaskState::Cancelled},
            {TaskState::Queued, TaskState::Running, TaskState::Preempting},
            {TaskState::Succeeded, TaskState::Failed, TaskState::Cancelled}};
        q.states = kSets[static_cast<std::size_t>(r.below(4))];
        break;
      }
      case Shape::rg_state: {
        q.resource_group = w.resource_groups[r.pick(rg_cumulative_)];
        static const TaskState kStates[] = {TaskState::Queued, TaskState::Running, TaskState::Failed};
        q.states = {kStates[r.below(3)]};
        break;
      }
      case Shape::pages_2_5: {
        static const Shape kBase[] = {Shape::all, Shape::group, Shape::member};
        return make(kBase[r.below(3)], r);
      }
    }
    return q;
  }

  bool matches(const TaskQuery& q, const Task& t) const {
    if (!q.states.empty() && !q.states.count(t.state)) return false;
    if (q.project_groups && !q.project_groups->count(t.project_group)) return false;
    if (!q.project_group.empty() && q.project_group != t.project_group) return false;
    if (!q.resource_group.empty() && q.resource_group != t.resource_group) return false;
    return true;
  }

  // The ids of the page the generated data says `q` must return, and
  // whether more follow. Scans the keys from the newest (they are in order
  // of submission), so it costs up to one pass over all tasks.
  std::pair<std::vector<std::string>, bool> expected(const TaskQuery& q) const {
    std::optional<TaskCursor> after;
    if (!q.cursor.empty()) after = decode_task_cursor(q.cursor).value();
    std::vector<char> pg_ok(gen_.world().project_groups.size(), 1);
    if (q.project_groups) {
      std::fill(pg_ok.begin(), pg_ok.end(), 0);
      for (const auto& g : *q.project_groups) pg_ok[static_cast<std::size_t>(pg_index_.at(g))] = 1;
    }
    if (!q.project_group.empty()) {
      const bool visible = pg_ok[static_cast<std::size_t>(pg_index_.at(q.project_group))];
      std::fill(pg_ok.begin(), pg_ok.end(), 0);
      pg_ok[static_cast<std::size_t>(pg_index_.at(q.project_group))] = visible;
    }
    const int rg = q.resource_group.empty() ? -1 : rg_index_.at(q.resource_group);
    const auto want = static_cast<std::size_t>(q.limit) + 1;
    std::vector<std::pair<Millis, std::string>> found;
    for (std::int64_t i = static_cast<std::int64_t>(keys_.size()) - 1; i >= 0; --i) {
      const TaskKey& k = keys_[static_cast<std::size_t>(i)];
      if (found.size() >= want && k.created_at < found.back().first) break;
      if (after && k.created_at > after->created_at) continue;
      if (!pg_ok[k.project_group]) continue;
      if (rg >= 0 && k.resource_group != rg) continue;
      if (!q.states.empty() && !q.states.count(static_cast<TaskState>(k.state))) continue;
      std::string id = gen_.task_id(i);
      if (after && k.created_at == after->created_at && id >= after->id) continue;
      found.emplace_back(k.created_at, std::move(id));
    }
    std::sort(found.begin(), found.end(), [](const auto& a, const auto& b) { return a > b; });
    const bool more = found.size() > static_cast<std::size_t>(q.limit);
    std::vector<std::string> ids;
    for (std::size_t i = 0; i < found.size() && i < static_cast<std::size_t>(q.limit); ++i) ids.push_back(found[i].second);
    return {ids, more};
  }

 private:
  const Generator& gen_;
  const std::vector<TaskKey>& keys_;
  std::vector<double> rg_cumulative_;
  std::unordered_map<std::string, int> pg_index_, rg_index_;
};

std::string describe(const TaskQuery& q) {
  std::string s;
  if (!q.project_group.empty()) s += " project_group=" + q.project_group;
  if (q.project_groups) {
    s += " visible={";
    for (const auto& g : *q.project_groups) s += g + ",";
    s += "}";
  }
  if (!q.resource_group.empty()) s += " resource_group=" + q.resource_group;
  if (!q.states.empty()) {
    s += " states={";
    for (auto st : q.states) s += enum_name(st) + ",";
    s += "}";
  }
  if (!q.cursor.empty()) s += " cursor=" + q.cursor;
  return s.empty() ? " (no filter)" : s;
}

// ---------------------------------------------------------------- measure

struct ShapeFigures {
  std::vector<double> ms, cpu_ms;
  std::int64_t rows = 0;
  std::vector<std::pair<TaskQuery, TaskPage>> kept;  // checked against the generated data afterwards
};

struct Timed {
  TaskPage page;
  double ms = 0, cpu_ms = 0;
};

Result<Timed> timed_list(Store& store, const TaskQuery& q) {
  Timed t;
  const double cpu = thread_cpu_ms();
  auto start = SteadyClock::now();
  CP_TRY(store.read([&](Tx& tx) -> Status {
    CP_ASSIGN(t.page, tx.list_tasks(q));
    return {};
  }));
  t.ms = since_ms(start);
  t.cpu_ms = thread_cpu_ms() - cpu;
  return t;
}

// What every page must satisfy, whatever the data: the filter and the order.
void check_page(const Queries& queries, const TaskQuery& q, const TaskPage& page, Failures& failures) {
  if (page.items.size() > static_cast<std::size_t>(q.limit)) failures.add("page longer than its limit:" + describe(q));
  if (page.items.size() < static_cast<std::size_t>(q.limit) && !page.next_cursor.empty()) {
    failures.add("short page with a next cursor:" + describe(q));
  }
  for (std::size_t i = 0; i < page.items.size(); ++i) {
    const Task& t = page.items[i];
    if (!queries.matches(q, t)) failures.add("task " + t.id + " does not match" + describe(q));
    if (i > 0) {
      const Task& prev = page.items[i - 1];
      if (std::tie(prev.created_at, prev.id) <= std::tie(t.created_at, t.id)) {
        failures.add("page not in (created_at, id) descending order at " + t.id + ":" + describe(q));
      }
    }
  }
}

// ------------------------------------------------------------------ run

int run(Options o) {
  const Millis now = std::chrono::duration_cast<std::chrono::milliseconds>(
                         std::chrono::sys_days{std::chrono::year{2026} / 12 / 1}.time_since_epoch())
                         .count();
  std::string temp_dir;
  if (o.store.empty()) {
    if (!o.quick) {
      std::printf("ERROR: --store is required (sqlite:///abs/path or postgresql://...), or --quick\n");
      return 2;
    }
    char tmpl[] = "/tmp/cubeplane-bench-store-XXXXXX";
    if (!mkdtemp(tmpl)) {
      std::printf("ERROR: mkdtemp failed\n");
      return 2;
    }
    temp_dir = tmpl;
    o.store = "sqlite://" + temp_dir + "/bench.db";
  }
  struct Cleanup {
    std::string dir;
    ~Cleanup() {
      if (!dir.empty()) std::filesystem::remove_all(dir);
    }
  } cleanup{temp_dir};
  auto fail = [](const std::string& what, const Error& e) {
    std::printf("ERROR: %s: %s\n", what.c_str(), e.to_string().c_str());
    return 1;
  };

  auto opened = open_store(o.store);
  if (!opened.ok()) return fail("open_store", opened.error());
  std::unique_ptr<Store> store = std::move(opened).value();
  if (o.load == "copy" && store->backend() != "postgresql") {
    std::printf("ERROR: --load copy is for PostgreSQL only\n");
    return 2;
  }
  if (auto st = store->migrate(); !st.ok()) return fail("migrate", st.error());
  auto db_opened = Database::open(o.store);
  if (!db_opened.ok()) return fail("open the database", db_opened.error());
  std::unique_ptr<Database> db = std::move(db_opened).value();
  const std::string backend = store->backend();
  std::printf("store: %s, schema version %d; tasks %s, seed %llu, load %s%s\n", backend.c_str(),
              store->schema_version(), thousands(o.tasks).c_str(), static_cast<unsigned long long>(o.seed),
              o.skip_load ? "skipped (--skip-load: the data is there already)" : o.load.c_str(),
              o.skip_load ? "" : (", " + std::to_string(o.batch) + " tasks per transaction").c_str());

  if (!o.skip_load) {
    auto existing = db->count("tasks");
    if (!existing.ok()) return fail("count tasks", existing.error());
    if (existing.value() != 0) {
      std::printf("ERROR: the store already holds %s tasks; load into an empty database (or --skip-load)\n",
                  thousands(existing.value()).c_str());
      return 2;
    }
  }

  // 1. Generate and load.
  auto gen_start = SteadyClock::now();
  Generator gen(o.seed, o.tasks, now);
  std::printf("world: %zu project groups, %zu resource groups, %zu clusters, %zu users; %s pipelines over "
              "%.0f days (drawn in %.1f s)\n",
              gen.world().project_groups.size(), gen.world().resource_groups.size(), gen.world().clusters.size(),
              gen.world().users.size(), thousands(gen.pipeline_count()).c_str(),
              static_cast<double>(gen.now() - gen.start()) / kDayMs, since_ms(gen_start) / 1000);
  auto loaded_or = load(gen, *store, *db, o);
  if (!loaded_or.ok()) return fail("load", loaded_or.error());
  Loaded L = std::move(loaded_or).value();
  const double load_s = L.load_ms / 1000;
  const std::int64_t rows = o.tasks + L.attempts + L.events + L.usage_rows;
  std::printf("load: %s tasks, %s attempts, %s events, %s ledger additions (%.2f events per task) in %.1f s\n",
              thousands(o.tasks).c_str(), thousands(L.attempts).c_str(), thousands(L.events).c_str(),
              thousands(L.usage_rows).c_str(), static_cast<double>(L.events) / static_cast<double>(o.tasks), load_s);
  if (!o.skip_load) {
    std::printf("  %.0f tasks/s, %.0f rows/s (tasks + attempts + events + ledger additions); writing %.1f s, "
                "generating %.1f s CPU in a thread of its own\n",
                static_cast<double>(o.tasks) / load_s, static_cast<double>(rows) / load_s, L.db_ms / 1000,
                L.generate_ms / 1000);
  }
  {
    std::string line = "  states:";
    for (const auto& [st, n] : L.states) {
      char buf[96];
      std::snprintf(buf, sizeof buf, " %s %s (%.2f%%)", enum_name(st).c_str(), thousands(n).c_str(),
                    100.0 * static_cast<double>(n) / static_cast<double>(o.tasks));
      line += buf;
    }
    std::printf("%s\n", line.c_str());
    std::vector<std::int64_t> per_group(gen.world().project_groups.size(), 0);
    for (const auto& k : L.keys) per_group[k.project_group]++;
    std::sort(per_group.rbegin(), per_group.rend());
    auto share = [&](std::size_t n) {
      std::int64_t s = 0;
      for (std::size_t i = 0; i < n && i < per_group.size(); ++i) s += per_group[i];
      return 100.0 * static_cast<double>(s) / static_cast<double>(o.tasks);
    };
    std::printf("  project groups: largest %s tasks (%.1f%%), top 5 %.1f%%, top 20 %.1f%%, smallest %s\n",
                thousands(per_group.front()).c_str(), share(1), share(5), share(20),
                thousands(per_group.back()).c_str());
  }

  // 2. Statistics, then a fresh store (and its connections) for the queries.
  auto analyze_start = SteadyClock::now();
  if (auto st = db->analyze(); !st.ok()) return fail("ANALYZE", st.error());
  std::printf("ANALYZE: %.1f s\n", since_ms(analyze_start) / 1000);
  store.reset();
  opened = open_store(o.store);
  if (!opened.ok()) return fail("open_store", opened.error());
  store = std::move(opened).value();
  for (const char* table : {"tasks", "attempts", "events", "usage_daily", "usage_monthly"}) {
    auto n = db->count(table);
    if (!n.ok()) return fail("count", n.error());
    std::printf("  rows in %-12s %s\n", table, thousands(n.value()).c_str());
  }
  if (auto bytes = db->total_bytes(); bytes.ok()) {
    std::printf("size on disk: %.2f GiB (%.0f bytes per task)\n", static_cast<double>(bytes.value()) / (1 << 30),
                static_cast<double>(bytes.value()) / static_cast<double>(o.tasks));
  }

  Failures failures;
  Rng rng(o.seed * 7919 + 17);
  {
    // Read back a sample of tasks, their attempts and events: the rows are
    // what was generated (and so what the server writes), whichever way
    // they were loaded.
    const int n = static_cast<int>(std::min<std::int64_t>(o.verify_tasks, o.tasks));
    auto start = SteadyClock::now();
    for (int s = 0; s < n; ++s) {
      const std::int64_t index = rng.below(o.tasks);
      const std::int64_t p = gen.pipeline_of(index);
      auto tasks = gen.make_pipeline(p);
      const GeneratedTask& g = tasks[static_cast<std::size_t>(index - gen.first_task_of(p))];
      auto strip = [](std::vector<Event> events) {
        for (auto& e : events) e.id = 0;
        return events;
      };
      auto st = store->read([&](Tx& tx) -> Status {
        CP_ASSIGN(auto t, tx.get_task(g.task.id));
        if (!t || encode_row(*t) != encode_row(g.task)) failures.add("task " + g.task.id + " read back differs");
        CP_ASSIGN(auto attempts, tx.attempts_of_task(g.task.id));
        if (to_json(attempts) != to_json(g.attempts)) failures.add("attempts of " + g.task.id + " differ");
        std::vector<Event> want_task, got;
        std::map<std::string, std::vector<Event>> want_attempts;
        for (const auto& te : g.events) {
          if (te.event.object_kind == "task") want_task.push_back(te.event);
          else want_attempts[te.event.object_id].push_back(te.event);
        }
        EventQuery eq;
        eq.object_kind = "task";
        eq.object_id = g.task.id;
        eq.limit = 1000;
        CP_ASSIGN(got, tx.list_events(eq));
        if (to_json(strip(got)) != to_json(want_task)) failures.add("events of task " + g.task.id + " differ");
        for (const auto& a : g.attempts) {
          eq.object_kind = "attempt";
          eq.object_id = a.id;
          CP_ASSIGN(got, tx.list_events(eq));
          if (to_json(strip(got)) != to_json(want_attempts[a.id])) failures.add("events of attempt " + a.id + " differ");
        }
        return {};
      });
      if (!st.ok()) return fail("read back", st.error());
    }
    std::printf("read back %d tasks with their attempts and events (%.1f s): %s\n", n, since_ms(start) / 1000,
                failures.count == 0 ? "equal to what was generated" : "DIFFERENT");
  }

  if (o.nice != 0) {
    // Other work on a small shared machine takes the cores at random
    // moments; a lower nice value for the measuring thread and for the
    // database server processes serving it keeps that out of the figures
    // as far as the scheduler allows.
    const bool self = setpriority(PRIO_PROCESS, 0, o.nice) == 0;  // Linux: this thread
    auto server = db->server_pids();
    std::size_t changed = 0, total = server.ok() ? server.value().size() : 0;
    if (server.ok()) {
      for (int pid : server.value()) changed += setpriority(PRIO_PROCESS, static_cast<id_t>(pid), o.nice) == 0;
    }
    std::printf("nice %d for the measurements: %s on this thread, on %zu of %zu server process(es)\n", o.nice,
                self ? "set" : "NOT set", changed, total);
  }
  std::printf("load average before the measurements: %s", load_average().c_str());

  // 3. The task list.
  Queries queries(gen, L.keys);
  std::map<Shape, ShapeFigures> figures;
  const int keep = o.quick ? o.samples : o.verify_pages;
  auto record = [&](Shape s, const TaskQuery& q, const Timed& t) {
    auto& f = figures[s];
    f.ms.push_back(t.ms);
    f.cpu_ms.push_back(t.cpu_ms);
    f.rows += static_cast<std::int64_t>(t.page.items.size());
    check_page(queries, q, t.page, failures);
    if (static_cast<int>(f.kept.size()) < keep * (s == Shape::pages_2_5 ? 4 : 1)) f.kept.emplace_back(q, t.page);
  };
  auto list_start = SteadyClock::now();
  for (int i = 0; i < o.samples; ++i) {
    for (Shape s : kShapes) {
      TaskQuery q = queries.make(s, rng);
      auto t = timed_list(*store, q);
      if (!t.ok()) return fail(std::string("list_tasks ") + shape_name(s), t.error());
      if (s != Shape::pages_2_5) {
        record(s, q, t.value());
        continue;
      }
      // Page 1 untimed, then up to 4 more by cursor.
      std::string cursor = t.value().page.next_cursor;
      for (int page = 2; page <= 5 && !cursor.empty(); ++page) {
        q.cursor = cursor;
        auto next = timed_list(*store, q);
        if (!next.ok()) return fail("list_tasks by cursor", next.error());
        record(s, q, next.value());
        cursor = next.value().page.next_cursor;
      }
    }
  }
  const double list_s = since_ms(list_start) / 1000;

  // 4. The month's usage by project group and cluster, and (for comparison,
  // not a target) the 30 days before a day that is not a month's first.
  std::vector<Millis> months;
  for (Millis m = month_start(gen.start()) < gen.start() ? month_start(gen.start(), 1) : month_start(gen.start());
       month_start(m, 1) <= gen.now(); m = month_start(m, 1)) {
    months.push_back(m);
  }
  // The generator's sums over [from, to) by (project group, cluster), in the
  // order usage_totals returns them.
  auto expected_usage = [&](Millis from, Millis to) {
    std::map<std::pair<std::string, std::string>, UsageSums> sums;
    for (auto it = L.usage.lower_bound({from, "", ""}); it != L.usage.end() && std::get<0>(it->first) < to; ++it) {
      auto& s = sums[{std::get<1>(it->first), std::get<2>(it->first)}];
      s.attempts += it->second.attempts;
      s.gpu_ms += it->second.gpu_ms;
      s.cpu_core_ms += it->second.cpu_core_ms;
      s.memory_mib_s += it->second.memory_mib_s;
    }
    std::vector<UsageRow> want;
    for (const auto& [key, s] : sums) {
      UsageRow r;
      r.project_group = key.first;
      r.cluster = key.second;
      r.attempts = s.attempts;
      r.gpu_ms = s.gpu_ms;
      r.cpu_core_ms = s.cpu_core_ms;
      r.memory_mib_s = s.memory_mib_s;
      want.push_back(std::move(r));
    }
    return want;
  };
  std::size_t usage_groups = 0;
  auto timed_usage = [&](Millis from, Millis to, std::vector<double>& ms) -> Status {
    UsageQuery uq;
    uq.from_day = from;
    uq.to_day = to;
    uq.group_by = {"project_group", "cluster"};
    std::vector<UsageRow> result;
    auto start = SteadyClock::now();
    CP_TRY(store->read([&](Tx& tx) -> Status {
      CP_ASSIGN(result, tx.usage_totals(uq));
      return {};
    }));
    ms.push_back(since_ms(start));
    usage_groups = std::max(usage_groups, result.size());
    const auto want = expected_usage(from, to);
    auto same = [](const UsageRow& a, const UsageRow& b) {
      return a.project_group == b.project_group && a.cluster == b.cluster && a.attempts == b.attempts &&
             a.gpu_ms == b.gpu_ms && a.cpu_core_ms == b.cpu_core_ms && a.memory_mib_s == b.memory_mib_s;
    };
    if (!std::equal(result.begin(), result.end(), want.begin(), want.end(), same)) {
      failures.add("usage over [" + std::to_string(from) + ", " + std::to_string(to) + "): " +
                   std::to_string(result.size()) + " rows, the generator summed " + std::to_string(want.size()) +
                   " (or the sums differ)");
    }
    return {};
  };
  std::vector<double> usage_ms, window_ms;
  for (int i = 0; i < o.usage_samples && !months.empty(); ++i) {
    const Millis m = months[static_cast<std::size_t>(
        i < static_cast<int>(months.size()) ? i : rng.below(static_cast<std::int64_t>(months.size())))];
    if (auto st = timed_usage(m, month_start(m, 1), usage_ms); !st.ok()) return fail("usage_totals", st.error());
  }
  for (int i = 0; i < std::max(1, o.usage_samples / 5); ++i) {
    Millis to = gen.now() - rng.below(300) * kDayMs;
    if (month_start(to) == to) to -= kDayMs;
    if (auto st = timed_usage(to - 30 * kDayMs, to, window_ms); !st.ok()) return fail("usage_totals", st.error());
  }

  // 5. Events after a recent id.
  std::vector<double> event_ms;
  for (int i = 0; i < o.event_samples && L.events > 100; ++i) {
    EventQuery eq;
    eq.after_id = std::max<std::int64_t>(0, L.events - 100 - rng.below(L.events / 100 + 1));
    eq.limit = 100;
    std::vector<Event> events;
    auto start = SteadyClock::now();
    auto st = store->read([&](Tx& tx) -> Status {
      CP_ASSIGN(events, tx.list_events(eq));
      return {};
    });
    event_ms.push_back(since_ms(start));
    if (!st.ok()) return fail("list_events", st.error());
    if (events.size() != 100) failures.add("list_events after " + std::to_string(eq.after_id) + ": " +
                                           std::to_string(events.size()) + " events, not 100");
    for (std::size_t k = 0; k < events.size(); ++k) {
      if (events[k].id <= (k == 0 ? eq.after_id : events[k - 1].id) ||
          (k > 0 && events[k].at < events[k - 1].at)) {
        failures.add("list_events after " + std::to_string(eq.after_id) + " not in id (and time) order");
        break;
      }
    }
  }

  // 6. Pages against the generated tasks.
  {
    auto start = SteadyClock::now();
    int checked = 0;
    for (auto& [shape, f] : figures) {
      for (const auto& [q, page] : f.kept) {
        auto [want, more] = queries.expected(q);
        std::vector<std::string> got;
        for (const auto& t : page.items) got.push_back(t.id);
        if (got != want || more != !page.next_cursor.empty()) {
          failures.add(std::string("page differs from the generated tasks (") + shape_name(shape) + "):" +
                       describe(q) + ": got " + std::to_string(got.size()) + " tasks" +
                       (got.empty() ? "" : " from " + got.front()) + ", want " + std::to_string(want.size()) +
                       (want.empty() ? "" : " from " + want.front()));
        }
        ++checked;
      }
    }
    std::printf("checked %d pages against the generated tasks (%.1f s)\n", checked, since_ms(start) / 1000);
  }

  std::printf("load average after the measurements: %s", load_average().c_str());

  // Report.
  std::printf("\ntask list page (limit 50), one read transaction each; %d rounds over the shapes in %.1f s:\n",
              o.samples, list_s);
  std::printf("  %-26s %7s %9s %9s %9s %9s %11s\n", "shape", "samples", "rows/page", "p50 ms", "p99 ms", "max ms",
              "cpu p99 ms");
  std::vector<double> all_ms;
  for (Shape s : kShapes) {
    const auto& f = figures[s];
    all_ms.insert(all_ms.end(), f.ms.begin(), f.ms.end());
    std::printf("  %-26s %7zu %9.1f %9.3f %9.3f %9.3f %11.3f\n", shape_name(s), f.ms.size(),
                f.ms.empty() ? 0.0 : static_cast<double>(f.rows) / static_cast<double>(f.ms.size()),
                percentile(f.ms, 0.5), percentile(f.ms, 0.99), percentile(f.ms, 1.0), percentile(f.cpu_ms, 0.99));
  }
  const double list_p99 = percentile(all_ms, 0.99);
  std::printf("  %-26s %7zu %9s %9.3f %9.3f %9.3f\n", "all shapes", all_ms.size(), "", percentile(all_ms, 0.5),
              list_p99, percentile(all_ms, 1.0));
  const double usage_p99 = percentile(usage_ms, 0.99);
  std::printf("month usage by project group and cluster: %zu samples over %zu months, up to %zu groups: p50 %.3f ms, "
              "p99 %.3f ms, max %.3f ms\n",
              usage_ms.size(), months.size(), usage_groups, percentile(usage_ms, 0.5), usage_p99,
              percentile(usage_ms, 1.0));
  std::printf("  30 days ending on a day that is not a month's first (daily rows; a February inside from "
              "usage_monthly): %zu samples: p50 %.3f ms, max %.3f ms\n",
              window_ms.size(), percentile(window_ms, 0.5), percentile(window_ms, 1.0));
  const double events_p99 = percentile(event_ms, 0.99);
  std::printf("events after a recent id (limit 100): %zu samples: p50 %.3f ms, p99 %.3f ms, max %.3f ms\n",
              event_ms.size(), percentile(event_ms, 0.5), events_p99, percentile(event_ms, 1.0));

  // After the measurements: SQLite's per-table sizes read the whole file.
  auto sizes = db->sizes(o.table_sizes);
  if (!sizes.ok()) return fail("sizes", sizes.error());
  for (const auto& line : sizes.value()) std::printf("size: %s\n", line.c_str());

  if (o.explain) {
    const sql::Dialect dialect{backend == "postgresql" ? " COLLATE \"C\"" : ""};
    Rng er(o.seed + 99);
    auto show = [&](const std::string& title, const sql::Statement& s) {
      std::printf("\n%s\n  %s\n", title.c_str(), s.text.c_str());
      auto plan = db->explain(s);
      std::printf("%s", plan.ok() ? plan.value().c_str() : ("  (" + plan.error().message + ")\n").c_str());
    };
    for (Shape s : kShapes) {
      TaskQuery q = queries.make(s, er);
      if (s == Shape::pages_2_5) {
        auto first = timed_list(*store, q);
        if (first.ok() && !first.value().page.next_cursor.empty()) q.cursor = first.value().page.next_cursor;
      }
      auto plan = sql::plan_task_list(q, dialect);
      if (!plan.ok()) continue;
      int k = 0;
      for (const auto& st : plan.value().selects) {
        if (++k > 2) {
          std::printf("  (... %zu statements in all)\n", plan.value().selects.size());
          break;
        }
        show(std::string("EXPLAIN ") + shape_name(s) + ":" + describe(q), st);
      }
    }
    UsageQuery uq;
    uq.from_day = months.empty() ? gen.start() : months.back();
    uq.to_day = month_start(uq.from_day, 1);
    uq.group_by = {"project_group", "cluster"};
    auto us = sql::usage_totals(uq, dialect);
    if (us.ok()) show("EXPLAIN month usage", us.value());
    show("EXPLAIN events after a recent id",
         sql::Statement{"SELECT doc FROM events WHERE id > ? ORDER BY id LIMIT ?", {L.events - 1000, std::int64_t{100}}});
  }

  if (failures.count > 0) {
    std::printf("ERROR: %d check(s) failed: the store did not return what was loaded\n", failures.count);
    return 1;
  }
  std::printf("list_p99_ms=%.3f usage_p99_ms=%.3f events_p99_ms=%.3f tasks=%lld backend=%s\n", list_p99, usage_p99,
              events_p99, static_cast<long long>(o.tasks), backend.c_str());
  return 0;
}

}  // namespace
}  // namespace cp::bench

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // progress shows when piped to a file
  cp::bench::Options o;
  CLI::App app{"cubeplane-bench-store: the store at 10 million tasks (load, task list pages, month usage, events)"};
  app.add_option("--store", o.store, "sqlite:///abs/path or postgresql://... (an empty database)");
  auto* tasks = app.add_option("--tasks", o.tasks, "tasks to generate and load")->check(CLI::Range(1, 100'000'000));
  app.add_option("--seed", o.seed, "PRNG seed");
  app.add_flag("--quick", o.quick,
               "a small configuration (20,000 tasks, 200 samples per shape; a temporary SQLite file unless --store), "
               "for CI");
  app.add_option("--batch", o.batch, "tasks per write transaction")->check(CLI::Range(1, 1'000'000));
  app.add_option("--samples", o.samples, "rounds of task list pages (one page of each shape per round)")
      ->check(CLI::Range(1, 1'000'000));
  app.add_option("--usage-samples", o.usage_samples, "month usage queries")->check(CLI::Range(1, 100'000));
  app.add_option("--event-samples", o.event_samples, "list_events queries")->check(CLI::Range(1, 1'000'000));
  app.add_option("--verify-pages", o.verify_pages, "pages per shape compared with the generated tasks")
      ->check(CLI::Range(0, 1'000'000));
  app.add_option("--verify-tasks", o.verify_tasks, "tasks read back and compared after the load")
      ->check(CLI::Range(0, 1'000'000));
  app.add_option("--load", o.load, "tx: through Store/Tx (default); copy: PostgreSQL COPY of the same rows")
      ->check(CLI::IsMember({"tx", "copy"}));
  app.add_flag("--skip-load", o.skip_load, "the store already holds this --tasks/--seed data: measure only");
  app.add_flag("--explain", o.explain, "print the query plan of one query of each shape");
  app.add_flag("--table-sizes", o.table_sizes, "SQLite: per-table sizes (dbstat; reads the whole file)");
  app.add_option("--nice", o.nice,
                 "nice value for the measurements, on this thread and the PostgreSQL processes of this database's "
                 "connections (negative values need root)")
      ->check(CLI::Range(-20, 19));
  CLI11_PARSE(app, argc, argv);
  if (o.quick) {
    if (tasks->count() == 0) o.tasks = 20'000;
    o.samples = std::min(o.samples, 200);
    o.usage_samples = std::min(o.usage_samples, 24);
    o.event_samples = std::min(o.event_samples, 200);
    o.verify_tasks = std::min(o.verify_tasks, 500);
  }
  return cp::bench::run(o);
}
