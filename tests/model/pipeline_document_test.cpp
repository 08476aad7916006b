// Pipeline documents (API.md "Pipeline YAML") and topological_order.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "model/documents.h"

namespace cp {
namespace {

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

// A pipeline with the given steps (YAML list items indented by four).
std::string pipeline_doc(std::string_view steps, std::string_view spec_extra = "") {
  return "apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, project_group: proj-b}\nspec:\n" +
         std::string(spec_extra) + "  steps:\n" + std::string(steps);
}

Result<Pipeline> parse(std::string_view text) {
  auto doc = parse_document(text);
  if (!doc.ok()) return doc.error();
  return pipeline_from_document(*doc);
}

Pipeline parse_ok(std::string_view text) {
  auto r = parse(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : Pipeline{};
}

Error parse_err(std::string_view text) {
  auto r = parse(text);
  EXPECT_FALSE(r.ok()) << text;
  if (r.ok()) return Error{};
  EXPECT_FALSE(r.error().message.empty());
  EXPECT_FALSE(r.error().message_zh.empty());
  return r.error();
}

std::string field(const Error& e) {
  auto* f = e.details.if_contains("field");
  return f && f->is_string() ? std::string(f->get_string()) : "(no field) " + e.message;
}

TEST(PipelineDoc, ApiExampleParses) {
  // The Pipeline example of API.md parses into the model.
  Pipeline p = parse_ok(R"(
apiVersion: cubeplane/v1
kind: Pipeline
metadata:
  name: llama-7b-finetune
  project_group: proj-b
  labels: {team: proj-b}            # may route to a resource group by its label policy
spec:
  resource_group: rg-proj-b-gpu     # optional: default comes from the project group
  priority: urgent                  # a PriorityClass name
  cluster_selector: {region: east}  # optional; or cluster: proj-b-gpu to pin one
  steps:
    - name: prepare
      command: ["python", "prep.py"]
      image: pytorch/pytorch:2.3.0  # used where the executor runs containers
      resources: {cpu: "2", memory: "4Gi"}
    - name: train
      depends_on: [prepare]
      replicas: 2                   # a gang: all replicas start together or none
      resources: {cpu: "8", memory: "32Gi", gpu: 1, gpu_type: nvidia-a100-80gb}
      checkpoint: true              # CUBEPLANE_CHECKPOINT_DIR is set; resumes after preemption
      max_retries: 2
      env: {EPOCHS: "3"}
)");
  EXPECT_EQ(p.name, "llama-7b-finetune");
  EXPECT_EQ(p.project_group, "proj-b");
  EXPECT_EQ(p.labels.at("team"), "proj-b");
  EXPECT_EQ(p.resource_group, "rg-proj-b-gpu");
  EXPECT_EQ(p.priority, "urgent");
  EXPECT_EQ(p.cluster_selector.at("region"), "east");
  ASSERT_EQ(p.steps.size(), 2u);
  const Step& prep = p.steps[0];
  EXPECT_EQ(prep.command, (std::vector<std::string>{"python", "prep.py"}));
  EXPECT_EQ(prep.image, "pytorch/pytorch:2.3.0");
  EXPECT_EQ(prep.resources, Resources::parse_or_die("cpu:2,memory:4Gi"));
  EXPECT_EQ(prep.replicas, 1);
  const Step& train = p.steps[1];
  EXPECT_EQ(train.depends_on, std::vector<std::string>{"prepare"});
  EXPECT_EQ(train.replicas, 2);
  EXPECT_EQ(train.resources, Resources::parse_or_die("cpu:8,memory:32Gi,gpu/nvidia-a100-80gb:1"));
  EXPECT_TRUE(train.checkpoint);
  EXPECT_EQ(train.max_retries, 2);
  EXPECT_EQ(train.env.at("EPOCHS"), "3");
}

TEST(PipelineDoc, JsonBodyParsesToo) {
  // The same pipeline sent as JSON parses the same way.
  Pipeline p = parse_ok(R"({"apiVersion": "cubeplane/v1", "kind": "Pipeline", "metadata": {"name": "j"},
    "spec": {"steps": [{"name": "s", "command": ["true"], "resources": {"cpu": "500m"}}]}})");
  EXPECT_EQ(p.steps[0].resources.cpu_milli(), 500);
}

TEST(PipelineDoc, CommandStringRunsInShell) {
  // A command given as one string runs through /bin/sh -c.
  Pipeline p = parse_ok(pipeline_doc("    - {name: a, command: \"python train.py | tee log\"}\n"));
  EXPECT_EQ(p.steps[0].command, (std::vector<std::string>{"/bin/sh", "-c", "python train.py | tee log"}));
}

TEST(PipelineDoc, CommandMustNotBeEmpty) {
  // An empty-string or empty-list command is refused.
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: \"\"}\n"))), "spec.steps[0].command");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: []}\n"))), "spec.steps[0].command");
}

