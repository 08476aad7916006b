#include "cli/views.h"

#include <gtest/gtest.h>

namespace cp::cli {
namespace {

constexpr Millis kNow = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

json::array items(std::string_view text) { return parse_json(text).value().as_array(); }
json::value doc(std::string_view text) { return parse_json(text).value(); }

bool contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST(TasksTable, ImportantColumnsAndTheFirstReasonInTheUsersLanguage) {
  auto tasks = items(R"([
    {"id":"t-1","name":"train","state":"Queued","project_group":"proj-b","resource_group":"rg-b",
     "created_at":1767225300000,
     "reasons":[{"code":"quota_exceeded","message":"rg-b has 4 of 16 GPUs free; the task asks for 8",
                 "message_zh":"rg-b 的 16 块 GPU 只剩 4 块空闲，任务需要 8 块"},
                {"code":"other","message":"second"}]},
    {"id":"t-2","name":"prepare","state":"Running","project_group":"proj-b","resource_group":"rg-b",
     "assigned_cluster":"gpu-east","created_at":1767218400000,"reasons":[]}
  ])");
  EXPECT_EQ(tasks_table(tasks, kNow, "en"),
            "ID    NAME      STATE     PROJECT GROUP   RESOURCE GROUP   CLUSTER    AGE   REASON\n"
            "t-1   train     Queued    proj-b          rg-b             -          5m    "
            "rg-b has 4 of 16 GPUs free; the task asks for 8\n"
            "t-2   prepare   Running   proj-b          rg-b             gpu-east   2h\n");
  EXPECT_TRUE(contains(tasks_table(tasks, kNow, "zh-CN"), "rg-b 的 16 块 GPU 只剩 4 块空闲"));
}

TEST(TasksTable, APinnedClusterShowsUntilTheTaskIsPlaced) {
  auto tasks = items(R"([{"id":"t-1","cluster":"pinned","assigned_cluster":""},
                         {"id":"t-2","cluster":"pinned","assigned_cluster":"placed"}])");
  std::string table = tasks_table(tasks, kNow, "en");
  EXPECT_TRUE(contains(table, "pinned")) << table;
  EXPECT_TRUE(contains(table, "placed")) << table;
}

TEST(TasksTable, LongReasonsAreTruncated) {
  std::string long_reason(200, 'x');
  auto tasks = items(R"([{"id":"t-1","reasons":[{"message":")" + long_reason + R"("}]}])");
  std::string table = tasks_table(tasks, kNow, "en");
  EXPECT_TRUE(contains(table, std::string(57, 'x') + "...\n"));
  EXPECT_FALSE(contains(table, std::string(58, 'x')));
}

TEST(TaskDetails, FieldsReasonsAndAttempts) {
  auto task = doc(R"({"id":"t-1","name":"train","pipeline_id":"p-1","state":"Failed","project_group":"pg",
    "resource_group":"rg","priority_class":"urgent","priority":100,"user":"alice","assigned_cluster":"c1",
    "step":{"resources":{"cpu":"8","gpu/a100":"1"},"replicas":2},"exit_code":137,
    "created_at":1767225000000,"started_at":1767225060000,"finished_at":1767225540000,
    "reasons":[{"message":"out of memory","message_zh":"内存不足"}],
    "attempts":[{"number":1,"cluster_id":"c1","placements":[{"replica":0,"node":"n1"},{"replica":1,"node":"n1"}],
                 "state":"Failed","exit_code":137,"started_at":1767225060000,"finished_at":1767225540000,
                 "message":"OOMKilled"}]})");
  std::string text = task_details(task, kNow, "en");
  EXPECT_TRUE(contains(text, "State:           Failed\n"));
  EXPECT_TRUE(contains(text, "Priority:        urgent (100)\n"));
  EXPECT_TRUE(contains(text, "Resources:       cpu=8, gpu/a100=1\n"));
  EXPECT_TRUE(contains(text, "Started:         2025-12-31T23:51:00Z (9m ago)\n"));
  EXPECT_TRUE(contains(text, "Exit code:       137\n"));
  EXPECT_TRUE(contains(text, "Reasons:\n  - out of memory\n"));
  EXPECT_TRUE(contains(text, "Attempts:\n  #   CLUSTER"));
  EXPECT_TRUE(contains(text, "  1   c1        n1      Failed"));
  EXPECT_TRUE(contains(text, "OOMKilled\n"));
}

