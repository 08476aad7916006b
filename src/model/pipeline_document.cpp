// Pipeline documents (API.md "Pipeline YAML") and the order of their steps.
#include <boost/describe.hpp>

#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <unordered_map>

#include "model/documents.h"
#include "model/documents_internal.h"

namespace cp {
namespace {

constexpr std::size_t kMaxSteps = 1000;
constexpr std::int64_t kMaxReplicas = 1024;
constexpr std::int64_t kMaxRetries = 100;
constexpr std::size_t kMaxImage = 512;
// Each fallback is one more shape the scheduler tries for a waiting task;
// a handful covers "this GPU, else that one, else a smaller one".
constexpr std::size_t kMaxFallbacks = 8;

// command: ["python", "train.py"], or one string run by the shell:
// "python train.py | tee log" -> ["/bin/sh", "-c", "python train.py | tee log"].
// Left out, the step runs its image's own entrypoint (API.md's example has a
// step without one); written out, it must say something.
struct CommandDoc {
  bool given = false;
  std::vector<std::string> argv;
};

Status cp_from_json(const json::value& in, CommandDoc& out, const DecodeContext& ctx) {
  out.given = !in.is_null();
  out.argv.clear();
  if (in.is_null()) return {};
  if (in.is_string()) {
    if (!in.get_string().empty()) out.argv = {"/bin/sh", "-c", std::string(in.get_string())};
    return {};
  }
  if (!in.is_array()) return type_error(ctx, "list of strings or a shell command string");
  std::vector<docs::ScalarText> args;  // ["sleep", 10] means what it says
  CP_TRY(from_json(in, args, ctx));
  for (auto& a : args) out.argv.push_back(std::move(a.text));
  return {};
}

// resources: {cpu, memory, gpu: N, gpu_type: T, <other resource>: amount},
// read and folded as it is decoded (step_resources.cpp).
struct StepResources {
  Resources value;
};

Status cp_from_json(const json::value& in, StepResources& out, const DecodeContext& ctx) {
  docs::ResourceEntries entries;
  CP_TRY(cp_from_json(in, entries, ctx));
  CP_ASSIGN(out.value, docs::step_resources(entries, ctx.path()));
  return {};
}

// fallbacks: [{after: 10m, resources: {gpu_type: nvidia-l40s}}]. The
// resources are what changes from the step's own; merged in parse_fallbacks
// once the step's are known.
struct FallbackDoc {
  std::optional<docs::Duration> after;
  docs::ResourceEntries resources;
};
BOOST_DESCRIBE_STRUCT(FallbackDoc, (), (after, resources))

struct StepDoc {
  std::string name;
  CommandDoc command;
  std::string image;
  StepResources resources;
  std::int64_t replicas = 1;
  std::vector<std::string> depends_on;
  bool checkpoint = false;
  std::int64_t max_retries = 0;
  docs::TextMap env;
  std::vector<FallbackDoc> fallbacks;
};
BOOST_DESCRIBE_STRUCT(StepDoc, (),
                      (name, command, image, resources, replicas, depends_on, checkpoint, max_retries, env, fallbacks))

struct PipelineMetaDoc {
  std::string name;
  std::string project_group;
  docs::TextMap labels;
};
BOOST_DESCRIBE_STRUCT(PipelineMetaDoc, (), (name, project_group, labels))

struct PipelineSpecDoc {
  std::string resource_group;
  std::string priority;
  docs::TextMap cluster_selector;
  std::string cluster;
  std::vector<StepDoc> steps;
};
BOOST_DESCRIBE_STRUCT(PipelineSpecDoc, (), (resource_group, priority, cluster_selector, cluster, steps))

bool is_env_name(std::string_view s) {
  auto letter = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_'; };
  if (s.empty() || !letter(s.front())) return false;
  for (char c : s) {
    if (!letter(c) && !(c >= '0' && c <= '9')) return false;
  }
  return true;
}

Status validate_command(const CommandDoc& command, const std::string& path) {
  const std::vector<std::string>& argv = command.argv;
  if (!command.given) return {};
  if (argv.empty() || argv.front().empty()) {
    return errors::invalid(path, "must not be empty", "不能为空");
  }
  for (std::size_t i = 0; i < argv.size(); ++i) {
    // exec passes C strings: a NUL would silently cut the argument short.
    if (argv[i].find('\0') != std::string::npos) {
      return errors::invalid(docs::index_path(path, i), "contains a NUL character", "包含 NUL 字符");
    }
  }
  return {};
}

Status validate_env(const docs::TextMap& env, const std::string& path) {
  for (const auto& [name, value] : env) {
    if (!is_env_name(name)) {
      return errors::invalid(path + "." + name,
                             "\"" + name + "\" is not a valid environment variable name: letters, digits and '_', not "
                                           "starting with a digit",
                             "\"" + name + "\" 不是有效的环境变量名：字母、数字和 '_'，且不以数字开头");
    }
    if (value.text.find('\0') != std::string::npos) {
      return errors::invalid(path + "." + name, "contains a NUL character", "包含 NUL 字符");
    }
  }
  return {};
}

Status validate_image(const std::string& image, const std::string& path) {
  bool ok = image.size() <= kMaxImage;
  for (unsigned char c : image) ok = ok && c > 0x20 && c != 0x7f;
  if (!ok) {
    return errors::invalid(path, "must be an image reference without spaces, at most 512 characters",
                           "必须是不含空格的镜像引用，最多 512 个字符");
  }
  return {};
}

// The scheduler multiplies a step's resources by its replicas with checked
// arithmetic that aborts on overflow; keep user input far from that.
Status validate_gang_total(const Resources& r, std::int64_t replicas, const std::string& path) {
  for (const auto& [name, amount] : r.amounts()) {
    if (amount > kMaxQuantity / replicas) {
      return errors::invalid(path + "." + name, "times replicas is too large", "乘以副本数后过大");
    }
  }
  return {};
}

// The wait before a fallback is tried: given, past 0s, and later than the
// one before it, so the list reads as the order the shapes are tried in.
Status validate_after(const std::optional<docs::Duration>& after, std::int64_t previous_s, const std::string& path) {
  if (!after) {
    return errors::invalid(path, "is required: how long the task waits before this fallback is tried",
                           "必填：任务等待多久后尝试此备选");
  }
  if (after->seconds <= 0) {
    return errors::invalid(path, "must be longer than 0s", "必须大于 0s");
  }
  if (after->seconds <= previous_s) {
    std::string before = docs::format_duration(previous_s);
    return errors::invalid(path, "must be later than the previous fallback's (" + before + ")",
                           "必须晚于上一个备选的等待时长（" + before + "）");
  }
  return {};
}

// Each fallback's resources merged onto the step's own (step_resources.cpp).
// A shape that asks for what the step or an earlier fallback already asks
// for is refused: it could never place a task the earlier one could not.
Result<std::vector<StepShape>> parse_fallbacks(const std::vector<FallbackDoc>& written, const Step& step,
                                               const std::string& path) {
  if (written.size() > kMaxFallbacks) {
    return errors::invalid(path, "has " + std::to_string(written.size()) + " fallbacks, more than 8",
                           "共 " + std::to_string(written.size()) + " 个备选，超过 8 个");
  }
  std::vector<StepShape> out;
  for (std::size_t i = 0; i < written.size(); ++i) {
    std::string at = docs::index_path(path, i);
    CP_TRY(validate_after(written[i].after, out.empty() ? 0 : out.back().after_s, at + ".after"));
    StepShape shape;
    shape.after_s = written[i].after->seconds;
    CP_ASSIGN(shape.resources, docs::merge_fallback_resources(step.resources, written[i].resources, at + ".resources"));
    if (shape.resources == step.resources) {
      return errors::invalid(at + ".resources", "asks for the same resources as the step itself",
                             "申请的资源与步骤本身相同");
    }
    for (std::size_t j = 0; j < out.size(); ++j) {
      if (shape.resources == out[j].resources) {
        std::string earlier = docs::index_path("fallbacks", j);
        return errors::invalid(at + ".resources", "asks for the same resources as " + earlier,
                               "申请的资源与 " + earlier + " 相同");
      }
    }
    CP_TRY(validate_gang_total(shape.resources, step.replicas, at + ".resources"));
    out.push_back(std::move(shape));
  }
  return out;
}

Result<Step> parse_step(StepDoc& doc, const std::string& path) {
  Step step;
  CP_TRY(validate_name(doc.name, path + ".name"));
  step.name = doc.name;
  CP_TRY(validate_command(doc.command, path + ".command"));
  step.command = std::move(doc.command.argv);
  CP_TRY(validate_image(doc.image, path + ".image"));
  step.image = doc.image;
  if (doc.replicas < 1 || doc.replicas > kMaxReplicas) {
    return errors::invalid(path + ".replicas", "must be between 1 and 1024, got " + std::to_string(doc.replicas),
                           "必须在 1 到 1024 之间，实际为 " + std::to_string(doc.replicas));
  }
  step.replicas = static_cast<int>(doc.replicas);
  if (doc.max_retries < 0 || doc.max_retries > kMaxRetries) {
    return errors::invalid(path + ".max_retries", "must be between 0 and 100, got " + std::to_string(doc.max_retries),
                           "必须在 0 到 100 之间，实际为 " + std::to_string(doc.max_retries));
  }
  step.max_retries = static_cast<int>(doc.max_retries);
  CP_TRY(validate_gang_total(doc.resources.value, doc.replicas, path + ".resources"));
  step.resources = std::move(doc.resources.value);
  CP_ASSIGN(step.fallbacks, parse_fallbacks(doc.fallbacks, step, path + ".fallbacks"));
  CP_TRY(validate_env(doc.env, path + ".env"));
  step.env = docs::to_string_map(doc.env);
  CP_TRY(docs::validate_name_list(doc.depends_on, path + ".depends_on"));
  step.depends_on = std::move(doc.depends_on);
  step.checkpoint = doc.checkpoint;
  return step;
}

// depends_on names known steps, never the step itself, and has no cycle.
Status validate_dependencies(const std::vector<Step>& steps) {
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < steps.size(); ++i) index.emplace(steps[i].name, i);