TEST(PipelineDoc, CommandLeftOutRunsTheImage) {
  // A step without a command is accepted (its image's entrypoint runs) and has an empty command.
  Pipeline p = parse_ok(pipeline_doc("    - {name: a, image: \"busybox:1\"}\n"));
  EXPECT_TRUE(p.steps[0].command.empty());
}

TEST(PipelineDoc, CommandNumbersBecomeText) {
  // ["sleep", 10] runs "sleep" "10".
  Pipeline p = parse_ok(pipeline_doc("    - {name: a, command: [sleep, 10]}\n"));
  EXPECT_EQ(p.steps[0].command, (std::vector<std::string>{"sleep", "10"}));
}

TEST(PipelineDoc, BareGpuCountIsAnyType) {
  // gpu without gpu_type asks for any GPU type ("gpu/any").
  Pipeline p = parse_ok(pipeline_doc("    - {name: a, command: [x], resources: {gpu: 2}}\n"));
  EXPECT_EQ(p.steps[0].resources.get("gpu/any"), 2);
}

TEST(PipelineDoc, GpuTypeWithoutCountIsRefused) {
  // gpu_type without gpu is refused at gpu_type.
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], resources: {gpu_type: a100}}\n"))),
            "spec.steps[0].resources.gpu_type");
}

TEST(PipelineDoc, GpuSpelledTwoWaysIsRefused) {
  // gpu plus an explicit gpu/<type> entry is ambiguous and refused.
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], resources: {gpu: 1, gpu/a100: 1}}\n"))),
            "spec.steps[0].resources.gpu");
}

TEST(PipelineDoc, OtherNamedResources) {
  // Other named resources pass through as amounts; bad names are refused.
  Pipeline p = parse_ok(pipeline_doc("    - {name: a, command: [x], resources: {example.com/fpga: 2, gpu/a100: 4}}\n"));
  EXPECT_EQ(p.steps[0].resources.get("example.com/fpga"), 2);
  EXPECT_EQ(p.steps[0].resources.get("gpu/a100"), 4);
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], resources: {Bogus: 1}}\n"))),
            "spec.steps[0].resources.Bogus");
}

TEST(PipelineDoc, BadQuantitiesAreRefused) {
  // Negative, malformed and huge amounts are refused with the resource's path.
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], resources: {cpu: -1}}\n"))),
            "spec.steps[0].resources.cpu");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], resources: {memory: lots}}\n"))),
            "spec.steps[0].resources.memory");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], resources: {memory: 99999999999999999999Gi}}\n"))),
            "spec.steps[0].resources.memory");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], resources: {gpu: 1.5}}\n"))),
            "spec.steps[0].resources.gpu");
}

TEST(PipelineDoc, GangTotalMustStayBounded) {
  // resources times replicas past kMaxQuantity is refused (it would overflow the scheduler's sums).
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], replicas: 1024, resources: {memory: 8Pi}}\n"))),
            "spec.steps[0].resources.memory");
}

TEST(PipelineDoc, ReplicasRange) {
  // replicas is 1..1024.
  EXPECT_EQ(parse_ok(pipeline_doc("    - {name: a, command: [x], replicas: 1024}\n")).steps[0].replicas, 1024);
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], replicas: 0}\n"))), "spec.steps[0].replicas");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], replicas: 1025}\n"))), "spec.steps[0].replicas");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], replicas: \"2\"}\n"))), "spec.steps[0].replicas");
}

TEST(PipelineDoc, MaxRetriesRange) {
  // max_retries is 0..100.
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], max_retries: -1}\n"))),
            "spec.steps[0].max_retries");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], max_retries: 101}\n"))),
            "spec.steps[0].max_retries");
}

