// GET /api/v1/control-plane and the control plane's /metrics figures
// (server/beacon.h): this server's term, its beacon, whether it judges.
#include <gtest/gtest.h>

#include "api_test.h"

namespace cp::http::testing {
namespace {

class ControlPlaneStatusTest : public ApiTest {
 protected:
  SimulatedClock mono_{1000};
};

TEST_F(ControlPlaneStatusTest, SaysWhoLeadsAndWhetherItJudges) {
  ASSERT_TRUE(cp_->start_beacon("srv-test", mono_, false).ok());
  auto r = call("GET", "/api/v1/control-plane", admin_);
  ASSERT_EQ(r.status, 200) << r.body;
  auto v = parse(r);
  EXPECT_EQ(v.at("leader").as_string(), "srv-test");
  EXPECT_EQ(v.at("term").as_int64(), 1);
  EXPECT_TRUE(v.at("judging").as_bool());
  EXPECT_EQ(v.at("lost_after_ms").as_int64(), 40'000);
  const auto& me = v.at("servers").at(0);
  EXPECT_TRUE(me.at("leader").as_bool());
  EXPECT_EQ(me.at("beacon_seq").as_int64(), 1);
  EXPECT_FALSE(me.at("judging_since").is_null());

  auto m = call("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(cubeplane_control_plane{figure="judging",server="srv-test"} 1)"), std::string::npos)
      << m.body.substr(0, 400);

  // No round for longer than F (this process stalled): not judging, and why.
  mono_.advance_ms(5001);
  v = parse(call("GET", "/api/v1/control-plane", admin_));
  EXPECT_FALSE(v.at("judging").as_bool());
  EXPECT_NE(std::string(v.at("servers").at(0).at("not_judging").as_string()).find("no beacon round"),
            std::string::npos);
  m = call("GET", "/metrics");
  EXPECT_NE(m.body.find(R"(cubeplane_control_plane{figure="judging",server="srv-test"} 0)"), std::string::npos);
}

TEST_F(ControlPlaneStatusTest, SyncAnswersNameTheBeaconOverHttp) {
  ASSERT_TRUE(cp_->start_beacon("srv-test", mono_, false).ok());
  seed();
  const std::string cred = connect_agent();
  auto s = sync(cred, json::array{});
  ASSERT_EQ(s.status, 200) << s.body;
  auto v = parse(s);
  EXPECT_EQ(v.at("beacon_url").as_string(), "file://" + (dir_ / "objects" / "control-plane/beacon").string());
  EXPECT_EQ(v.at("beacon_term").as_int64(), 1);
  EXPECT_GE(v.at("beacon_seq").as_int64(), 1);
  EXPECT_EQ(v.at("beacon_window_ms").as_int64(), 5000);
}

TEST_F(ControlPlaneStatusTest, NeedsACallerAndSaysSoWithoutABeacon) {
  EXPECT_EQ(call("GET", "/api/v1/control-plane").status, 401);
  auto v = parse(call("GET", "/api/v1/control-plane", admin_));
  EXPECT_TRUE(v.at("servers").as_array().empty());
  EXPECT_TRUE(v.at("leader").is_null());
}

}  // namespace
}  // namespace cp::http::testing