TEST(ExplainText, StateThenReasonsThenAttemptsInEnglish) {
  auto explain = doc(R"({"task_id":"t-1","state":"Queued","summary":"Waiting for quota.","summary_zh":"等待配额。",
    "reasons":[{"code":"quota_exceeded","message":"rg-b has 4 of 16 GPUs free","message_zh":"rg-b 只剩 4 块 GPU"},
               {"code":"no_matching_node","message":"no node has 8 GPUs","message_zh":"没有节点有 8 块 GPU"}],
    "attempts":[{"number":1,"cluster_id":"c1","placements":[{"node":"n1"}],"state":"Preempted","exit_code":143,
                 "stop_reason":"preempt","started_at":1767225000000}]})");
  EXPECT_EQ(explain_text(explain, kNow, "en"),
            "Task t-1 is Queued.\n"
            "Waiting for quota.\n"
            "Why it waits:\n"
            "  - rg-b has 4 of 16 GPUs free\n"
            "  - no node has 8 GPUs\n"
            "Attempts:\n"
            "  #1 on cluster c1 (node n1): Preempted, exit code 143, stopped by preempt, started 10m ago\n");
}

TEST(ExplainText, ChineseUsesMessageZh) {
  auto explain = doc(R"({"task_id":"t-1","state":"Queued","summary_zh":"等待配额。",
    "reasons":[{"message":"rg-b has 4 of 16 GPUs free","message_zh":"rg-b 只剩 4 块 GPU"}],"attempts":[]})");
  EXPECT_EQ(explain_text(explain, kNow, "zh-CN"),
            "任务 t-1 当前状态：Queued。\n"
            "等待配额。\n"
            "等待原因：\n"
            "  - rg-b 只剩 4 块 GPU\n"
            "尚未运行过。\n");
}

TEST(ExplainText, AQueuedTaskWithoutReasonsSaysSo) {
  std::string text = explain_text(doc(R"({"task_id":"t-1","state":"Queued"})"), kNow, "en");
  EXPECT_TRUE(contains(text, "No reasons recorded yet"));
  EXPECT_TRUE(contains(text, "It has not run yet."));
}

TEST(SubmitSummary, PipelineIdThenTasks) {
  auto answer = doc(R"({"pipeline":{"id":"p-1","name":"llama"},
    "tasks":[{"id":"t-1","name":"prepare","state":"Queued"},{"id":"t-2","name":"train","state":"Queued"}]})");
  EXPECT_EQ(submit_summary(answer, "en"),
            "pipeline p-1 (llama) submitted\n"
            "TASK ID   NAME      STATE\n"
            "t-1       prepare   Queued\n"
            "t-2       train     Queued\n");
  EXPECT_TRUE(contains(submit_summary(answer, "zh-CN"), "已提交流水线 p-1（llama）"));
}

TEST(ClustersTable, ContactAgeAndCredentialExpiry) {
  auto clusters = items(R"([
    {"id":"gpu-east","executor":"slurm","state":"online","state_reason":"","storage_pool":"default",
     "last_contact":1767225595000,"credential_expires_at":1769817600000},
    {"id":"new","executor":"local","state":"offline","state_reason":"never_connected","storage_pool":"p2",
     "last_contact":0,"credential_expires_at":1767225000000}])");
  EXPECT_EQ(clusters_table(clusters, kNow),
            "ID         EXECUTOR   STATE     REASON            POOL      LAST CONTACT   CREDENTIAL EXPIRES\n"
            "gpu-east   slurm      online    -                 default   5s ago         2026-01-31T00:00:00Z\n"
            "new        local      offline   never_connected   p2        never          "
            "2025-12-31T23:50:00Z (expired)\n");
}

TEST(ClusterDetails, ShowsAgentAndLabels) {
  std::string text = cluster_details(
      doc(R"({"id":"c1","executor":"local","labels":{"region":"east"},"agent_instance":"a-1","agent_version":"0.1.0"})"),
      kNow);
  EXPECT_TRUE(contains(text, "Labels:              region=east\n"));
  EXPECT_TRUE(contains(text, "Agent:               a-1 v0.1.0\n"));
  EXPECT_TRUE(contains(text, "Last contact:        never\n"));
}

TEST(NodesTable, GpusReadinessMaintenanceDriftAndEffectiveLabels) {
  auto nodes = items(R"([
    {"cluster_id":"c1","name":"n1","ready":true,"maintenance":false,
     "capacity":{"cpu":"64","memory":"512Gi","gpu/nvidia-a100-80gb":"4"},
     "labels":{"zone":"a"},"effective_labels":{"zone":"b","gpu-type":"a100"}},
    {"cluster_id":"c1","name":"n2","ready":false,"not_ready_reason":"agent lost","maintenance":false,
     "capacity":{"cpu":"8","memory":"32Gi"},"labels":{"maintenance":"true"},
     "drift":[{"kind":"kernel","message":"..."},{"kind":"gpus","message":"..."}]}])");
  EXPECT_EQ(nodes_table(nodes),
            "CLUSTER   NAME   READY             MAINT   GPUS                  CPU   MEMORY   DRIFT          LABELS\n"
            "c1        n1     yes               no      4x nvidia-a100-80gb   64    512Gi    -              "
            "zone=b,gpu-type=a100\n"
            "c1        n2     no (agent lost)   yes     -                     8     32Gi     kernel, gpus   "
            "maintenance=true\n");
}