TEST(PipelineDoc, EnvNamesAndValues) {
  // env names are [A-Za-z_][A-Za-z0-9_]*; numbers and bools become their text.
  Pipeline p = parse_ok(pipeline_doc("    - {name: a, command: [x], env: {EPOCHS: 3, DEBUG: true, LR: 0.001, _X1: s}}\n"));
  EXPECT_EQ(p.steps[0].env.at("EPOCHS"), "3");
  EXPECT_EQ(p.steps[0].env.at("DEBUG"), "true");
  EXPECT_EQ(p.steps[0].env.at("LR"), "0.001");
  EXPECT_EQ(p.steps[0].env.at("_X1"), "s");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], env: {1BAD: x}}\n"))), "spec.steps[0].env.1BAD");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], env: {\"A-B\": x}}\n"))), "spec.steps[0].env.A-B");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], env: {A: [1]}}\n"))), "spec.steps[0].env.A");
}

TEST(PipelineDoc, StepNamesValidAndUnique) {
  // Step names are valid names, each used once.
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: Prep, command: [x]}\n"))), "spec.steps[0].name");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x]}\n    - {name: a, command: [y]}\n"))),
            "spec.steps[1].name");
}

TEST(PipelineDoc, StepCountBounds) {
  // A pipeline has at least one step and at most 1000.
  EXPECT_EQ(field(parse_err(pipeline_doc("    []\n"))), "spec.steps");
  std::string many;
  for (int i = 0; i < 1001; ++i) many += "    - {name: s" + std::to_string(i) + ", command: [x]}\n";
  Error e = parse_err(pipeline_doc(many));
  EXPECT_EQ(field(e), "spec.steps");
  EXPECT_TRUE(contains(e.message, "1000"));
}

TEST(PipelineDoc, DependsOnUnknownStep) {
  // depends_on must name a step of the same pipeline.
  Error e = parse_err(pipeline_doc("    - {name: a, command: [x], depends_on: [ghost]}\n"));
  EXPECT_EQ(field(e), "spec.steps[0].depends_on[0]");
  EXPECT_TRUE(contains(e.message, "ghost"));
}

TEST(PipelineDoc, DependsOnItself) {
  // A step cannot depend on itself.
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x], depends_on: [a]}\n"))),
            "spec.steps[0].depends_on[0]");
}

TEST(PipelineDoc, DependencyCycleIsReportedWithItsPath) {
  // A cycle is refused and the message spells it out: a -> b -> c -> a.
  Error e = parse_err(pipeline_doc("    - {name: a, command: [x], depends_on: [b]}\n"
                                   "    - {name: b, command: [x], depends_on: [c]}\n"
                                   "    - {name: c, command: [x], depends_on: [a]}\n"
                                   "    - {name: d, command: [x]}\n"));
  EXPECT_TRUE(contains(e.message, "a -> b -> c -> a")) << e.message;
  EXPECT_EQ(e.details.at("cycle").as_array().size(), 4u);
}

TEST(PipelineDoc, CycleBehindAnAcyclicPrefix) {
  // A cycle reached only through other steps is still found and reported alone.
  Error e = parse_err(pipeline_doc("    - {name: start, command: [x], depends_on: [b]}\n"
                                   "    - {name: b, command: [x], depends_on: [c]}\n"
                                   "    - {name: c, command: [x], depends_on: [b]}\n"));
  EXPECT_TRUE(contains(e.message, "b -> c -> b")) << e.message;
  EXPECT_FALSE(contains(e.message, "start")) << e.message;
}

TEST(PipelineDoc, ClusterAndSelectorExclusive) {
  // cluster pins one cluster; together with cluster_selector it is refused.
  EXPECT_EQ(parse_ok(pipeline_doc("    - {name: a, command: [x]}\n", "  cluster: proj-b-gpu\n")).cluster, "proj-b-gpu");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x]}\n",
                                         "  cluster: c1\n  cluster_selector: {region: east}\n"))),
            "spec.cluster");
}

