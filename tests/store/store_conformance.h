// The Store conformance suite (STYLE.md "Interfaces with one shared test
// suite"): every backend runs the same TEST_Ps, so none can drift. A backend
// joins with one INSTANTIATE_TEST_SUITE_P line (see sqlite_store_test.cpp):
//
//   INSTANTIATE_TEST_SUITE_P(Postgres, StoreTest, ::testing::Values(postgres_backend()), backend_name);
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "store/store.h"

#define EXPECT_OK(expr)                                   \
  do {                                                    \
    const auto& _cp_r = (expr);                           \
    EXPECT_TRUE(_cp_r.ok()) << _cp_r.error().to_string(); \
  } while (0)
#define ASSERT_OK(expr)                                   \
  do {                                                    \
    const auto& _cp_r = (expr);                           \
    ASSERT_TRUE(_cp_r.ok()) << _cp_r.error().to_string(); \
  } while (0)

namespace cp::testing {

// Polls `done` until it holds or 10 s pass.
inline bool eventually(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// Group commit (a store with queued_writes()): runs a first write_shared() that holds
// the writer (the one group leader) until `bodies` have queued behind it one
// by one, so that they run as one group. Each result lands in `results`, in
// the order of `bodies`; a body's exception, rethrown by write() on its own
// thread, as the error "thrown".
template <class S>
void run_one_group(S& store, const std::vector<std::function<Status(Tx&)>>& bodies, std::vector<Status>& results) {
  std::atomic<bool> release{false}, inside{false};
  std::thread first([&] {
    EXPECT_OK(store.write_shared([&](Tx& tx) -> Status {
      CP_TRY(tx.set_meta("first", "ran"));
      inside = true;
      EXPECT_TRUE(eventually([&] { return release.load(); }));
      return {};
    }));
  });
  ASSERT_TRUE(eventually([&] { return inside.load(); }));
  results.assign(bodies.size(), Status());
  std::vector<std::thread> queued;
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    queued.emplace_back([&, i] {
      try {
        results[i] = store.write_shared(bodies[i]);
      } catch (const std::exception& e) {
        results[i] = Error{"thrown", 500, e.what(), "", {}};
      }
    });
    ASSERT_TRUE(eventually([&] { return store.queued_writes() == i + 1; }));
  }
  release = true;
  first.join();
  for (auto& t : queued) t.join();
}

using StoreFactory = std::function<std::unique_ptr<Store>()>;

// A database set aside for one test.
struct TestDatabase {
  // Opens a new handle on this test's database. For a persistent backend
  // every handle sees the same data, so a test can close and reopen; for an
  // in-memory one each call starts empty.
  StoreFactory open;
  bool persistent = false;
  std::function<void()> drop;  // removes what the backend made for the test
};

struct StoreBackend {
  std::string name;  // becomes part of the test name
  std::function<TestDatabase()> create;
};

inline std::string backend_name(const ::testing::TestParamInfo<StoreBackend>& info) { return info.param.name; }
// So that gtest names the backend of a failed test instead of dumping bytes.
inline void PrintTo(const StoreBackend& backend, std::ostream* os) { *os << backend.name; }

template <class R>
struct ResultValue;
template <class T>
struct ResultValue<Result<T>> {
  using type = T;
};

class StoreTest : public ::testing::TestWithParam<StoreBackend> {
 protected:
  void SetUp() override {
    db_ = GetParam().create();
    // A backend without its server skips or fails in create(), saying why.
    if (IsSkipped() || HasFatalFailure()) return;
    store_ = db_.open();
    ASSERT_NE(store_, nullptr);
    ASSERT_OK(store_->migrate());
  }
  void TearDown() override {
    store_.reset();
    if (db_.drop) db_.drop();
  }

  // Runs `body` in a write transaction and expects it to commit.
  void write(const std::function<Status(Tx&)>& body) { EXPECT_OK(store_->write(body)); }

  // What `f` (Tx& -> Result<T>) returns inside a read transaction.
  template <class F>
  auto read(F&& f) {
    using T = typename ResultValue<std::invoke_result_t<F&, Tx&>>::type;
    std::optional<T> value;
    Status status = store_->read([&](Tx& tx) -> Status {
      auto r = f(tx);
      if (!r.ok()) return r.error();
      value.emplace(std::move(r).value());
      return {};
    });
    EXPECT_TRUE(status.ok()) << status.error().to_string();
    return value ? std::move(*value) : T{};
  }

  // The error a read transaction running `f` ends with.
  template <class F>
  Error read_error(F&& f) {
    Status status = store_->read([&](Tx& tx) -> Status {
      auto r = f(tx);
      if (!r.ok()) return r.error();
      return {};
    });
    EXPECT_FALSE(status.ok());
    return status.ok() ? Error{} : status.error();
  }
  template <class F>
  Error write_error(F&& f) {
    Status status = store_->write([&](Tx& tx) -> Status {
      auto r = f(tx);
      if (!r.ok()) return r.error();
      return {};
    });
    EXPECT_FALSE(status.ok());
    return status.ok() ? Error{} : status.error();
  }

  TestDatabase db_;
  std::unique_ptr<Store> store_;
};

// ------------------------------------------------------- test data builders
// Fully populated values, so that a round trip that forgot a field shows.

inline constexpr Millis kT0 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

Cluster make_cluster(const std::string& id);
Node make_node(const std::string& cluster_id, const std::string& name);
ResourceGroup make_resource_group(const std::string& name);
ProjectGroup make_project_group(const std::string& name);
PriorityClass make_priority_class(const std::string& name, int value);
Pipeline make_pipeline(const std::string& id, const std::string& project_group);
Task make_task(const std::string& id, Millis created_at, TaskState state = TaskState::Queued,
               const std::string& project_group = "pg-a", const std::string& resource_group = "rg-a");
Attempt make_attempt(const std::string& task_id, int number, const std::string& cluster_id, AttemptState state);
Event make_event(const std::string& object_kind, const std::string& object_id, Millis at, const std::string& type);

// Ids of tasks, in order.
std::vector<std::string> ids_of(const std::vector<Task>& tasks);

// Same JSON: every described field equal.
template <class T>
void expect_same(const T& expected, const T& actual) {
  EXPECT_EQ(to_json(expected), to_json(actual));
}

}  // namespace cp::testing
