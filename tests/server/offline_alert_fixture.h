// A control plane with one firing alert, for the tests of its deliveries
// (webhooks: tests/http/alert_delivery_test.cpp; email:
// tests/server/alert_email_test.cpp): a cluster that no agent ever joined
// is offline, and cluster_offline fires at once.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "objstore/object_store.h"
#include "server/control_plane.h"
#include "store/store.h"

namespace cp::testing {

class OfflineAlertFixture : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("cp-alerts-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    store_ = std::move(open_store("sqlite::memory:")).value();
    ASSERT_TRUE(store_->migrate().ok());
    objects_ = std::move(open_object_store("file://" + dir_.string())).value();
  }
  void TearDown() override {
    cp_.reset();
    std::filesystem::remove_all(dir_);
  }

  // Starts the control plane with `cfg` (its receivers) and the alert.
  void start_with(ServerConfig cfg) {
    cfg.cluster_offline_for_s = 0;
    cp_ = std::make_unique<ControlPlane>(*store_, *objects_, clock_, cfg);
    auto token = cp_->ensure_admin_token();
    ASSERT_TRUE(token.ok() && token->has_value());
    admin_ = cp_->authenticate(**token).value();
    ASSERT_TRUE(cp_->create_cluster(admin_, json::object{{"id", "c1"}, {"executor", "local"}}).ok());
    ASSERT_TRUE(cp_->evaluate_alerts().ok());
  }

  Alert the_alert() {
    auto page = cp_->list_alerts(admin_, AlertQuery{});
    EXPECT_TRUE(page.ok());
    EXPECT_EQ(page->items.size(), 1u);
    return page->items.empty() ? Alert{} : page->items[0];
  }

  std::filesystem::path dir_;
  SimulatedClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ObjectStore> objects_;
  std::unique_ptr<ControlPlane> cp_;
  Principal admin_;
};

}  // namespace cp::testing
