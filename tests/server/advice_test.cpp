// Request against use: the advice rules on hand-made figures, and the whole
// path from an agent's reports to GET /api/v1/usage/advice's answer.
#include "server/advice.h"

#include "server/control_plane_fixture.h"

namespace cp {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;
constexpr std::int64_t kGiB = std::int64_t{1} << 30;

ResourceUse steady(std::int64_t cpu_milli, std::int64_t memory_bytes, int samples = 100, std::int64_t gpu_util = -1) {
  ResourceUse u;
  for (int i = 0; i < samples; ++i) u.add(UseSample{cpu_milli, memory_bytes, gpu_util, gpu_util < 0 ? -1 : kGiB});
  return u;
}

const Advice* find(const std::vector<Advice>& all, const std::string& resource) {
  for (const auto& a : all) {
    if (a.resource == resource) return &a;
  }
  return nullptr;
}

TEST(Advice, EightCpusUsedAtOnePointTwoAreTwo) {
  auto all = advise(Resources::parse_or_die("cpu:8,memory:4Gi"), steady(1200, 3 * kGiB));
  const auto* cpu = find(all, "cpu");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(cpu->kind, "lower");
  EXPECT_EQ(cpu->suggest, 2000);  // 1.2 + 20 % = 1.44, whole cores above one
  // 1,200 reads back as its bucket's top (at most 12.5 % over): 1.2 or 1.3.
  EXPECT_EQ(cpu->message.rfind("requests 8 CPUs, uses 1.", 0), 0u) << cpu->message;
  EXPECT_NE(cpu->message.find(": 2 would do"), std::string::npos) << cpu->message;
  EXPECT_NE(cpu->message_zh.find("2 个即可"), std::string::npos);
  EXPECT_EQ(find(all, "memory"), nullptr);  // 3 GiB of 4: 3.75 GiB -> 4 GiB, nothing to free
}

TEST(Advice, MemoryFollowsThePeakAndTooLittleIsRaised) {
  // Peaks at 9.5 GiB of 64: 12 GiB would do.
  ResourceUse u = steady(900, 2 * kGiB);
  u.add(UseSample{900, 9 * kGiB + kGiB / 2, -1, -1});
  auto all = advise(Resources::parse_or_die("cpu:1,memory:64Gi"), u);
  const auto* mem = find(all, "memory");
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->kind, "lower");
  EXPECT_EQ(mem->suggest, 12 * kGiB);
  EXPECT_EQ(mem->message, "requests 64 GiB of memory, peaks at 9.5 GiB: 12 GiB would do");
  EXPECT_EQ(find(all, "cpu"), nullptr);  // 0.9 of 1: fine

  auto over = advise(Resources::parse_or_die("cpu:2,memory:1Gi"), steady(3100, 1536 * kMiB));
  ASSERT_NE(find(over, "memory"), nullptr);
  EXPECT_EQ(find(over, "memory")->kind, "raise");
  EXPECT_EQ(find(over, "memory")->suggest, 2 * kGiB);
  ASSERT_NE(find(over, "cpu"), nullptr);
  EXPECT_EQ(find(over, "cpu")->kind, "raise");
  EXPECT_EQ(find(over, "cpu")->suggest, 4000);
}

TEST(Advice, IdleGpusAndTooFewSamples) {
  auto all = advise(Resources::parse_or_die("cpu:4,memory:16Gi,gpu/a100:2"), steady(3000, 12 * kGiB, 100, 3));
  ASSERT_NE(find(all, "gpu"), nullptr);
  EXPECT_EQ(find(all, "gpu")->kind, "idle");
  EXPECT_EQ(find(advise(Resources::parse_or_die("cpu:4,gpu/a100:2"), steady(3000, kGiB, 100, 85)), "gpu"), nullptr);
  // Unmeasured GPUs (declared, no NVML): nothing said about them.
  EXPECT_EQ(find(advise(Resources::parse_or_die("cpu:4,gpu/a100:2"), steady(3000, kGiB)), "gpu"), nullptr);
  auto few = advise(Resources::parse_or_die("cpu:64"), steady(100, kGiB, 5));
  ASSERT_EQ(few.size(), 1u);
  EXPECT_EQ(few[0].kind, "few_samples");
}