TEST(PipelineDoc, ReferencedNamesAreChecked) {
  // resource_group, priority, cluster and project_group are syntactically valid names.
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x]}\n", "  resource_group: RG\n"))),
            "spec.resource_group");
  EXPECT_EQ(field(parse_err(pipeline_doc("    - {name: a, command: [x]}\n", "  priority: \"very urgent\"\n"))),
            "spec.priority");
  EXPECT_EQ(field(parse_err("apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, project_group: B_}\n"
                            "spec: {steps: [{name: a, command: [x]}]}\n")),
            "metadata.project_group");
}

TEST(PipelineDoc, UnknownStepFieldIsRefused) {
  // A misspelt step field is refused with its path.
  Error e = parse_err(pipeline_doc("    - {name: a, command: [x], replica: 2}\n"));
  EXPECT_EQ(e.code, "unknown_field");
  EXPECT_EQ(field(e), "spec.steps[0].replica");
}

TEST(PipelineDoc, UnknownMetadataFieldIsRefused) {
  // metadata takes name, project_group and labels only.
  Error e = parse_err("apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, owner: me}\n"
                      "spec: {steps: [{name: a, command: [x]}]}\n");
  EXPECT_EQ(field(e), "metadata.owner");
}

TEST(PipelineDoc, LabelsAreChecked) {
  // metadata.labels follow the label rules.
  Error e = parse_err("apiVersion: cubeplane/v1\nkind: Pipeline\nmetadata: {name: p, labels: {team: \"a b\"}}\n"
                      "spec: {steps: [{name: a, command: [x]}]}\n");
  EXPECT_EQ(field(e), "metadata.labels.team");
}

