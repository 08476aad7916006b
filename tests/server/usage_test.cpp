// The usage ledger as the control plane keeps it: rebuilt from the attempts'
// end events, whole months at a time, to exactly what it was.
#include "model/documents.h"
#include "server/internal.h"
#include "server/control_plane_fixture.h"

namespace cp {
namespace {

using testing::ControlPlaneTest;
using testing::kDay;
using testing::kHour;
using testing::kJan1;
using testing::pipeline_yaml;

constexpr Millis kFeb1 = 1'769'904'000'000;  // 2026-02-01T00:00:00Z
constexpr Millis kMar1 = 1'772'323'200'000;  // 2026-03-01T00:00:00Z

class UsageTest : public ControlPlaneTest {
 protected:
  // Runs one task of `gpus` GPUs on c1 from now for `hours`, ending as `end`.
  void run(int gpus, double hours, AttemptState end) {
    auto ids = submit(alice_, pipeline_yaml("pa", gpus));
    ASSERT_EQ(ids.size(), 1u);
    ASSERT_TRUE(cp_->schedule_once().ok());
    auto start = sync(agent_, {}).start;
    ASSERT_EQ(start.size(), 1u);
    const auto& order = start[0];
    const Millis started = clock_.now_ms();
    sync(agent_, {AttemptReport{order.attempt_id, order.epoch, AttemptState::Running, std::nullopt, started, 0, ""}});
    clock_.advance_ms(static_cast<Millis>(hours * kHour));
    sync(agent_, {AttemptReport{order.attempt_id, order.epoch, end, end == AttemptState::Succeeded ? 0 : 1, started,
                                clock_.now_ms(), ""}});
  }

  std::string report(Millis from, Millis to) {
    auto rows = cp_->usage(admin_, from, to, {"day", "outcome", "project_group", "cluster", "gpu_type"});
    EXPECT_TRUE(rows.ok()) << (rows.ok() ? "" : rows.error().message);
    return rows.ok() ? json::serialize(*rows) : "";
  }

  Principal agent_;
};

TEST_F(UsageTest, ARebuildFromEventsGivesBackExactlyTheLedgerAcrossAMonthBoundary) {
  clock_.set_ms(kFeb1 - 2 * kHour);
  agent_ = connect("c1").first;
  sync(agent_, {});
  run(2, 3.5, AttemptState::Succeeded);  // Jan 31 22:00 .. Feb 1 01:30
  clock_.advance_ms(kHour);
  run(1, 0.25, AttemptState::Failed);
  clock_.set_ms(kFeb1 + 10 * kDay);
  run(3, 1, AttemptState::Succeeded);
  const std::string before = report(kJan1, kMar1);
  ASSERT_NE(before, "[]");

  // The ledger goes wrong: a row too many in February, January's rows gone.
  ASSERT_TRUE(store_
                  ->write([&](Tx& tx) -> Status {
                    UsageRow junk;
                    junk.day = kFeb1 + 3 * kDay;
                    junk.project_group = "pa";
                    junk.outcome = "Succeeded";
                    junk.gpu_ms = 123456;
                    CP_TRY(tx.add_usage({junk}));
                    CP_ASSIGN(auto removed, tx.delete_usage_months(kJan1, kFeb1));
                    EXPECT_GT(removed, 0);
                    return {};
                  })
                  .ok());
  ASSERT_NE(report(kJan1, kMar1), before);

  auto r = cp_->rebuild_usage(admin_, kJan1, kMar1);
  ASSERT_TRUE(r.ok()) << r.error().to_string();
  EXPECT_EQ(report(kJan1, kMar1), before);
  EXPECT_EQ(r->at("attempts").as_int64(), 3);
  EXPECT_EQ(r->at("from").as_string(), "2026-01-01T00:00:00.000Z");
  // Again: the same, not twice as much.
  ASSERT_TRUE(cp_->rebuild_usage(admin_, kJan1, kMar1).ok());
  EXPECT_EQ(report(kJan1, kMar1), before);

  // February alone leaves January as it is and keeps the attempt that
  // crossed midnight split: 2 h in January, 1.5 h in February.
  ASSERT_TRUE(cp_->rebuild_usage(admin_, kFeb1, kMar1).ok());
  EXPECT_EQ(report(kJan1, kMar1), before);
  auto jan = cp_->usage(admin_, kJan1, kFeb1, {"month"});
  ASSERT_TRUE(jan.ok());
  ASSERT_EQ(jan->size(), 1u);
  EXPECT_DOUBLE_EQ(jan->at(0).at("gpu_seconds").as_double(), 2 * 2 * 3600.0);
}

TEST_F(UsageTest, ARebuildIsRefusedWhenItCannotBeExactAndThenChangesNothing) {
  clock_.set_ms(kFeb1 + kDay);
  agent_ = connect("c1").first;
  sync(agent_, {});
  run(1, 1, AttemptState::Succeeded);
  const std::string before = report(kJan1, kMar1);

  EXPECT_EQ(cp_->rebuild_usage(alice_, kFeb1, kMar1).error().status, 403);
  EXPECT_EQ(cp_->rebuild_usage(admin_, kFeb1 + kDay, kMar1).error().status, 400);  // not a month start
  EXPECT_EQ(cp_->rebuild_usage(admin_, kMar1, kFeb1).error().status, 400);
  EXPECT_EQ(cp_->rebuild_usage(admin_, kMar1 + 31 * kDay, kMar1 + 61 * kDay).error().status, 400);  // future

  // An end event without usage data, whose attempt retention removed.
  ASSERT_TRUE(store_
                  ->write([&](Tx& tx) -> Status {
                    auto e = internal::make_event(kFeb1 + 2 * kDay, "agent:c1", "attempt", "gone.1", "attempt.state",
                                                  "", "Succeeded");
                    CP_ASSIGN(auto id, tx.append_event(e));
                    (void)id;
                    return {};
                  })
                  .ok());
  auto missing = cp_->rebuild_usage(admin_, kFeb1, kMar1);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().status, 409);
  EXPECT_NE(missing.error().message.find("gone.1"), std::string::npos);
  EXPECT_EQ(report(kJan1, kMar1), before);