  std::vector<std::vector<std::size_t>> deps(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    for (std::size_t d = 0; d < steps[i].depends_on.size(); ++d) {
      const std::string& dep = steps[i].depends_on[d];
      std::string path = docs::index_path(docs::index_path("spec.steps", i) + ".depends_on", d);
      if (dep == steps[i].name) {
        return errors::invalid(path, "a step cannot depend on itself", "步骤不能依赖自身");
      }
      auto it = index.find(dep);
      if (it == index.end()) {
        return errors::invalid(path, "no step named \"" + dep + "\" in this pipeline",
                               "此流水线中没有名为 \"" + dep + "\" 的步骤");
      }
      deps[i].push_back(it->second);
    }
  }

  // Depth-first search; a step met again while still on the path closes a
  // cycle, and the path from that step on is the cycle.
  enum class Mark { unvisited, on_path, done };
  std::vector<Mark> mark(steps.size(), Mark::unvisited);
  std::vector<std::size_t> path;
  std::optional<std::vector<std::size_t>> cycle;
  std::function<void(std::size_t)> visit = [&](std::size_t i) {
    mark[i] = Mark::on_path;
    path.push_back(i);
    for (std::size_t d : deps[i]) {
      if (cycle) return;
      if (mark[d] == Mark::on_path) {
        auto from = std::find(path.begin(), path.end(), d);
        cycle.emplace(from, path.end());
        cycle->push_back(d);
        return;
      }
      if (mark[d] == Mark::unvisited) visit(d);
    }
    path.pop_back();
    mark[i] = Mark::done;
  };
  for (std::size_t i = 0; i < steps.size() && !cycle; ++i) {
    if (mark[i] == Mark::unvisited) visit(i);
  }
  if (cycle) {
    std::string text;
    for (std::size_t i : *cycle) text += (text.empty() ? "" : " -> ") + steps[i].name;
    Error e = errors::invalid(docs::index_path("spec.steps", cycle->front()) + ".depends_on",
                              "dependency cycle: " + text + " (each step depends on the next)",
                              "依赖成环：" + text + "（每个步骤依赖下一个）");
    json::array names;
    for (std::size_t i : *cycle) names.emplace_back(steps[i].name);
    e.details["cycle"] = std::move(names);
    return e;
  }
  return {};
}

}  // namespace

