// Rows as every backend reads them back (store/row_codec.h): a row written by
// an older version, without the fields added since, still reads.
#include <gtest/gtest.h>

#include "model/approval.h"
#include "model/monitoring.h"
#include "model/types.h"
#include "store/row_codec.h"
#include "store_conformance.h"

namespace cp {
namespace {

TEST(RowCodec, ATaskWrittenBeforeStepFallbacksReadsWithNone) {
  // A task row from before steps had `fallbacks` decodes with an empty list and every other field intact.
  constexpr std::string_view kOldRow = R"({"id":"t-1","pipeline_id":"p-1","name":"train","project_group":"proj-b",
    "resource_group":"rg-proj-b-gpu","priority_class":"batch","priority":100,"user":"alice",
    "step":{"name":"train","command":["python","train.py"],"image":"","env":{"EPOCHS":"3"},
      "resources":{"cpu":"8","gpu/nvidia-a100-80gb":"1","memory":"32Gi"},"replicas":2,"depends_on":[],
      "checkpoint":true,"max_retries":2},
    "depends_on":[],"cluster_selector":{},"cluster":"","state":"Queued","reasons":[],"attempts":0,"retries":0,
    "current_attempt":"","assigned_cluster":"","cancel_requested":false,"created_at":1,"updated_at":1,
    "queued_at":1,"started_at":0,"finished_at":0})";
  auto task = decode_row<Task>(kOldRow, "tasks");
  ASSERT_TRUE(task.ok()) << task.error().message;
  EXPECT_TRUE(task->step.fallbacks.empty());
  EXPECT_EQ(task->step.resources, Resources::parse_or_die("cpu:8,memory:32Gi,gpu/nvidia-a100-80gb:1"));
  EXPECT_EQ(task->step.replicas, 2);
  EXPECT_EQ(task->state, TaskState::Queued);
}

TEST(RowCodec, StepFallbacksRoundTrip) {
  // A task's step fallbacks are written with the row and read back in order.
  Task t;
  t.id = "t-2";
  t.step.name = "train";
  t.step.resources = Resources::parse_or_die("cpu:8,gpu/nvidia-a100-80gb:1");
  t.step.fallbacks = {StepShape{600, Resources::parse_or_die("cpu:8,gpu/nvidia-l40s:2")},
                      StepShape{1800, Resources::parse_or_die("cpu:8,gpu/nvidia-a10:1")}};
  auto back = decode_row<Task>(encode_row(t), "tasks");
  ASSERT_TRUE(back.ok()) << back.error().message;
  ASSERT_EQ(back->step.fallbacks.size(), 2u);
  EXPECT_EQ(back->step.fallbacks[0].after_s, 600);
  EXPECT_EQ(back->step.fallbacks[0].resources, t.step.fallbacks[0].resources);
  EXPECT_EQ(back->step.fallbacks[1].after_s, 1800);
  EXPECT_EQ(back->step.fallbacks[1].resources, t.step.fallbacks[1].resources);
}

// Every byte value, the two-character escapes and the \u00xx ones among them.
std::string every_byte() {
  std::string s;
  for (int c = 0; c < 256; ++c) s += static_cast<char>(c);
  return s + "\xe4\xb8\xad\xe6\x96\x87";  // and some UTF-8
}

template <class T>
void expect_written_as_the_tree(const T& value) {
  EXPECT_EQ(encode_row(value), dump(to_json(value)));
}

TEST(RowCodec, RowsAreWrittenByteForByteAsTheirJsonTree) {
  // encode_row writes the text straight from the struct (to_json_text); it
  // must be exactly what serializing to_json's tree gives, for every kind of
  // member: strings of every byte, enums, optionals set and unset, lists,
  // maps, nested structs, JSON values, doubles, types with their own format.
  using testing::make_attempt;
  using testing::make_task;
  Task t = make_task("t-1", 1000);
  t.name = every_byte();
  t.exit_code = -3;
  t.cancel_requested = true;
  t.step.env = {{"A", "1"}, {"Z\n", every_byte()}};
  t.step.fallbacks = {StepShape{600, Resources::parse_or_die("cpu:8,gpu/nvidia-l40s:2")}};
  t.reasons = {PendingReason{"quota_exceeded", "short \"quoted\"", "不足", {}}};
  t.reasons[0].details["used"] = 3;
  t.reasons[0].details["why"] = every_byte();
  t.reasons[0].details["share"] = 0.125;
  expect_written_as_the_tree(t);
  Task bare;
  expect_written_as_the_tree(bare);

  Attempt a = make_attempt("t-1", 2, "c-east", AttemptState::Stopping);
  a.placements = {{0, "n1", {0, 1}}, {1, "n2", {}}};
  a.resources = Resources::parse_or_die("cpu:2,memory:4Gi,gpu/nvidia-a100-80gb:2");
  expect_written_as_the_tree(a);

  Event e = testing::make_event("task", "t-1", 1000, "task.state");
  e.data["nested"] = json::object{{"list", json::array{1, "two", nullptr, true, 2.5}}, {"big", -9007199254740993}};
  expect_written_as_the_tree(e);

  AuditEntry audit;
  audit.id = "audit-1";
  audit.request = json::parse(R"({"apiVersion":"cubeplane/v1","spec":{"x":[1,2.0,1e300,-0.0]}})");
  audit.after = json::value(every_byte());
  audit.error = every_byte();
  expect_written_as_the_tree(audit);

  Alert alert;
  alert.value = 99.5;
  alert.labels = {{"cluster", "c-east"}};
  expect_written_as_the_tree(alert);
  alert.value = 1.0 / 3.0;
  expect_written_as_the_tree(alert);

  expect_written_as_the_tree(testing::make_cluster("c-east"));
  expect_written_as_the_tree(testing::make_node("c-east", "n1"));
  expect_written_as_the_tree(testing::make_resource_group("rg-a"));
  expect_written_as_the_tree(testing::make_project_group("pg-a"));
  expect_written_as_the_tree(testing::make_priority_class("urgent", 1000));
  expect_written_as_the_tree(testing::make_pipeline("p-1", "pg-a"));
  expect_written_as_the_tree(Approval{});
  expect_written_as_the_tree(Labels{{"a", "b"}, {every_byte(), ""}});
}

}  // namespace
}  // namespace cp
