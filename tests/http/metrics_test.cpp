#include "http/metrics.h"

#include <gtest/gtest.h>

#include "server/control_plane.h"

namespace cp::http {
namespace {

bool has(const std::string& text, const std::string& needle) { return text.find(needle) != std::string::npos; }

// The request histogram and counter appear once a request was observed.
TEST(Metrics, RequestHistogram) {
  Metrics m;
  m.observe_request("/api/v1/tasks", "GET", 200, 0.003);
  m.observe_request("/api/v1/tasks", "GET", 503, 0.2);
  auto text = m.serialize();
  EXPECT_TRUE(has(text, "# TYPE cubeplane_http_request_duration_seconds histogram")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_http_request_duration_seconds_count{code="2xx",method="GET",route="/api/v1/tasks"} 1)"))
      << text;
  EXPECT_TRUE(has(text, R"(cubeplane_http_requests_total{code="5xx",method="GET",route="/api/v1/tasks"} 1)")) << text;
}

// Domain gauges follow the snapshot; series that left it disappear.
TEST(Metrics, DomainGauges) {
  Metrics m;
  MetricsSnapshot s;
  s.queued_by_group["rg-a"] = 3;
  s.tasks_by_state["Running"] = 2;
  s.quota[{"rg-a", "gpu/a100"}] = {5, 8};
  s.cluster_states["east"] = "online";
  s.last_cycle.queued = 100;
  s.last_cycle.waiting = 75;
  s.last_cycle.reasons_written = 40;
  s.last_cycle.apply_ms = 250;
  s.last_cycle.longest_write_ms = 125;
  m.update_domain(s);
  auto text = m.serialize();
  EXPECT_TRUE(has(text, R"(cubeplane_queue_length{resource_group="rg-a"} 3)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_quota_used{resource="gpu/a100",resource_group="rg-a"} 5)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_quota_limit{resource="gpu/a100",resource_group="rg-a"} 8)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_tasks{state="Running"} 2)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_tasks{state="Queued"} 0)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_cluster_up{cluster="east",state="online"} 1)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_cluster_up{cluster="east",state="offline"} 0)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_schedule_cycle_seconds{part="apply"} 0.25)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_schedule_cycle_seconds{part="load"} 0)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_schedule_cycle_seconds{part="apply_longest_transaction"} 0.125)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_schedule_cycle_tasks{kind="waiting"} 75)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_schedule_cycle_tasks{kind="reasons_written"} 40)")) << text;

  MetricsSnapshot s2;
  s2.cluster_states["east"] = "offline";
  m.update_domain(s2);
  text = m.serialize();
  EXPECT_FALSE(has(text, R"(resource_group="rg-a")")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_cluster_up{cluster="east",state="offline"} 1)")) << text;
  EXPECT_TRUE(has(text, R"(cubeplane_tasks{state="Running"} 0)")) << text;
}

}  // namespace
}  // namespace cp::http