TEST(Advice, FiguresReadAsPeopleWriteThem) {
  EXPECT_EQ(cores_text(1200), "1.2");
  EXPECT_EQ(cores_text(2000), "2");
  EXPECT_EQ(bytes_text(300 * kMiB), "300 MiB");
  EXPECT_EQ(bytes_text(12 * kGiB), "12 GiB");
  EXPECT_EQ(bytes_text(9 * kGiB + kGiB / 2), "9.5 GiB");
}

using testing::ControlPlaneTest;
using testing::kDay;
using testing::kHour;
using testing::kJan1;

// An agent's reports carry what each attempt used; at its end the server
// merges it into the step's row, and the advice reads the step over days,
// for those who may read its project group.
TEST_F(ControlPlaneTest, MeasuredUseOfAStepAcrossAttemptsBecomesAdvice) {
  auto [agent, cred] = connect("c1");
  clock_.set_ms(kJan1 + kHour);
  sync(agent, {});
  const std::string yaml =
      "apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: finetune, project_group: pa}\nspec:\n"
      "  priority: batch\n  steps:\n    - name: train\n      command: [\"true\"]\n"
      "      resources: {cpu: \"8\", memory: 64Gi}\n";
  for (int day = 0; day < 2; ++day) {
    auto ids = submit(alice_, yaml);
    ASSERT_EQ(ids.size(), 1u);
    ASSERT_TRUE(cp_->schedule_once().ok());
    auto start = sync(agent, {}).start;
    ASSERT_EQ(start.size(), 1u);
    AttemptReport r{start[0].attempt_id, start[0].epoch, AttemptState::Running, std::nullopt, clock_.now_ms(), 0, ""};
    sync(agent, {r});
    clock_.advance_ms(kHour);
    r.state = AttemptState::Succeeded;
    r.exit_code = 0;
    r.finished_at = clock_.now_ms();
    r.use = steady(1100 + 100 * day, (9 + day) * kGiB / 2, 60);
    sync(agent, {r});
    // Shown with the task's attempt.
    auto t = cp_->get_task(alice_, ids[0]);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(t->at("attempts").as_array().at(0).at("use").at("cpu_milli").at("samples").as_int64(), 60);
    clock_.advance_ms(kDay);
  }
  auto advice = cp_->usage_advice(alice_, 14, "");
  ASSERT_TRUE(advice.ok()) << advice.error().to_string();
  ASSERT_EQ(advice->size(), 1u);
  const auto& step = advice->at(0).as_object();
  EXPECT_EQ(step.at("project_group").as_string(), "pa");
  EXPECT_EQ(step.at("step").as_string(), "finetune/train");
  EXPECT_EQ(step.at("attempts").as_int64(), 2);
  EXPECT_EQ(step.at("samples").as_int64(), 120);
  EXPECT_EQ(step.at("request").at("cpu_milli").as_int64(), 8000);
  EXPECT_EQ(step.at("memory").at("max_bytes").as_int64(), 5 * kGiB);
  EXPECT_TRUE(step.at("gpu").is_null());
  const auto& items = step.at("advice").as_array();
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].at("resource").as_string(), "cpu");
  EXPECT_EQ(items[0].at("suggest").as_int64(), 2000);
  EXPECT_EQ(items[1].at("resource").as_string(), "memory");
  EXPECT_EQ(items[1].at("suggest").as_int64(), 7 * kGiB);  // 5 GiB peak + 25 % -> 7 GiB

  // Another project group sees none of it, and may not ask for it.
  EXPECT_TRUE(cp_->usage_advice(mallory_, 14, "")->empty());
  EXPECT_EQ(cp_->usage_advice(mallory_, 14, "pa").error().status, 403);
  EXPECT_EQ(cp_->usage_advice(alice_, 0, "").error().status, 400);
  // The last two days (today, Jan 3, and yesterday): the second attempt alone.
  auto recent = cp_->usage_advice(alice_, 2, "pa");
  ASSERT_TRUE(recent.ok());
  ASSERT_EQ(recent->size(), 1u);
  EXPECT_EQ(recent->at(0).at("attempts").as_int64(), 1);
}

}  // namespace
}  // namespace cp