TEST(ResourceGroupsTable, QuotaUsedOverGuaranteed) {
  auto groups = items(R"([{"apiVersion":"cubeplane/v1","kind":"ResourceGroup",
    "metadata":{"name":"rg-b","created_at":1767139200000},
    "spec":{"clusters":["c1","c2"],"cohort":"gpu-shared","quota":{"gpu/a100":{"guaranteed":16,"max":24}}},
    "status":{"used":{"gpu/a100":"4"},"queued":3,"running":2}}])");
  EXPECT_EQ(resource_groups_table(groups, kNow),
            "NAME   CLUSTERS   QUOTA                    COHORT       QUEUED   RUNNING   AGE\n"
            "rg-b   c1,c2      gpu/a100 4/16 (max 24)   gpu-shared   3        2         1d\n");
}

TEST(ProjectGroupsTable, MembersGrantsAndBudget) {
  auto groups = items(R"([{"kind":"ProjectGroup","metadata":{"name":"proj-b"},
    "spec":{"members":[{"user":"alice","role":"admin"},{"user":"bob","role":"member"}],
            "default_resource_group":"rg-b","resource_groups":[{"name":"rg-common","approval":"required"}],
            "monthly_budget":{"gpu_hours":5000}}}])");
  std::string table = project_groups_table(groups, kNow);
  EXPECT_TRUE(contains(table, "proj-b   rg-b"));
  EXPECT_TRUE(contains(table, "rg-common(approval)"));
  EXPECT_TRUE(contains(table, "alice(admin),bob"));
  EXPECT_TRUE(contains(table, "5000 GPU-h/month"));
}

TEST(PriorityClassesTable, DocumentsOrPlainObjects) {
  auto classes = items(R"([
    {"kind":"PriorityClass","metadata":{"name":"urgent"},
     "spec":{"value":100,"preemptible":false,"may_preempt":true,"preempt_after_s":600,"grace_s":30}},
    {"name":"batch","value":10,"preemptible":true,"may_preempt":false,"description":"best effort"}])");
  EXPECT_EQ(priority_classes_table(classes),
            "NAME     VALUE   PREEMPTIBLE   MAY PREEMPT   PREEMPT AFTER   GRACE   DESCRIPTION\n"
            "urgent   100     no            yes           600s            30s\n"
            "batch    10      yes           no            -               -       best effort\n");
}

TEST(UsageTable, GroupKeysInTheirOrderThenHours) {
  auto rows = items(R"([
    {"cluster":"c1","project_group":"pb","gpu_seconds":5400,"cpu_core_seconds":36000,
     "memory_gib_seconds":7200,"attempts":3}])");
  EXPECT_EQ(usage_table(rows),
            "PROJECT GROUP   CLUSTER   GPU HOURS   CPU CORE HOURS   MEMORY GIB HOURS   ATTEMPTS\n"
            "pb              c1        1.5         10.0             2.0                3\n");
}

TEST(EventsTable, ChangeAndObject) {
  auto events = items(R"([{"id":1,"at":1767225600000,"actor":"scheduler","object_kind":"task","object_id":"t-1",
                           "type":"task.state","from":"Queued","to":"Admitted","message":"admitted"}])");
  EXPECT_EQ(events_table(events),
            "TIME                   ACTOR       OBJECT     TYPE         CHANGE               MESSAGE\n"
            "2026-01-01T00:00:00Z   scheduler   task/t-1   task.state   Queued -> Admitted   admitted\n");
}

TEST(SecretText, TokenAndExpiry) {
  std::string text =
      secret_text(doc(R"({"token":"cpb_123","cluster_id":"c1","expires_at":1767312000000})"), "en");
  EXPECT_TRUE(contains(text, "Token:    cpb_123\n"));
  EXPECT_TRUE(contains(text, "Cluster:  c1\n"));
  EXPECT_TRUE(contains(text, "Expires:  2026-01-02T00:00:00Z\n"));
  EXPECT_TRUE(contains(text, "shown only once"));
}

TEST(Kinds, SlugAndCollection) {
  EXPECT_EQ(kind_slug("ResourceGroup"), "resourcegroup");
  EXPECT_EQ(collection_for_kind("ResourceGroup"), "resource-groups");
  EXPECT_EQ(collection_for_kind("ProjectGroup"), "project-groups");
  EXPECT_EQ(collection_for_kind("PriorityClass"), "priority-classes");
  EXPECT_EQ(collection_for_kind("Pipeline"), "");
}

}  // namespace
}  // namespace cp::cli
