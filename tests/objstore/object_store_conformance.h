// The behaviour every ObjectStore must have, as one test suite that runs
// against each implementation (DESIGN.md "Interfaces with one shared test
// suite"). A backend joins by instantiating it with a factory:
//
//   INSTANTIATE_TEST_SUITE_P(S3, ObjectStoreConformance,
//                            testing::Values(StoreFactory{"s3", &make_s3_store}),
//                            [](const auto& info) { return info.param.name; });
//
// The factory returns a fresh, empty store for each test. It may instead
// skip the test (GTEST_SKIP in a helper, e.g. CUBEPLANE_TEST_S3=off) or fail
// it (ADD_FAILURE and nullptr, e.g. the test server cannot start).
//
// `server_gaps` names tests that the backend's test server cannot pass
// although the backend is right (s3rver's listing order): each is skipped
// with its reason, visibly, never silently.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>

#include "objstore/object_store.h"

namespace cp::testing_objstore {

struct StoreFactory {
  std::string name;
  std::function<std::unique_ptr<ObjectStore>()> make;
  std::map<std::string, std::string> server_gaps;  // test name -> why its test server cannot pass it
};

// Test names show the backend, not the factory's bytes.
inline void PrintTo(const StoreFactory& f, std::ostream* os) { *os << f.name; }

class ObjectStoreConformance : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    test = test.substr(0, test.find('/'));
    if (auto gap = GetParam().server_gaps.find(test); gap != GetParam().server_gaps.end()) {
      GTEST_SKIP() << GetParam().name << ": " << gap->second;
    }
    store_ = GetParam().make();
    if (IsSkipped()) return;
    ASSERT_NE(store_, nullptr);
  }

  ObjectStore& store() { return *store_; }

  void put(const std::string& key, std::string_view data) {
    auto r = store_->put(key, data);
    ASSERT_TRUE(r.ok()) << key << ": " << r.error().message;
  }

  std::optional<std::string> get(const std::string& key) {
    auto r = store_->get(key);
    EXPECT_TRUE(r.ok()) << key << ": " << (r.ok() ? "" : r.error().message);
    return r.ok() ? *r : std::nullopt;
  }

  std::vector<std::string> keys(const std::string& prefix, const std::string& start_after = "", int limit = 1000) {
    auto r = store_->list(prefix, start_after, limit);
    EXPECT_TRUE(r.ok()) << prefix << ": " << (r.ok() ? "" : r.error().message);
    std::vector<std::string> out;
    if (r.ok()) {
      for (const auto& info : *r) out.push_back(info.key);
    }
    return out;
  }

 private:
  std::unique_ptr<ObjectStore> store_;
};

}  // namespace cp::testing_objstore
