// Pieces shared by the document readers and writers (documents*.cpp,
// yaml_*.cpp). Not part of the model's public surface: include
// model/documents.h instead.
#pragma once

#include <boost/describe.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/result.h"
#include "model/documents.h"
#include "model/resources.h"

namespace cp::docs {

inline constexpr std::string_view kApiVersion = "cubeplane/v1";

// ------------------------------------------------------------ YAML scalars

// How YAML 1.2's core schema reads a plain (unquoted, untagged) scalar:
// null, bool, int64, double or string. Integers past int64 and numbers that
// JSON cannot carry (.inf, .nan, 1e999) are errors rather than silently
// becoming something else. The error has no field path; the caller adds the
// position.
Result<json::value> resolve_plain_scalar(std::string_view text);

// ------------------------------------------------------- document envelope

// {apiVersion, kind, metadata, spec, status}: the parts every document has.
// `status` is accepted and ignored so that the output of GET can be applied
// again unchanged.
struct Envelope {
  json::object metadata;
  json::object spec;
};
// Checks apiVersion and kind, and that metadata and spec are objects.
Result<Envelope> open_document(const json::value& doc, std::string_view kind);

// {apiVersion, kind, metadata, spec} in that order.
json::object make_document(std::string_view kind, json::object metadata, json::object spec);

// metadata of the group and class documents: the name, plus the timestamps
// that GET writes and that are ignored on the way back in.
struct ObjectMeta {
  std::string name;
  json::value created_at;
  json::value updated_at;
};
BOOST_DESCRIBE_STRUCT(ObjectMeta, (), (name, created_at, updated_at))
// Decodes and validates metadata; returns the name.
Result<std::string> object_name(const json::object& metadata);
// {name, created_at, updated_at}; updated_at left out where the object has none.
json::object object_meta(const std::string& name, Millis created_at, std::optional<Millis> updated_at);

// Decodes `in` strictly (unknown fields are errors) with paths under `path`.
template <class T>
Status decode_strict(const json::object& in, T& out, const std::string& path) {
  return from_json(json::value(in), out, DecodeContext{path, true});
}

// --------------------------------------------------------- small wire types

// A quantity as written: "500m", "4Gi", 16, 1.5. Parsed later with
// parse_quantity, once the resource it belongs to is known.
struct QuantityText {
  std::string text;
};
void cp_to_json(json::value& out, const QuantityText& q);
Status cp_from_json(const json::value& in, QuantityText& out, const DecodeContext& ctx);

// A duration written "30s", "5m", "1h30m" (whole seconds, minutes, hours).
struct Duration {
  std::int64_t seconds = 0;
};
void cp_to_json(json::value& out, const Duration& d);
Status cp_from_json(const json::value& in, Duration& out, const DecodeContext& ctx);
Result<std::int64_t> parse_duration(std::string_view text, const std::string& path);
std::string format_duration(std::int64_t seconds);  // 5400 -> "1h30m", 0 -> "0s"

// A scalar taken as text: strings as they are, and because YAML reads
// `EPOCHS: 3` as a number, numbers and bools as their spelling ("3", "true").
// A float comes back in its shortest form (1.50 -> "1.5"); users who need the
// exact spelling quote it.
struct ScalarText {
  std::string text;
};
Status cp_from_json(const json::value& in, ScalarText& out, const DecodeContext& ctx);
using TextMap = std::map<std::string, ScalarText>;
std::map<std::string, std::string> to_string_map(const TextMap& m);

// ---------------------------------------------------------- step resources

// A step's `resources` as written (step_resources.cpp):
// {cpu, memory, gpu: N, gpu_type: T, gpu/<type>: N, <other>: amount}, each
// name checked and each amount parsed, nothing folded yet. Zeros are kept:
// in a fallback, `cpu: 0` means "none", not "as the step".
struct ResourceEntries {
  std::optional<std::int64_t> gpu;
  std::optional<std::string> gpu_type;
  std::map<std::string, std::int64_t> named;  // every other key, gpu/<type> included
};
Status cp_from_json(const json::value& in, ResourceEntries& out, const DecodeContext& ctx);

// A step's own resources: gpu N of type T becomes "gpu/T" = N, a bare count
// "gpu/any". `path` is the field path of the resources map.
Result<Resources> step_resources(const ResourceEntries& in, const std::string& path);
// A fallback's complete resources: `in` merged onto the step's own. Keys
// named replace the step's; naming gpu, gpu_type or a gpu/<type> replaces
// the step's GPUs, where gpu alone keeps the step's type and gpu_type alone
// its count.
Result<Resources> merge_fallback_resources(const Resources& step, const ResourceEntries& in,
                                           const std::string& path);

// The way back, in the same spelling: one GPU type as gpu + gpu_type
// (gpu alone for "gpu/any"), amounts as quantity text.
json::object step_resources_document(const Resources& r);
// The fewest keys for which merge_fallback_resources(step, ...) gives
// `shape` back.
json::object fallback_resources_document(const Resources& step, const Resources& shape);

// ------------------------------------------------------------- validation

// "cpu", "memory", "gpu/<type>" or another lowercase qualified name
// ("example.com/fpga"). A bare "gpu" is refused: GPUs are counted per type.
Status validate_resource_name(std::string_view name, const std::string& path);
// The <type> of "gpu/<type>": lowercase letters, digits, '-', '.', '_'.
Status validate_gpu_type(std::string_view type, const std::string& path);
// Resource names of every entry.
Status validate_resources(const Resources& r, const std::string& path);
// Each a valid name, none twice.
Status validate_name_list(const std::vector<std::string>& names, const std::string& path);

std::string index_path(const std::string& path, std::size_t i);

}  // namespace cp::docs
