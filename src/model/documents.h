// User documents: the YAML/JSON that people write (API.md "Pipeline YAML",
// "Resource group and project group YAML"). Parsing is strict: unknown
// fields, bad names, negative or huge quantities and broken references inside
// the document are errors naming the field path, and nothing is half-read.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "model/types.h"

namespace cp {

struct DocumentLimits {
  std::size_t max_bytes = 1 << 20;  // 1 MiB
  std::size_t max_depth = 32;
  std::size_t max_nodes = 100000;   // scalars + collections
};

// YAML (JSON is YAML too) -> JSON values, one per "---" document. Plain
// scalars become bool/null/integers/doubles the way YAML 1.2 core schema
// reads them; quoted scalars stay strings. Anchors/aliases are refused.
// Errors: 400 "malformed_yaml" with line and column, 413 when over max_bytes,
// 400 "too_deep" past max_depth.
Result<std::vector<json::value>> parse_documents(std::string_view text, const DocumentLimits& limits = {});
// Exactly one document.
Result<json::value> parse_document(std::string_view text, const DocumentLimits& limits = {});

// Names of clusters, groups, classes, steps, pipelines: DNS-1123 labels,
// [a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?
bool is_valid_name(std::string_view name);
Status validate_name(std::string_view name, const std::string& field_path);
// Label keys: optional DNS prefix + "/" + name of [A-Za-z0-9._-], <= 63; values <= 63 of the same.
Status validate_labels(const Labels& labels, const std::string& field_path);

// {apiVersion: cubeplane/v1, kind: X, metadata: {name}, spec: {...}} -> model.
// `kind` must match. Timestamps are left 0 for the caller.
Result<ResourceGroup> resource_group_from_document(const json::value& doc);
Result<ProjectGroup> project_group_from_document(const json::value& doc);
Result<PriorityClass> priority_class_from_document(const json::value& doc);
// Pipeline: validates step names unique, depends_on known and acyclic,
// replicas 1..1024, max_retries 0..100, command non-empty, env names, resources
// (gpu + gpu_type folded into "gpu/<type>"; a bare gpu count becomes "gpu/any"),
// and fallbacks (at most 8, `after` increasing, resources merged onto the step's).
Result<Pipeline> pipeline_from_document(const json::value& doc);

// The reverse, for GET and for `-o yaml`; `status` is added by the caller.
json::object resource_group_to_document(const ResourceGroup& rg);
json::object project_group_to_document(const ProjectGroup& pg);
json::object priority_class_to_document(const PriorityClass& pc);
// Pipeline: metadata {name, project_group, labels} and spec; id, submitter
// and timestamps are not part of the document. Fallbacks are written as
// what they change from their step's resources.
json::object pipeline_to_document(const Pipeline& p);

// JSON -> YAML text (block style), for the CLI's -o yaml.
std::string to_yaml(const json::value& v);

// Steps in an order where every step comes after those it depends on
// (ties by position in the document). Assumes a validated, acyclic pipeline.
std::vector<std::size_t> topological_order(const std::vector<Step>& steps);

}  // namespace cp
