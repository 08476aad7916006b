// The behaviour every ObjectStore must have, as one test suite that runs
// against each implementation (DESIGN.md "Interfaces with one shared test
// suite"). A backend joins by instantiating it with a factory:
//
//   INSTANTIATE_TEST_SUITE_P(S3, ObjectStoreConformance,
//                            testing::Values(StoreFactory{"s3", &make_s3_store}),
//                            [](const auto& info) { return info.param.name; });
//
// The factory returns a fresh, empty store for each test.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <string>

#include "objstore/object_store.h"

namespace cp::testing_objstore {

struct StoreFactory {
  std::string name;
  std::function<std::unique_ptr<ObjectStore>()> make;
};

class ObjectStoreConformance : public ::testing::TestWithParam<StoreFactory> {
 protected:
  void SetUp() override {
    store_ = GetParam().make();
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
