// A pipeline step's `resources` as people write them, both ways, and how a
// fallback's resources are merged onto its step's.
//
// GPUs are folded into the model's per-type names: gpu N of type T is
// "gpu/T" = N, a bare count is "gpu/any". "gpu/T: N" written directly is
// accepted too, as that is how the model's own JSON spells it.
#include <optional>
#include <set>
#include <string>

#include "model/documents_internal.h"

namespace cp::docs {
namespace {

bool is_gpu(std::string_view name) { return name.starts_with(kGpuPrefix); }

bool names_gpu_entry(const ResourceEntries& in) {
  for (const auto& [name, amount] : in.named) {
    if (is_gpu(name)) return true;
  }
  return false;
}

Error gpu_spelt_twice(const std::string& path) {
  return errors::invalid(path, "write GPUs either as gpu (with gpu_type) or as gpu/<type>, not both",
                         "GPU 请只用一种写法：gpu（加 gpu_type）或 gpu/<型号>");
}

Error gpu_type_without_count(const std::string& path) {
  return errors::invalid(path, "is set but gpu is not: say how many GPUs of this type",
                         "已设置但未设置 gpu：请写明需要几块该型号的 GPU");
}

// A step's GPUs as one (type, count); a fallback naming only gpu or only
// gpu_type keeps the other half. No GPUs is ("any", 0); several types have
// no such pair.
struct GpuAsk {
  std::string type = "any";
  std::int64_t count = 0;
  bool operator==(const GpuAsk&) const = default;
};

std::optional<GpuAsk> single_gpu(const Resources& r) {
  std::optional<GpuAsk> out = GpuAsk{};
  int types = 0;
  for (const auto& [name, amount] : r.amounts()) {
    if (!is_gpu(name)) continue;
    if (++types > 1) return std::nullopt;
    out = GpuAsk{name.substr(kGpuPrefix.size()), amount};
  }
  return out;
}

Error several_gpu_types(const std::string& path, std::string_view missing) {
  return errors::invalid(
      path,
      "the step asks for several GPU types, so there is no single one to keep: write " + std::string(missing) + " too",
      "该步骤申请了多种型号的 GPU，无法沿用其中一种：请同时写明 " + std::string(missing));
}

// The GPU entry a fallback's gpu and/or gpu_type stand for.
Result<GpuAsk> fallback_gpu(const Resources& step, const ResourceEntries& in, const std::string& path) {
  std::optional<GpuAsk> own = single_gpu(step);
  GpuAsk out;
  if (in.gpu) {
    out.count = *in.gpu;
  } else if (own) {
    out.count = own->count;
  } else {
    return several_gpu_types(path + ".gpu_type", "gpu");
  }
  if (in.gpu_type) {
    if (out.count == 0) return gpu_type_without_count(path + ".gpu_type");
    out.type = *in.gpu_type;
  } else if (own) {
    out.type = own->type;
  } else if (out.count > 0) {
    return several_gpu_types(path + ".gpu", "gpu_type");
  }
  return out;
}

}  // namespace

Status cp_from_json(const json::value& in, ResourceEntries& out, const DecodeContext& ctx) {
  out = ResourceEntries{};
  if (in.is_null()) return {};
  if (!in.is_object()) return type_error(ctx, "map of resources");
  for (const auto& kv : in.get_object()) {
    std::string name(kv.key());
    DecodeContext c = ctx.at(name);
    if (name == "gpu_type") {
      if (!kv.value().is_string()) return type_error(c, "string");
      out.gpu_type = std::string(kv.value().get_string());
      CP_TRY(validate_gpu_type(*out.gpu_type, c.path()));
      continue;
    }
    QuantityText q;
    CP_TRY(from_json(kv.value(), q, c));
    if (name == "gpu") {
      // Whole GPUs; parsed as any extended resource is.
      CP_ASSIGN(out.gpu, parse_quantity("gpu/any", q.text, c.path()));
      continue;
    }
    CP_TRY(validate_resource_name(name, c.path()));
    CP_ASSIGN(out.named[name], parse_quantity(name, q.text, c.path()));
  }
  return {};
}

Result<Resources> step_resources(const ResourceEntries& in, const std::string& path) {
  Resources r;
  for (const auto& [name, amount] : in.named) r.set(name, amount);
  if (in.gpu_type && in.gpu.value_or(0) == 0) return gpu_type_without_count(path + ".gpu_type");
  if (in.gpu.value_or(0) > 0) {
    if (r.gpus() > 0) return gpu_spelt_twice(path + ".gpu");
    r.set(std::string(kGpuPrefix) + in.gpu_type.value_or("any"), *in.gpu);
  }
  return r;
}

Result<Resources> merge_fallback_resources(const Resources& step, const ResourceEntries& in, const std::string& path) {
  bool gpu_count_or_type = in.gpu || in.gpu_type;
  if (gpu_count_or_type && names_gpu_entry(in)) return gpu_spelt_twice(path + (in.gpu ? ".gpu" : ".gpu_type"));
  Resources out = step;
  // Whichever way a fallback names GPUs, they replace the step's: "an L40S
  // instead of the A100", never both.
  if (gpu_count_or_type || names_gpu_entry(in)) {
    for (const auto& [name, amount] : step.amounts()) {
      if (is_gpu(name)) out.set(name, 0);
    }
  }
  for (const auto& [name, amount] : in.named) out.set(name, amount);
  if (gpu_count_or_type) {
    CP_ASSIGN(GpuAsk gpu, fallback_gpu(step, in, path));
    out.set(std::string(kGpuPrefix) + gpu.type, gpu.count);
  }
  return out;
}

json::object step_resources_document(const Resources& r) {
  json::object out;
  for (const auto& [name, amount] : r.amounts()) {
    if (!is_gpu(name)) out[name] = format_quantity(name, amount);
  }
  std::optional<GpuAsk> gpu = single_gpu(r);
  if (!gpu) {
    for (const auto& [name, amount] : r.amounts()) {
      if (is_gpu(name)) out[name] = amount;
    }
  } else if (gpu->count > 0) {
    out["gpu"] = gpu->count;
    if (gpu->type != "any") out["gpu_type"] = gpu->type;
  }
  return out;
}

json::object fallback_resources_document(const Resources& step, const Resources& shape) {
  json::object out;
  // Other resources: what changed, and 0 for what the shape drops.
  std::set<std::string> names;
  for (const auto* r : {&step, &shape}) {
    for (const auto& [name, amount] : r->amounts()) {
      if (!is_gpu(name)) names.insert(name);
    }
  }
  for (const auto& name : names) {
    if (step.get(name) != shape.get(name)) out[name] = format_quantity(name, shape.get(name));
  }

  std::optional<GpuAsk> own = single_gpu(step);
  std::optional<GpuAsk> mine = single_gpu(shape);
  if (own && mine) {
    if (*own == *mine) return out;
    if (mine->count != own->count) out["gpu"] = mine->count;
    if (mine->count > 0 && mine->type != own->type) out["gpu_type"] = mine->type;
  } else if (mine) {
    // The step has several types: nothing to keep, say both.
    out["gpu"] = mine->count;
    if (mine->count > 0) out["gpu_type"] = mine->type;
  } else {
    for (const auto& [name, amount] : shape.amounts()) {
      if (is_gpu(name)) out[name] = amount;
    }
  }
  return out;
}

}  // namespace cp::docs