Result<Pipeline> pipeline_from_document(const json::value& doc) {
  CP_ASSIGN(auto env, docs::open_document(doc, "Pipeline"));
  Pipeline p;

  PipelineMetaDoc meta;
  CP_TRY(docs::decode_strict(env.metadata, meta, "metadata"));
  CP_TRY(validate_name(meta.name, "metadata.name"));
  p.name = meta.name;
  if (!meta.project_group.empty()) CP_TRY(validate_name(meta.project_group, "metadata.project_group"));
  p.project_group = meta.project_group;
  p.labels = docs::to_string_map(meta.labels);
  CP_TRY(validate_labels(p.labels, "metadata.labels"));

  PipelineSpecDoc spec;
  CP_TRY(docs::decode_strict(env.spec, spec, "spec"));
  if (!spec.resource_group.empty()) CP_TRY(validate_name(spec.resource_group, "spec.resource_group"));
  p.resource_group = spec.resource_group;
  if (!spec.priority.empty()) CP_TRY(validate_name(spec.priority, "spec.priority"));
  p.priority = spec.priority;
  p.cluster_selector = docs::to_string_map(spec.cluster_selector);
  CP_TRY(validate_labels(p.cluster_selector, "spec.cluster_selector"));
  if (!spec.cluster.empty()) {
    CP_TRY(validate_name(spec.cluster, "spec.cluster"));
    if (!p.cluster_selector.empty()) {
      return errors::invalid("spec.cluster", "pins one cluster: leave cluster_selector out, or use it instead",
                             "已固定集群：请去掉 cluster_selector，或改用 cluster_selector");
    }
  }
  p.cluster = spec.cluster;

  if (spec.steps.empty()) return errors::invalid("spec.steps", "needs at least one step", "至少需要一个步骤");
  if (spec.steps.size() > kMaxSteps) {
    return errors::invalid("spec.steps", "has " + std::to_string(spec.steps.size()) + " steps, more than 1000",
                           "共 " + std::to_string(spec.steps.size()) + " 个步骤，超过 1000 个");
  }
  std::set<std::string_view> names;
  for (std::size_t i = 0; i < spec.steps.size(); ++i) {
    std::string path = docs::index_path("spec.steps", i);
    CP_ASSIGN(Step step, parse_step(spec.steps[i], path));
    if (!names.insert(spec.steps[i].name).second) {
      return errors::invalid(path + ".name", "another step is already named \"" + step.name + "\"",
                             "已有名为 \"" + step.name + "\" 的步骤");
    }
    p.steps.push_back(std::move(step));
  }
  CP_TRY(validate_dependencies(p.steps));
  return p;
}

