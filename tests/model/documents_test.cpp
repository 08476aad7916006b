// Names, labels, and the ResourceGroup / ProjectGroup / PriorityClass
// documents of API.md.
#include "model/documents.h"

#include <gtest/gtest.h>

namespace cp {
namespace {

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

json::value yaml(std::string_view text) {
  auto r = parse_document(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : json::value();
}

// A valid ResourceGroup document whose spec the tests amend.
std::string rg_doc(std::string_view spec) {
  return "apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: rg-a}\nspec:\n" + std::string(spec);
}

Error rg_error(std::string_view spec) {
  auto r = resource_group_from_document(yaml(rg_doc(spec)));
  EXPECT_FALSE(r.ok()) << spec;
  if (r.ok()) return Error{};
  EXPECT_FALSE(r.error().message_zh.empty());
  return r.error();
}

// ------------------------------------------------------------------ names

TEST(Names, Dns1123Labels) {
  // Names are lowercase letters, digits and '-', starting and ending alphanumeric, at most 63.
  for (std::string_view ok : {"a", "rg-proj-b-gpu", "0abc", "a1"}) {
    EXPECT_TRUE(is_valid_name(ok)) << ok;
  }
  EXPECT_TRUE(is_valid_name(std::string(63, 'a')));
  for (std::string_view bad : {"", "-a", "a-", "A", "a_b", "a.b", "a b", "ä"}) EXPECT_FALSE(is_valid_name(bad)) << bad;
  EXPECT_FALSE(is_valid_name(std::string(64, 'a')));
}

TEST(Names, ValidateNameNamesTheField) {
  // validate_name reports the field path, in both languages; empty reads "is required".
  Status s = validate_name("Bad_Name", "metadata.name");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().details.at("field"), "metadata.name");
  EXPECT_TRUE(contains(s.error().message, "Bad_Name"));
  EXPECT_FALSE(s.error().message_zh.empty());
  EXPECT_TRUE(contains(validate_name("", "x").error().message, "required"));
}

TEST(Labels, KubernetesRules) {
  // Label keys may have a DNS prefix; keys and values are at most 63 of [A-Za-z0-9._-].
  EXPECT_TRUE(validate_labels({{"team", "proj-b"}, {"example.com/tier", "Gold_1.2"}, {"empty", ""}}, "l").ok());
  EXPECT_FALSE(validate_labels({{"", "x"}}, "l").ok());
  EXPECT_FALSE(validate_labels({{"-team", "x"}}, "l").ok());
  EXPECT_FALSE(validate_labels({{"Example.com/tier", "x"}}, "l").ok());
  EXPECT_FALSE(validate_labels({{"a/b/c", "x"}}, "l").ok());
  EXPECT_FALSE(validate_labels({{"team", "has space"}}, "l").ok());
  EXPECT_FALSE(validate_labels({{"team", std::string(64, 'v')}}, "l").ok());
  EXPECT_FALSE(validate_labels({{std::string(64, 'k'), "v"}}, "l").ok());
  Status s = validate_labels({{"team", "-x"}}, "spec.required_labels");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().details.at("field"), "spec.required_labels.team");
}

// --------------------------------------------------------------- envelope

TEST(Envelope, ApiVersionMustBeCubeplaneV1) {
  // apiVersion other than cubeplane/v1 is refused.
  auto r = resource_group_from_document(yaml("apiVersion: v1\nkind: ResourceGroup\nmetadata: {name: a}\nspec: {}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().details.at("field"), "apiVersion");
}

TEST(Envelope, KindMustMatch) {
  // A ProjectGroup document given where a ResourceGroup is expected is refused on kind.
  auto r = resource_group_from_document(
      yaml("apiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: a}\nspec: {}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().details.at("field"), "kind");
  EXPECT_TRUE(contains(r.error().message, "ResourceGroup"));
}

TEST(Envelope, UnknownTopLevelFieldIsRefused) {
  // A misspelt top-level field is an unknown_field error.
  auto r = resource_group_from_document(
      yaml("apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: a}\nspecs: {}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "unknown_field");
  EXPECT_EQ(r.error().details.at("field"), "specs");
}

TEST(Envelope, MetadataAndSpecAreRequired) {
  // A document without metadata or spec is refused naming the missing part.
  auto no_spec = resource_group_from_document(yaml("apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: a}\n"));
  ASSERT_FALSE(no_spec.ok());
  EXPECT_EQ(no_spec.error().details.at("field"), "spec");
  auto no_name = resource_group_from_document(yaml("apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {}\nspec: {}\n"));
  ASSERT_FALSE(no_name.ok());
  EXPECT_EQ(no_name.error().details.at("field"), "metadata.name");
}

TEST(Envelope, NotAnObject) {
  // A document that is a list or a scalar is refused, not crashed on.
  EXPECT_FALSE(resource_group_from_document(yaml("[1, 2]")).ok());
  EXPECT_FALSE(pipeline_from_document(yaml("just text")).ok());
}

TEST(Envelope, BadMetadataName) {
  // An invalid metadata.name is refused with that path.
  auto r = resource_group_from_document(
      yaml("apiVersion: cubeplane/v1\nkind: ResourceGroup\nmetadata: {name: RG_A}\nspec: {}\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().details.at("field"), "metadata.name");
}

// ---------------------------------------------------------- resource group

TEST(ResourceGroupDoc, ApiExampleParses) {
  // The ResourceGroup example of API.md parses into the model.
  auto r = resource_group_from_document(yaml(R"(
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-proj-b-gpu}
spec:
  clusters: [proj-b-gpu]
  node_selector: {gpu-node-group: proj-b}
  quota:                             # guaranteed; max lets it borrow idle capacity of its cohort
    gpu/nvidia-a100-80gb: {guaranteed: 16, max: 24}
    cpu: {guaranteed: "128"}
    memory: {guaranteed: 512Gi}
  cohort: gpu-shared
  required_labels: {team: proj-b}
  placement: binpack                 # or spread
  alerts: {thresholds: [70, 85, 95], sustained: 5m, webhook: "http://..."}
)"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  const ResourceGroup& rg = *r;
  EXPECT_EQ(rg.name, "rg-proj-b-gpu");
  EXPECT_EQ(rg.clusters, std::vector<std::string>{"proj-b-gpu"});
  EXPECT_EQ(rg.node_selector.at("gpu-node-group"), "proj-b");
  EXPECT_EQ(rg.quota.at("gpu/nvidia-a100-80gb").guaranteed, 16);
  EXPECT_EQ(rg.quota.at("gpu/nvidia-a100-80gb").max, 24);
  EXPECT_EQ(rg.quota.at("cpu").guaranteed, 128000);
  EXPECT_FALSE(rg.quota.at("cpu").max.has_value());
  EXPECT_EQ(rg.quota.at("memory").guaranteed, 512LL << 30);
  EXPECT_EQ(rg.cohort, "gpu-shared");
  EXPECT_EQ(rg.required_labels.at("team"), "proj-b");
  EXPECT_EQ(rg.placement, PlacementPolicy::binpack);
  EXPECT_EQ(rg.alerts.thresholds, (std::vector<int>{70, 85, 95}));
  EXPECT_EQ(rg.alerts.sustained_s, 300);
  EXPECT_EQ(rg.alerts.webhook, "http://...");
}

TEST(ResourceGroupDoc, UnknownQuotaFieldNamesItsPath) {
  // An unknown field deep in the spec is refused with its full path.
  Error e = rg_error("  quota:\n    cpu: {guaranteed: 1, maximum: 2}\n");
  EXPECT_EQ(e.code, "unknown_field");
  EXPECT_EQ(e.details.at("field"), "spec.quota.cpu.maximum");
}

TEST(ResourceGroupDoc, UnknownSpecFieldIsRefused) {
  // A misspelt spec field is refused rather than ignored.
  Error e = rg_error("  placment: spread\n");
  EXPECT_EQ(e.code, "unknown_field");
  EXPECT_EQ(e.details.at("field"), "spec.placment");
}

TEST(ResourceGroupDoc, MaxBelowGuaranteedIsRefused) {
  // A ceiling below the guarantee is an error on max.
  Error e = rg_error("  quota:\n    gpu/a100: {guaranteed: 16, max: 8}\n");
  EXPECT_EQ(e.details.at("field"), "spec.quota.gpu/a100.max");
}

TEST(ResourceGroupDoc, QuotaNeedsAnAmount) {
  // A quota entry with neither guaranteed nor max is refused.
  EXPECT_EQ(rg_error("  quota:\n    cpu: {}\n").details.at("field"), "spec.quota.cpu");
}

TEST(ResourceGroupDoc, MaxAloneMeansBorrowOnly) {
  // max without guaranteed guarantees nothing and borrows up to max.
  auto r = resource_group_from_document(yaml(rg_doc("  quota:\n    gpu/a100: {max: 8}\n")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->quota.at("gpu/a100").guaranteed, 0);
  EXPECT_EQ(r->quota.at("gpu/a100").max, 8);
}

TEST(ResourceGroupDoc, NegativeAndHugeQuantitiesAreRefused) {
  // Negative amounts and amounts past kMaxQuantity are refused with the path.
  EXPECT_EQ(rg_error("  quota:\n    cpu: {guaranteed: \"-1\"}\n").details.at("field"), "spec.quota.cpu.guaranteed");
  EXPECT_EQ(rg_error("  quota:\n    cpu: {guaranteed: -1}\n").details.at("field"), "spec.quota.cpu.guaranteed");
  EXPECT_EQ(rg_error("  quota:\n    memory: {guaranteed: 99999999999999999999Gi}\n").details.at("field"),
            "spec.quota.memory.guaranteed");
  EXPECT_EQ(rg_error("  quota:\n    gpu/a100: {guaranteed: 9007199254740993}\n").details.at("field"),
            "spec.quota.gpu/a100.guaranteed");
}

TEST(ResourceGroupDoc, BareGpuQuotaIsRefused) {
  // Quota on "gpu" without a type is refused with a hint to use gpu/<type>.
  Error e = rg_error("  quota:\n    gpu: {guaranteed: 8}\n");
  EXPECT_TRUE(contains(e.message, "gpu/<type>")) << e.message;
}

TEST(ResourceGroupDoc, BadResourceNameIsRefused) {
  // Resource names are lowercase qualified names.
  EXPECT_EQ(rg_error("  quota:\n    CPU: {guaranteed: 1}\n").details.at("field"), "spec.quota.CPU");
  EXPECT_FALSE(resource_group_from_document(yaml(rg_doc("  quota:\n    gpu/A100: {guaranteed: 1}\n"))).ok());
}

TEST(ResourceGroupDoc, ThresholdsAscendingWithinRange) {
  // Alert thresholds are percentages 1..100 in strictly ascending order.
  EXPECT_EQ(rg_error("  alerts: {thresholds: [70, 101]}\n").details.at("field"), "spec.alerts.thresholds[1]");
  EXPECT_EQ(rg_error("  alerts: {thresholds: [0]}\n").details.at("field"), "spec.alerts.thresholds[0]");
  EXPECT_EQ(rg_error("  alerts: {thresholds: [85, 70]}\n").details.at("field"), "spec.alerts.thresholds[1]");
  EXPECT_EQ(rg_error("  alerts: {thresholds: [70, 70]}\n").details.at("field"), "spec.alerts.thresholds[1]");
}

TEST(ResourceGroupDoc, AlertDefaults) {
  // Omitted alert settings keep the defaults 70/85/95 % over 5 minutes.
  auto r = resource_group_from_document(yaml(rg_doc("  alerts: {webhook: \"https://hooks.example.com/x\"}\n")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->alerts.thresholds, (std::vector<int>{70, 85, 95}));
  EXPECT_EQ(r->alerts.sustained_s, 300);
}

TEST(ResourceGroupDoc, DurationsAreCheckedStrings) {
  // sustained takes "30s", "5m", "1h30m"; other spellings are refused.
  auto r = resource_group_from_document(yaml(rg_doc("  alerts: {sustained: 1h30m}\n")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->alerts.sustained_s, 5400);
  for (std::string_view bad : {"5", "5 m", "m", "5d", "30s5m", "-5m", "\"\"", "300"}) {
    EXPECT_EQ(rg_error("  alerts: {sustained: " + std::string(bad) + "}\n").details.at("field"), "spec.alerts.sustained")
        << bad;
  }
}

TEST(ResourceGroupDoc, WebhookMustBeHttp) {
  // A webhook that is not an http(s) URL is refused.
  EXPECT_EQ(rg_error("  alerts: {webhook: \"file:///etc/passwd\"}\n").details.at("field"), "spec.alerts.webhook");
}

TEST(ResourceGroupDoc, PlacementIsBinpackOrSpread) {
  // placement takes binpack or spread; anything else lists the choices.
  Error e = rg_error("  placement: random\n");
  EXPECT_TRUE(contains(e.message, "binpack, spread")) << e.message;
}

TEST(ResourceGroupDoc, ClusterNamesAreCheckedAndUnique) {
  // clusters are valid names, each listed once.
  EXPECT_EQ(rg_error("  clusters: [ok, Not_OK]\n").details.at("field"), "spec.clusters[1]");
  EXPECT_EQ(rg_error("  clusters: [a, a]\n").details.at("field"), "spec.clusters[1]");
}

TEST(ResourceGroupDoc, SelectorLabelsAreChecked) {
  // node_selector and required_labels follow the label rules; numbers become text.
  EXPECT_EQ(rg_error("  node_selector: {\"bad key!\": x}\n").details.at("field"), "spec.node_selector.bad key!");
  auto r = resource_group_from_document(yaml(rg_doc("  node_selector: {gpu-count: 8, maintenance: false}\n")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->node_selector.at("gpu-count"), "8");
  EXPECT_EQ(r->node_selector.at("maintenance"), "false");
}

TEST(ResourceGroupDoc, DefaultRequestWithinMaxPerTask) {
  // default_request and max_per_task are resource maps; the default may not exceed the maximum.
  auto r = resource_group_from_document(
      yaml(rg_doc("  default_request: {cpu: 1, memory: 2Gi}\n  max_per_task: {cpu: 16, gpu/a100: 8}\n")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->default_request.cpu_milli(), 1000);
  EXPECT_EQ(r->max_per_task.get("gpu/a100"), 8);
  EXPECT_EQ(rg_error("  default_request: {cpu: 32}\n  max_per_task: {cpu: 16}\n").details.at("field"),
            "spec.default_request.cpu");
}

TEST(ResourceGroupDoc, RoundTripThroughDocument) {
  // resource_group_to_document, then back, gives the same group (timestamps aside).
  auto r = resource_group_from_document(yaml(rg_doc(R"(  clusters: [c1, c2]
  node_selector: {pool: a}
  quota:
    cpu: {guaranteed: 1500m, max: "4"}
    memory: {guaranteed: 1.5Gi}
    gpu/mig-1g.10gb: {guaranteed: 2, max: 7}
  cohort: shared
  required_labels: {team: b}
  placement: spread
  alerts: {thresholds: [50, 90], sustained: 90s, webhook: "https://h/x"}
  default_request: {cpu: 500m}
  max_per_task: {memory: 64Gi}
)")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  ResourceGroup rg = *r;
  rg.created_at = 1000;
  rg.updated_at = 2000;
  json::object doc = resource_group_to_document(rg);
  EXPECT_EQ(doc.at("metadata").at("created_at").as_int64(), 1000);
  EXPECT_EQ(doc.at("metadata").at("updated_at").as_int64(), 2000);
  EXPECT_EQ(doc.at("spec").at("quota").at("cpu").at("guaranteed"), "1500m");
  // Through YAML text too, as `-o yaml` then `apply -f` would.
  auto back = resource_group_from_document(yaml(to_yaml(doc)));
  ASSERT_TRUE(back.ok()) << back.error().message << "\n" << to_yaml(doc);
  EXPECT_EQ(to_json(*back).at("quota"), to_json(rg).at("quota"));
  json::value a = to_json(*back), b = to_json(rg);
  a.as_object().erase("created_at");
  a.as_object().erase("updated_at");
  b.as_object().erase("created_at");
  b.as_object().erase("updated_at");
  EXPECT_EQ(a, b);
}

TEST(ResourceGroupDoc, StatusIsIgnoredOnApply) {
  // A document carrying status (as GET returns it) applies; status is ignored.
  auto r = resource_group_from_document(yaml(rg_doc("  clusters: [c1]\nstatus: {used: {cpu: \"2\"}}\n")));
  ASSERT_TRUE(r.ok()) << r.error().message;
}

// ----------------------------------------------------------- project group

std::string pg_doc(std::string_view spec) {
  return "apiVersion: cubeplane/v1\nkind: ProjectGroup\nmetadata: {name: proj-b}\nspec:\n" + std::string(spec);
}

Error pg_error(std::string_view spec) {
  auto r = project_group_from_document(yaml(pg_doc(spec)));
  EXPECT_FALSE(r.ok()) << spec;
  return r.ok() ? Error{} : r.error();
}

TEST(ProjectGroupDoc, ApiExampleParses) {
  // The ProjectGroup example of API.md parses into the model.
  auto r = project_group_from_document(yaml(R"(
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: proj-b}
spec:
  members: [{user: alice, role: admin}, {user: bob, role: member}]
  default_resource_group: rg-proj-b-gpu
  resource_groups: [{name: rg-common-gpu, approval: required}]
  monthly_budget: {gpu_hours: 5000}
)"));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "proj-b");
  ASSERT_EQ(r->members.size(), 2u);
  EXPECT_EQ(r->role_of("alice"), ProjectRole::admin);
  EXPECT_EQ(r->role_of("bob"), ProjectRole::member);
  EXPECT_EQ(r->default_resource_group, "rg-proj-b-gpu");
  ASSERT_EQ(r->resource_groups.size(), 1u);
  EXPECT_EQ(r->resource_groups[0].name, "rg-common-gpu");
  EXPECT_EQ(r->resource_groups[0].approval, "required");
  EXPECT_EQ(r->monthly_budget.gpu_hours, 5000);
  EXPECT_FALSE(r->monthly_budget.cost_cents.has_value());
}

TEST(ProjectGroupDoc, RoleMustBeKnown) {
  // A role other than admin, member or viewer is refused at its path.
  Error e = pg_error("  members: [{user: alice, role: owner}]\n");
  EXPECT_EQ(e.details.at("field"), "spec.members[0].role");
}

TEST(ProjectGroupDoc, UserNamesFollowTheNameRule) {
  // Member user names are DNS-1123 labels, each listed once.
  EXPECT_EQ(pg_error("  members: [{user: Alice}]\n").details.at("field"), "spec.members[0].user");
  EXPECT_EQ(pg_error("  members: [{user: a}, {user: a, role: viewer}]\n").details.at("field"), "spec.members[1].user");
}

TEST(ProjectGroupDoc, ApprovalIsRequiredOrNone) {
  // approval takes required or none.
  EXPECT_EQ(pg_error("  resource_groups: [{name: rg-x, approval: maybe}]\n").details.at("field"),
            "spec.resource_groups[0].approval");
}

TEST(ProjectGroupDoc, GrantsAreUniqueAndNotTheDefault) {
  // A resource group is granted once, and not again when it is the default.
  EXPECT_EQ(pg_error("  resource_groups: [{name: a}, {name: a}]\n").details.at("field"),
            "spec.resource_groups[1].name");
  EXPECT_EQ(pg_error("  default_resource_group: a\n  resource_groups: [{name: a}]\n").details.at("field"),
            "spec.resource_groups[0].name");
}

TEST(ProjectGroupDoc, BudgetCostInCents) {
  // monthly_budget.cost is money with at most two decimals, kept in cents.
  auto r = project_group_from_document(yaml(pg_doc("  monthly_budget: {cost: 1234.5}\n")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->monthly_budget.cost_cents, 123450);
  EXPECT_EQ(pg_error("  monthly_budget: {cost: 1.234}\n").details.at("field"), "spec.monthly_budget.cost");
  EXPECT_EQ(pg_error("  monthly_budget: {cost: -5}\n").details.at("field"), "spec.monthly_budget.cost");
  EXPECT_EQ(pg_error("  monthly_budget: {gpu_hours: -1}\n").details.at("field"), "spec.monthly_budget.gpu_hours");
}

TEST(ProjectGroupDoc, RoundTripThroughDocument) {
  // project_group_to_document, then back, gives the same group.
  auto r = project_group_from_document(yaml(pg_doc(R"(  members: [{user: alice, role: admin}, {user: carol, role: viewer}]
  default_resource_group: rg-a
  resource_groups: [{name: rg-b, approval: required}, {name: rg-c}]
  monthly_budget: {gpu_hours: 10, cost: "99.99"}
)")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  json::object doc = project_group_to_document(*r);
  auto back = project_group_from_document(yaml(to_yaml(doc)));
  ASSERT_TRUE(back.ok()) << back.error().message << "\n" << to_yaml(doc);
  EXPECT_EQ(to_json(*back), to_json(*r));
}

// ---------------------------------------------------------- priority class

std::string pc_doc(std::string_view spec) {
  return "apiVersion: cubeplane/v1\nkind: PriorityClass\nmetadata: {name: urgent}\nspec:\n" + std::string(spec);
}

TEST(PriorityClassDoc, Parses) {
  // A full PriorityClass spec parses, durations in seconds.
  auto r = priority_class_from_document(yaml(pc_doc(
      "  value: 1000\n  preemptible: false\n  may_preempt: true\n  preempt_after: 10m\n  grace: 30s\n  description: 紧急任务\n")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->name, "urgent");
  EXPECT_EQ(r->value, 1000);
  EXPECT_FALSE(r->preemptible);
  EXPECT_TRUE(r->may_preempt);
  EXPECT_EQ(r->preempt_after_s, 600);
  EXPECT_EQ(r->grace_s, 30);
  EXPECT_EQ(r->description, "紧急任务");
}

TEST(PriorityClassDoc, DefaultsFromTheModel) {
  // Omitted fields keep PriorityClass's defaults (preemptible, grace 30s).
  auto r = priority_class_from_document(yaml(pc_doc("  value: -5\n")));
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->value, -5);
  EXPECT_TRUE(r->preemptible);
  EXPECT_FALSE(r->may_preempt);
  EXPECT_EQ(r->grace_s, 30);
}

TEST(PriorityClassDoc, ValueRange) {
  // value is within -1000000..1000000.
  EXPECT_TRUE(priority_class_from_document(yaml(pc_doc("  value: 1000000\n"))).ok());
  auto r = priority_class_from_document(yaml(pc_doc("  value: 1000001\n")));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().details.at("field"), "spec.value");
  EXPECT_FALSE(priority_class_from_document(yaml(pc_doc("  value: 99999999999\n"))).ok());
  EXPECT_FALSE(priority_class_from_document(yaml(pc_doc("  value: 1.5\n"))).ok());
  EXPECT_FALSE(priority_class_from_document(yaml(pc_doc("  value: \"10\"\n"))).ok());
  EXPECT_EQ(priority_class_from_document(yaml(pc_doc("  value: -1000000\n")))->value, -1000000);
}

TEST(PriorityClassDoc, WrongTypes) {
  // preemptible must be a bool and grace a duration string.
  auto a = priority_class_from_document(yaml(pc_doc("  preemptible: \"no\"\n")));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.error().details.at("field"), "spec.preemptible");
  auto b = priority_class_from_document(yaml(pc_doc("  grace: 30\n")));
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().details.at("field"), "spec.grace");
}

TEST(PriorityClassDoc, RoundTripThroughDocument) {
  // priority_class_to_document, then back, gives the same class.
  PriorityClass pc{"batch", -10, true, true, 5400, 45, "nightly jobs", 77};
  json::object doc = priority_class_to_document(pc);
  EXPECT_EQ(doc.at("spec").at("preempt_after"), "1h30m");
  EXPECT_FALSE(doc.at("metadata").as_object().contains("updated_at"));
  auto back = priority_class_from_document(yaml(to_yaml(doc)));
  ASSERT_TRUE(back.ok()) << back.error().message;
  back->created_at = 77;
  EXPECT_EQ(to_json(*back), to_json(pc));
}

}  // namespace
}  // namespace cp