TEST(PipelineDoc, BadYamlKeepsLineNumbers) {
  // A YAML error inside a pipeline reports the line it is on.
  auto r = parse(pipeline_doc("    - name: a\n      command: [x\n"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "malformed_yaml");
  EXPECT_TRUE(contains(r.error().message, "line ")) << r.error().message;
}

// --------------------------------------------------------------- fallbacks

// One step "train" with the given resources and fallbacks (YAML flow maps).
std::string fallback_doc(std::string_view resources, std::string_view fallbacks, int replicas = 1) {
  return pipeline_doc("    - name: train\n      replicas: " + std::to_string(replicas) +
                      "\n      resources: " + std::string(resources) + "\n      fallbacks:\n" + std::string(fallbacks));
}

constexpr std::string_view kA100 = "{cpu: \"8\", memory: 32Gi, gpu: 1, gpu_type: nvidia-a100-80gb}";

Resources res(std::string_view spec) { return Resources::parse_or_die(spec); }

TEST(PipelineFallbacks, MergedOntoTheStepsResources) {
  // Named keys replace the step's; gpu_type alone keeps the step's GPU count, cpu and memory are inherited.
  Pipeline p = parse_ok(fallback_doc(kA100,
                                     "        - after: 10m\n"
                                     "          resources: {gpu: 2, gpu_type: nvidia-l40s}\n"
                                     "        - after: 1h30m\n"
                                     "          resources: {gpu_type: nvidia-a10, memory: 16Gi}\n",
                                     2));
  const Step& s = p.steps[0];
  EXPECT_EQ(s.resources, res("cpu:8,memory:32Gi,gpu/nvidia-a100-80gb:1"));
  ASSERT_EQ(s.fallbacks.size(), 2u);
  EXPECT_EQ(s.fallbacks[0].after_s, 600);
  EXPECT_EQ(s.fallbacks[0].resources, res("cpu:8,memory:32Gi,gpu/nvidia-l40s:2"));
  EXPECT_EQ(s.fallbacks[1].after_s, 5400);
  EXPECT_EQ(s.fallbacks[1].resources, res("cpu:8,memory:16Gi,gpu/nvidia-a10:1"));
}

TEST(PipelineFallbacks, GpuCountAloneKeepsTheStepsType) {
  // gpu alone keeps the step's type; on a bare-count step, gpu_type alone gives its count a type.
  Pipeline a = parse_ok(fallback_doc(kA100, "        - {after: 5m, resources: {gpu: 4}}\n"));
  EXPECT_EQ(a.steps[0].fallbacks[0].resources, res("cpu:8,memory:32Gi,gpu/nvidia-a100-80gb:4"));
  Pipeline b = parse_ok(fallback_doc("{gpu: 2}", "        - {after: 5m, resources: {gpu_type: nvidia-l40s}}\n"));
  EXPECT_EQ(b.steps[0].resources, res("gpu/any:2"));
  EXPECT_EQ(b.steps[0].fallbacks[0].resources, res("gpu/nvidia-l40s:2"));
}

TEST(PipelineFallbacks, ANamedGpuEntryReplacesTheStepsGpus) {
  // gpu/<type> in a fallback replaces the step's GPUs rather than adding to them.
  Pipeline p = parse_ok(fallback_doc(kA100, "        - {after: 5m, resources: {gpu/nvidia-l40s: 2}}\n"));
  EXPECT_EQ(p.steps[0].fallbacks[0].resources, res("cpu:8,memory:32Gi,gpu/nvidia-l40s:2"));
}

TEST(PipelineFallbacks, OtherKeysKeepTheStepsGpusAndZeroDropsAResource) {
  // A fallback naming only cpu keeps the GPUs; gpu: 0 gives a shape without GPUs; memory: 0 drops memory.
  Pipeline p = parse_ok(fallback_doc(kA100,
                                     "        - {after: 5m, resources: {cpu: \"4\"}}\n"
                                     "        - {after: 10m, resources: {gpu: 0, memory: 0}}\n"));
  EXPECT_EQ(p.steps[0].fallbacks[0].resources, res("cpu:4,memory:32Gi,gpu/nvidia-a100-80gb:1"));
  EXPECT_EQ(p.steps[0].fallbacks[1].resources, res("cpu:8"));
}

TEST(PipelineFallbacks, SeveralGpuTypesLeaveNothingToKeep) {
  // On a step with two GPU types, a fallback names both gpu and gpu_type (or a gpu/<type> entry).
  std::string_view two = "{gpu/nvidia-a100-80gb: 1, gpu/nvidia-h100: 1}";
  EXPECT_EQ(field(parse_err(fallback_doc(two, "        - {after: 5m, resources: {gpu_type: nvidia-l40s}}\n"))),
            "spec.steps[0].fallbacks[0].resources.gpu_type");
  EXPECT_EQ(field(parse_err(fallback_doc(two, "        - {after: 5m, resources: {gpu: 2}}\n"))),
            "spec.steps[0].fallbacks[0].resources.gpu");
  Pipeline p = parse_ok(fallback_doc(two, "        - {after: 5m, resources: {gpu: 2, gpu_type: nvidia-l40s}}\n"));
  EXPECT_EQ(p.steps[0].fallbacks[0].resources, res("gpu/nvidia-l40s:2"));
}

TEST(PipelineFallbacks, GpuTypeNeedsACountFromTheFallbackOrTheStep) {
  // gpu_type alone on a step without GPUs has no count to keep, and is refused at gpu_type.
  Error e = parse_err(fallback_doc("{cpu: \"1\"}", "        - {after: 5m, resources: {gpu_type: nvidia-l40s}}\n"));
  EXPECT_EQ(field(e), "spec.steps[0].fallbacks[0].resources.gpu_type");
}

TEST(PipelineFallbacks, GpuSpelledTwoWaysIsRefused) {
  // gpu plus a gpu/<type> entry is ambiguous in a fallback as in a step.
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {after: 5m, resources: {gpu: 1, gpu/nvidia-a10: 1}}\n"))),
            "spec.steps[0].fallbacks[0].resources.gpu");
}

TEST(PipelineFallbacks, AfterIsRequiredPositiveAndIncreasing) {
  // after is a duration, given, past 0s and later than the fallback before it.
  std::string_view ok = "        - {after: 10m, resources: {gpu_type: nvidia-l40s}}\n";
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {resources: {gpu_type: nvidia-l40s}}\n"))),
            "spec.steps[0].fallbacks[0].after");
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {after: 0s, resources: {gpu_type: nvidia-l40s}}\n"))),
            "spec.steps[0].fallbacks[0].after");
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {after: 10 minutes, resources: {gpu: 2}}\n"))),
            "spec.steps[0].fallbacks[0].after");
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {after: 600, resources: {gpu: 2}}\n"))),
            "spec.steps[0].fallbacks[0].after");
  Error same = parse_err(fallback_doc(kA100, std::string(ok) + "        - {after: 10m, resources: {gpu: 2}}\n"));
  EXPECT_EQ(field(same), "spec.steps[0].fallbacks[1].after");
  EXPECT_TRUE(contains(same.message, "10m")) << same.message;
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, std::string(ok) + "        - {after: 5m, resources: {gpu: 2}}\n"))),
            "spec.steps[0].fallbacks[1].after");
}

