// Rows as every backend reads them back (store/row_codec.h): a row written by
// an older version, without the fields added since, still reads.
#include <gtest/gtest.h>

#include "model/types.h"
#include "store/row_codec.h"

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

}  // namespace
}  // namespace cp