namespace {

json::object labels_document(const Labels& labels) {
  json::object out;
  for (const auto& [k, v] : labels) out[k] = v;
  return out;
}

// Fields at their defaults are left out, as a person would write the step.
json::object step_document(const Step& step) {
  json::object out;
  out["name"] = step.name;
  if (!step.command.empty()) out["command"] = to_json(step.command);
  if (!step.image.empty()) out["image"] = step.image;
  if (!step.resources.empty()) out["resources"] = docs::step_resources_document(step.resources);
  if (step.replicas != 1) out["replicas"] = step.replicas;
  if (!step.depends_on.empty()) out["depends_on"] = to_json(step.depends_on);
  if (step.checkpoint) out["checkpoint"] = true;
  if (step.max_retries != 0) out["max_retries"] = step.max_retries;
  if (!step.env.empty()) out["env"] = labels_document(step.env);
  if (!step.fallbacks.empty()) {
    json::array fallbacks;
    for (const StepShape& shape : step.fallbacks) {
      json::object f;
      f["after"] = docs::format_duration(shape.after_s);
      f["resources"] = docs::fallback_resources_document(step.resources, shape.resources);
      fallbacks.push_back(std::move(f));
    }
    out["fallbacks"] = std::move(fallbacks);
  }
  return out;
}

}  // namespace

json::object pipeline_to_document(const Pipeline& p) {
  json::object meta;
  meta["name"] = p.name;
  if (!p.project_group.empty()) meta["project_group"] = p.project_group;
  if (!p.labels.empty()) meta["labels"] = labels_document(p.labels);
  json::object spec;
  if (!p.resource_group.empty()) spec["resource_group"] = p.resource_group;
  if (!p.priority.empty()) spec["priority"] = p.priority;
  if (!p.cluster_selector.empty()) spec["cluster_selector"] = labels_document(p.cluster_selector);
  if (!p.cluster.empty()) spec["cluster"] = p.cluster;
  json::array steps;
  for (const Step& step : p.steps) steps.push_back(step_document(step));
  spec["steps"] = std::move(steps);
  return docs::make_document("Pipeline", std::move(meta), std::move(spec));
}

std::vector<std::size_t> topological_order(const std::vector<Step>& steps) {
  // Kahn's algorithm; the ready step earliest in the document goes first, so
  // the order is stable and reads like the file.
  std::unordered_map<std::string_view, std::size_t> index;
  for (std::size_t i = 0; i < steps.size(); ++i) index.emplace(steps[i].name, i);
  std::vector<std::size_t> waiting_on(steps.size(), 0);
  std::vector<std::vector<std::size_t>> dependents(steps.size());
  for (std::size_t i = 0; i < steps.size(); ++i) {
    std::set<std::size_t> unique;
    for (const auto& dep : steps[i].depends_on) {
      auto it = index.find(dep);
      if (it != index.end() && it->second != i) unique.insert(it->second);
    }
    waiting_on[i] = unique.size();
    for (std::size_t d : unique) dependents[d].push_back(i);
  }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (waiting_on[i] == 0) ready.push(i);
  }
  std::vector<std::size_t> order;
  order.reserve(steps.size());
  while (!ready.empty()) {
    std::size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (std::size_t d : dependents[i]) {
      if (--waiting_on[d] == 0) ready.push(d);
    }
  }
  CP_CHECK(order.size() == steps.size(), "topological_order on a pipeline with a dependency cycle");
  return order;
}

}  // namespace cp