  // Months older than event retention keeps (90 days) may lack events.
  clock_.set_ms(kFeb1 + 100 * kDay);
  auto old = cp_->rebuild_usage(admin_, kFeb1, kMar1);
  ASSERT_FALSE(old.ok());
  EXPECT_EQ(old.error().status, 409);
  EXPECT_NE(old.error().message_zh.find("保留"), std::string::npos);
  EXPECT_EQ(report(kJan1, kMar1), before);
}

// A project group with a monthly budget shows it burning down: used,
// percent, the month's end at the pace so far, and when it runs out.
TEST_F(UsageTest, ABudgetShowsItsPaceAndWhenItRunsOut) {
  auto budget = [&](int gpu_hours) {
    auto doc = parse_document(
        "apiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: pa}\nspec:\n  members: [{user: alice, role: "
        "member}]\n  default_resource_group: rg-a\n  monthly_budget: {gpu_hours: " +
        std::to_string(gpu_hours) + "}\n");
    ASSERT_TRUE(doc.ok());
    ASSERT_TRUE(cp_->apply_document(admin_, "ProjectGroup", *doc, std::string("pa")).ok());
  };
  budget(100);
  clock_.set_ms(kJan1);
  agent_ = connect("c1").first;
  sync(agent_, {});
  run(2, 3, AttemptState::Succeeded);  // 6 GPU hours on Jan 1
  clock_.set_ms(kJan1 + 3 * kDay);     // 3 of January's 31 days gone

  auto pa = cp_->get_document(alice_, "ProjectGroup", "pa");
  ASSERT_TRUE(pa.ok()) << pa.error().to_string();
  const auto& b = pa->at("status").at("budget");
  EXPECT_EQ(b.at("month").as_string(), "2026-01");
  const auto& gpu = b.at("gpu_hours");
  EXPECT_DOUBLE_EQ(gpu.at("used").as_double(), 6.0);
  EXPECT_DOUBLE_EQ(gpu.at("budget").as_double(), 100.0);
  EXPECT_DOUBLE_EQ(gpu.at("percent").as_double(), 6.0);
  EXPECT_NEAR(gpu.at("projected").as_double(), 62.0, 1e-9);  // 6 in 3 days of 31
  EXPECT_FALSE(gpu.as_object().contains("runs_out_at"));

  budget(50);  // at 2 GPU hours a day, 50 are gone after 25 days
  auto list = cp_->list_documents(alice_, "ProjectGroup");
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ(list->at(0).at("status").at("budget").at("gpu_hours").at("runs_out_at").as_string(),
            "2026-01-26T00:00:00.000Z");
  // Groups without a budget have no budget status; others' groups stay unseen.
  EXPECT_TRUE(cp_->list_documents(mallory_, "ProjectGroup")->at(0).as_object().if_contains("status") == nullptr);
}

// An end event written before events carried usage still rebuilds, from
// the attempt's own row.
TEST_F(UsageTest, OlderEndEventsWithoutUsageAreRebuiltFromTheAttemptRow) {
  clock_.set_ms(kFeb1 + kDay);
  agent_ = connect("c1").first;
  sync(agent_, {});
  run(2, 2, AttemptState::Succeeded);
  const std::string before = report(kJan1, kMar1);
  ASSERT_TRUE(store_
                  ->write([&](Tx& tx) -> Status {
                    EventQuery q;
                    q.type = "attempt.state";
                    q.limit = 1000;
                    CP_ASSIGN(auto events, tx.list_events(q));
                    EXPECT_EQ(events.size(), 1u);
                    // Every event goes, and the end comes back as an older
                    // server wrote it: without the usage data.
                    CP_ASSIGN(auto gone, tx.delete_events_before(clock_.now_ms() + 1, 1000));
                    EXPECT_GT(gone, 0);
                    for (auto& e : events) {
                      EXPECT_TRUE(internal::usage_source(e).has_value());
                      e.data.erase("usage");
                      e.id = 0;
                      CP_ASSIGN(auto id, tx.append_event(e));
                      (void)id;
                    }
                    CP_ASSIGN(auto removed, tx.delete_usage_months(kFeb1, kMar1));
                    EXPECT_GT(removed, 0);
                    return {};
                  })
                  .ok());
  ASSERT_NE(report(kJan1, kMar1), before);
  ASSERT_TRUE(cp_->rebuild_usage(admin_, kFeb1, kMar1).ok());
  EXPECT_EQ(report(kJan1, kMar1), before);
}

}  // namespace
}  // namespace cp
