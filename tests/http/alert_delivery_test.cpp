// Alert notifications over real HTTP: the control plane's own sender
// (libcurl) posts Alertmanager webhooks to a local receiver (a real
// HttpServer on port 0) that fails at first and then recovers.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>

#include "http/router.h"
#include "objstore/object_store.h"
#include "server/control_plane.h"
#include "store/store.h"
#include "server/offline_alert_fixture.h"
#include "test_util.h"

namespace cp::http {
namespace {

using testing::TestServer;

class AlertDeliveryTest : public cp::testing::OfflineAlertFixture {
 protected:
  void SetUp() override {
    OfflineAlertFixture::SetUp();
    receiver_router_.add("POST", "/hook", {.summary = "test receiver", .auth = AuthKind::none},
                         [this](Request& req) {
                           std::lock_guard lock(mu_);
                           bodies_.push_back(req.body);
                           if (static_cast<int>(bodies_.size()) <= fail_first_) {
                             return text_response(503, "not now");
                           }
                           return json_response(200, json::object{});
                         });
    receiver_ = std::make_unique<TestServer>(receiver_router_);
  }
  void TearDown() override {
    OfflineAlertFixture::TearDown();
    receiver_.reset();
  }

  void start(const std::vector<std::string>& webhooks) {
    ServerConfig cfg;
    cfg.alert_webhooks = webhooks;
    start_with(cfg);
  }

  std::size_t received() {
    std::lock_guard lock(mu_);
    return bodies_.size();
  }

  Router receiver_router_;
  std::unique_ptr<TestServer> receiver_;
  std::mutex mu_;
  std::vector<std::string> bodies_;
  int fail_first_ = 2;
};

TEST_F(AlertDeliveryTest, AReceiverThatFailsFirstGetsTheAlertOnceItRecovers) {
  start({receiver_->url("/hook")});
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(received(), 1u);
  auto a = the_alert();
  EXPECT_EQ(a.state, AlertState::firing);
  ASSERT_EQ(a.deliveries.size(), 1u);
  EXPECT_EQ(a.deliveries[0].state, "pending");
  EXPECT_EQ(a.deliveries[0].last_error, "HTTP 503: not now");

  clock_.advance_ms(10'000);
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(received(), 2u);
  clock_.advance_ms(19'000);  // the second backoff is 20 s: not yet
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(received(), 2u);
  clock_.advance_ms(1'000);
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(received(), 3u);
  a = the_alert();
  EXPECT_EQ(a.deliveries[0].state, "ok");
  EXPECT_EQ(a.deliveries[0].attempts, 3);
  EXPECT_EQ(a.deliveries[0].delivered_at, clock_.now_ms());

  std::lock_guard lock(mu_);
  auto body = parse_json(bodies_.back()).value();
  EXPECT_EQ(body.at("status").as_string(), "firing");
  EXPECT_EQ(body.at("alerts").at(0).at("labels").at("alertname").as_string(), "cluster_offline");
  EXPECT_EQ(body.at("alerts").at(0).at("labels").at("cluster").as_string(), "c1");
}

TEST_F(AlertDeliveryTest, AnUnreachableReceiverIsRetriedAndTheErrorShown) {
  // A port that was listening a moment ago and is closed now.
  std::string url = receiver_->url("/hook");
  receiver_.reset();
  start({url});
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  auto a = the_alert();
  ASSERT_EQ(a.deliveries.size(), 1u);
  EXPECT_EQ(a.deliveries[0].state, "pending");
  EXPECT_EQ(a.deliveries[0].attempts, 1);
  EXPECT_FALSE(a.deliveries[0].last_error.empty());
  EXPECT_EQ(a.deliveries[0].next_at, clock_.now_ms() + 10'000);
}

}  // namespace
}  // namespace cp::http
