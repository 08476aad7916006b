#include "sched/request.h"

#include "sched/scheduler.h"

namespace cp::sched {
namespace {

Error invalid_request(const std::string& en, const std::string& zh) {
  Error e = errors::invalid("step", "invalid request: " + en, "无效的资源请求：" + zh);
  e.code = std::string(kReasonInvalidRequest);
  return e;
}

}  // namespace

Resources Request::resolved(std::string_view type) const {
  Resources r = *asked;
  if (any_gpu()) {
    r.set(kGpuAny, 0);
    r.set(std::string(kGpuPrefix) + std::string(type), gpus);
  }
  return r;
}

Resources Request::typed_part() const {
  Resources r = *asked;
  r.set(kGpuAny, 0);
  return r;
}

const Resources* shape_resources(const Step& step, int shape) {
  if (shape < 0 || shape > static_cast<int>(step.fallbacks.size())) return nullptr;
  return shape == 0 ? &step.resources : &step.fallbacks[static_cast<std::size_t>(shape - 1)].resources;
}

bool shape_open(const Task& task, int shape, Millis waited_ms) {
  return shape == 0 || waited_ms >= task.step.fallbacks[static_cast<std::size_t>(shape - 1)].after_s * 1000;
}

Result<Request> request_of(const Task& task, int shape) {
  Request req;
  req.shape = shape;
  req.asked = shape_resources(task.step, shape);
  if (req.asked == nullptr) {
    return invalid_request("no fallback shape " + std::to_string(shape), "没有第 " + std::to_string(shape) + " 个备选规格");
  }
  req.replicas = task.step.replicas;
  if (req.replicas < 1 || req.replicas > kMaxReplicas) {
    return invalid_request(
        "replicas must be 1.." + std::to_string(kMaxReplicas) + ", got " + std::to_string(req.replicas),
        "副本数应为 1.." + std::to_string(kMaxReplicas) + "，实际为 " + std::to_string(req.replicas));
  }
  for (const auto& [name, amount] : req.asked->amounts()) {
    if (name == kCpu) {
      req.cpu = amount;
    } else if (name == kMemory) {
      req.memory = amount;
    } else if (!name.starts_with(kGpuPrefix)) {
      req.others = true;
    }
    if (amount < 0 || amount > kMaxQuantity) {
      return invalid_request(name + " amount " + std::to_string(amount) + " is out of range",
                             name + " 的数量 " + std::to_string(amount) + " 超出范围");
    }
    if (!name.starts_with(kGpuPrefix)) continue;
    if (!req.gpu_type.empty()) {
      return invalid_request("more than one GPU type (" + std::string(kGpuPrefix) + std::string(req.gpu_type) + ", " + name + ")",
                             "请求了多种 GPU 类型（" + std::string(kGpuPrefix) + std::string(req.gpu_type) + "、" + name + "）");
    }
    req.gpu_type = std::string_view(name).substr(kGpuPrefix.size());
    if (req.gpu_type.empty()) return invalid_request("\"gpu/\" names no GPU type", "\"gpu/\" 未指明 GPU 类型");
    req.gpus = amount;
  }
  req.any = req.gpu_type == "any";
  return req;
}

}  // namespace cp::sched