TEST(PipelineFallbacks, AShapeAlreadyAskedForIsRefused) {
  // A fallback equal to the step's resources, or to an earlier fallback's, is refused at its resources.
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {after: 5m, resources: {cpu: \"8\"}}\n"))),
            "spec.steps[0].fallbacks[0].resources");
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {after: 5m}\n"))), "spec.steps[0].fallbacks[0].resources");
  Error e = parse_err(fallback_doc(kA100,
                                   "        - {after: 5m, resources: {gpu_type: nvidia-l40s}}\n"
                                   "        - {after: 9m, resources: {gpu: 1, gpu_type: nvidia-l40s}}\n"));
  EXPECT_EQ(field(e), "spec.steps[0].fallbacks[1].resources");
  EXPECT_TRUE(contains(e.message, "fallbacks[0]")) << e.message;
}

TEST(PipelineFallbacks, AtMostEight) {
  // Eight fallbacks are accepted, a ninth is refused at the list.
  auto list = [](int n) {
    std::string out;
    for (int i = 1; i <= n; ++i) {
      out += "        - {after: " + std::to_string(i) + "m, resources: {gpu: " + std::to_string(i + 1) + "}}\n";
    }
    return out;
  };
  EXPECT_EQ(parse_ok(fallback_doc(kA100, list(8))).steps[0].fallbacks.size(), 8u);
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, list(9)))), "spec.steps[0].fallbacks");
}

TEST(PipelineFallbacks, UnknownFieldsAndBadResourcesAreRefusedWithTheirPath) {
  // A misspelt fallback field, a bad resource name and a bad amount are refused where they are.
  Error e = parse_err(fallback_doc(kA100, "        - {after: 5m, resource: {gpu: 2}}\n"));
  EXPECT_EQ(e.code, "unknown_field");
  EXPECT_EQ(field(e), "spec.steps[0].fallbacks[0].resource");
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {after: 5m, resources: {Bogus: 1}}\n"))),
            "spec.steps[0].fallbacks[0].resources.Bogus");
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {after: 5m, resources: {gpu: 1.5}}\n"))),
            "spec.steps[0].fallbacks[0].resources.gpu");
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {after: 5m, resources: {memory: lots}}\n"))),
            "spec.steps[0].fallbacks[0].resources.memory");
  EXPECT_EQ(field(parse_err(fallback_doc(kA100, "        - {after: 5m, resources: gpu}\n"))),
            "spec.steps[0].fallbacks[0].resources");
}

TEST(PipelineFallbacks, GangTotalMustStayBounded) {
  // Each fallback's resources times replicas is bounded like the step's own.
  EXPECT_EQ(field(parse_err(fallback_doc("{memory: 1Gi}", "        - {after: 5m, resources: {memory: 8Pi}}\n", 1024))),
            "spec.steps[0].fallbacks[0].resources.memory");
}

// ------------------------------------------------------------ round trip

