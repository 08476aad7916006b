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
#include "test_util.h"

namespace cp::http {
namespace {

using testing::TestServer;

class AlertDeliveryTest : public ::testing::Test {
 protected:
  void SetUp() override {
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
    dir_ = std::filesystem::temp_directory_path() / ("cp-alerts-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir_);
    store_ = std::move(open_store("sqlite::memory:")).value();
    ASSERT_TRUE(store_->migrate().ok());
    objects_ = std::move(open_object_store("file://" + dir_.string())).value();
  }
  void TearDown() override {
    cp_.reset();
    receiver_.reset();
    std::filesystem::remove_all(dir_);
  }

  void start(const std::vector<std::string>& webhooks) {
    ServerConfig cfg;
    cfg.alert_webhooks = webhooks;
    cfg.cluster_offline_for_s = 0;
    cp_ = std::make_unique<ControlPlane>(*store_, *objects_, clock_, cfg);
    auto token = cp_->ensure_admin_token();
    ASSERT_TRUE(token.ok() && token->has_value());
    admin_ = cp_->authenticate(**token).value();
    // A cluster no agent ever joined: offline, so cluster_offline fires at once.
    ASSERT_TRUE(cp_->create_cluster(admin_, json::object{{"id", "c1"}, {"executor", "local"}}).ok());
    ASSERT_TRUE(cp_->evaluate_alerts().ok());
  }

  Alert the_alert() {
    auto page = cp_->list_alerts(admin_, AlertQuery{});
    EXPECT_TRUE(page.ok());
    EXPECT_EQ(page->items.size(), 1u);
    return page->items.empty() ? Alert{} : page->items[0];
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

  std::filesystem::path dir_;
  SimulatedClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<ObjectStore> objects_;
  std::unique_ptr<ControlPlane> cp_;
  Principal admin_;
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