TEST(PipelineDoc, RoundTripThroughDocument) {
  // pipeline_from_document(to_yaml(pipeline_to_document(p))) gives p back, fallbacks included.
  Pipeline p = parse_ok(R"(
apiVersion: cubeplane/v1
kind: Pipeline
metadata: {name: rt, project_group: proj-b, labels: {team: proj-b}}
spec:
  resource_group: rg-proj-b-gpu
  priority: urgent
  cluster_selector: {region: east}
  steps:
    - name: prepare
      command: "echo hi | tee log"
      image: pytorch/pytorch:2.3.0
      resources: {cpu: 500m, memory: 4Gi, example.com/fpga: 1}
      env: {EPOCHS: 3, RATE: "0.10"}
    - name: train
      depends_on: [prepare]
      replicas: 2
      checkpoint: true
      max_retries: 2
      resources: {cpu: "8", memory: 32Gi, gpu: 1, gpu_type: nvidia-a100-80gb}
      fallbacks:
        - {after: 10m, resources: {gpu: 2, gpu_type: nvidia-l40s}}
        - {after: 30m, resources: {gpu_type: nvidia-a10}}
        - {after: 1h, resources: {gpu: 0, memory: 0, cpu: "16"}}
        - {after: 2h, resources: {gpu/nvidia-a10: 1, gpu/nvidia-t4: 2}}
    - name: any-gpu
      resources: {gpu: 2}
      fallbacks: [{after: 1m, resources: {gpu: 1}}, {after: 2m, resources: {gpu_type: nvidia-t4}}]
    - name: two-types
      resources: {gpu/nvidia-a100-80gb: 1, gpu/nvidia-h100: 1}
      fallbacks: [{after: 1m, resources: {gpu: 2, gpu_type: nvidia-l40s}}, {after: 2m, resources: {gpu: 0}}]
)");
  json::object doc = pipeline_to_document(p);
  std::string text = to_yaml(json::value(doc));
  Pipeline back = parse_ok(text);
  EXPECT_EQ(to_json(back), to_json(p)) << text;
  // A fallback is written as what it changes, in the step's own spelling.
  const json::value& train = doc.at("spec").at("steps").at(1);
  EXPECT_EQ(train.at("resources").at("gpu"), 1);
  EXPECT_EQ(train.at("resources").at("gpu_type"), "nvidia-a100-80gb");
  EXPECT_EQ(train.at("fallbacks").at(0).at("after"), "10m");
  EXPECT_EQ(train.at("fallbacks").at(1).at("resources"), json::parse(R"({"gpu_type": "nvidia-a10"})"));
}

TEST(PipelineDoc, ExamplesParseAndRoundTrip) {
  // Every example pipeline parses and round-trips; fallback.yaml has its fallback.
  std::filesystem::path dir = std::filesystem::path(CUBEPLANE_SOURCE_DIR) / "examples" / "pipelines";
  int seen = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    ++seen;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    auto p = parse(text.str());
    ASSERT_TRUE(p.ok()) << entry.path() << ": " << p.error().message;
    auto back = parse(to_yaml(json::value(pipeline_to_document(*p))));
    ASSERT_TRUE(back.ok()) << entry.path() << ": " << back.error().message;
    EXPECT_EQ(to_json(*back), to_json(*p)) << entry.path();
    if (entry.path().filename() == "fallback.yaml") {
      const Step& train = p->steps.back();
      ASSERT_EQ(train.fallbacks.size(), 1u);
      EXPECT_EQ(train.fallbacks[0].after_s, 600);
      // gpu: 2 alone keeps the step's type and halves the count.
      EXPECT_EQ(train.fallbacks[0].resources.gpu_type(), "nvidia-a100-80gb");
      EXPECT_EQ(train.fallbacks[0].resources.gpus(), 2);
      EXPECT_EQ(train.resources.gpus(), 4);
    }
  }
  EXPECT_GE(seen, 5);
}

// ------------------------------------------------------- topological_order

Step step(std::string name, std::vector<std::string> deps = {}) {
  Step s;
  s.name = std::move(name);
  s.depends_on = std::move(deps);
  return s;
}

TEST(TopologicalOrder, DependenciesComeFirst) {
  // Every step comes after the steps it depends on.
  std::vector<Step> steps{step("eval", {"train"}), step("train", {"prep"}), step("prep")};
  EXPECT_EQ(topological_order(steps), (std::vector<std::size_t>{2, 1, 0}));
}

TEST(TopologicalOrder, TiesKeepDocumentOrder) {
  // Steps free to run in any order keep the order of the document.
  std::vector<Step> steps{step("a"), step("b"), step("c", {"a", "b"}), step("d")};
  EXPECT_EQ(topological_order(steps), (std::vector<std::size_t>{0, 1, 2, 3}));
}

TEST(TopologicalOrder, Diamond) {
  // A diamond runs its root, both branches in document order, then the join.
  std::vector<Step> steps{step("join", {"left", "right"}), step("right", {"root"}), step("left", {"root"}),
                          step("root")};
  EXPECT_EQ(topological_order(steps), (std::vector<std::size_t>{3, 1, 2, 0}));
}

}  // namespace
}  // namespace cp
