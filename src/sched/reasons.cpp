#include "sched/reasons.h"

#include "sched/scheduler.h"

namespace cp::sched::reasons {
namespace {

PendingReason make(std::string_view code, std::string en, std::string zh, json::object details) {
  return PendingReason{std::string(code), std::move(en), std::move(zh), std::move(details)};
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& s : items) {
    if (!out.empty()) out += sep;
    out += s;
  }
  return out;
}

std::string selector_text(const Labels& selector) {
  std::vector<std::string> parts;
  for (const auto& [k, v] : selector) parts.push_back(k + "=" + v);
  return join(parts, ",");
}

json::array string_array(const std::vector<std::string>& items) {
  json::array a;
  for (const auto& s : items) a.emplace_back(s);
  return a;
}

std::string count_of(std::int64_t n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

}  // namespace

PendingReason dependencies(const std::vector<std::string>& task_ids) {
  auto n = static_cast<std::int64_t>(task_ids.size());
  json::object d;
  d["tasks"] = string_array(task_ids);
  return make(kReasonDependencies,
              "waiting for " + count_of(n, "upstream task", "upstream tasks") + ": " + join(task_ids, ", "),
              "等待 " + std::to_string(n) + " 个上游任务：" + join(task_ids, "、"), std::move(d));
}

PendingReason unknown_group(std::string_view group) {
  json::object d;
  d["resource_group"] = group;
  std::string g(group);
  return make(kReasonUnknownGroup, "resource group " + g + " does not exist", "资源组 " + g + " 不存在", std::move(d));
}

PendingReason quota(std::string_view group, std::string_view resource, std::int64_t used, std::int64_t requested,
                    std::int64_t limit) {
  json::object d;
  d["resource"] = resource;
  d["used"] = used;
  d["requested"] = requested;
  d["limit"] = limit;
  d["resource_group"] = group;
  std::string r(resource), g(group);
  std::string u = format_quantity(resource, used), q = format_quantity(resource, requested),
              l = format_quantity(resource, limit);
  return make(kReasonQuota, "quota: " + r + " " + u + " of " + l + " in use by " + g + ", this task asks for " + q,
              "配额不足：" + g + " 的 " + r + " 已用 " + u + "/" + l + "，本任务申请 " + q, std::move(d));
}

PendingReason cluster_offline(std::string_view id, const Cluster* cluster) {
  std::string state = cluster ? std::string(boost::describe::enum_to_string(cluster->state, "offline")) : "offline";
  std::string why = cluster ? cluster->state_reason : "not_registered";
  std::string message = cluster ? cluster->state_message : "";
  json::object d;
  d["cluster"] = id;
  d["state"] = state;
  d["state_reason"] = why;
  d["state_message"] = message;
  std::string c(id);
  std::string state_zh = state == "draining" ? "排空中" : "离线";
  std::string en = "cluster " + c + " " + state + ": " + (why.empty() ? "no reason given" : why);
  std::string zh = "集群 " + c + " " + state_zh + "：" + (why.empty() ? "未说明原因" : why);
  if (!message.empty()) {
    en += " (" + message + ")";
    zh += "（" + message + "）";
  }
  return make(kReasonClusterOffline, std::move(en), std::move(zh), std::move(d));
}

PendingReason pinned_outside_group(std::string_view pinned, std::string_view group,
                                   const std::vector<std::string>& group_clusters) {
  json::object d;
  d["cluster"] = pinned;
  d["resource_group"] = group;
  d["clusters"] = string_array(group_clusters);
  std::string p(pinned), g(group), list = join(group_clusters, ", ");
  return make(kReasonNoCluster, "pinned cluster " + p + " is not in resource group " + g + " (clusters: " + list + ")",
              "指定的集群 " + p + " 不属于资源组 " + g + "（集群：" + list + "）", std::move(d));
}

PendingReason no_cluster(std::string_view group, std::string_view pinned, const Labels& selector,
                         const ClusterCounts& counts) {
  json::object d;
  d["resource_group"] = group;
  d["clusters_total"] = counts.total;
  d["not_pinned"] = counts.not_pinned;
  d["selector_mismatch"] = counts.selector_mismatch;
  d["offline"] = counts.offline;
  std::string g(group);
  std::string en = "no cluster available in " + g + ": " + count_of(counts.total, "cluster", "clusters");
  std::string zh = "资源组 " + g + " 中没有可用集群：共 " + std::to_string(counts.total) + " 个集群";
  std::vector<std::string> parts_en, parts_zh;
  if (counts.not_pinned > 0) {
    parts_en.push_back(std::to_string(counts.not_pinned) + " not the pinned cluster " + std::string(pinned));
    parts_zh.push_back(std::to_string(counts.not_pinned) + " 个不是指定的集群 " + std::string(pinned));
  }
  if (counts.selector_mismatch > 0) {
    parts_en.push_back(std::to_string(counts.selector_mismatch) + " not matching cluster selector " +
                       selector_text(selector));
    parts_zh.push_back(std::to_string(counts.selector_mismatch) + " 个不匹配集群选择器 " + selector_text(selector));
  }
  if (!parts_en.empty()) {
    en += "; " + join(parts_en, ", ");
    zh += "；" + join(parts_zh, "，");
  }
  return make(kReasonNoCluster, std::move(en), std::move(zh), std::move(d));
}

PendingReason no_node(const NodeCounts& counts, const Request& request, const ResourceGroup& group,
                      const std::vector<std::string>& clusters) {
  json::object d;
  d["nodes_total"] = counts.total;
  for (std::size_t i = 0; i < kNodeMisfitCount; ++i) d[misfit_key(static_cast<NodeMisfit>(i))] = counts.misfits[i];
  d["nodes_fit"] = counts.fit;
  d["replicas"] = request.replicas;
  d["clusters"] = string_array(clusters);

  std::string en = "no node fits: " + count_of(counts.total, "node", "nodes");
  std::string zh = "没有可用节点：共 " + std::to_string(counts.total) + " 个节点";
  if (counts.total == 0) {
    en += " in " + join(clusters, ", ");
    zh += "（集群 " + join(clusters, "、") + "）";
  }
  std::string type = request.any_gpu() ? "" : request.gpu_type;
  std::string selector = selector_text(group.node_selector);
  std::vector<std::string> parts_en, parts_zh;
  auto part = [&](NodeMisfit m, const std::string& en_text, const std::string& zh_text) {
    std::int64_t n = counts[m];
    if (n == 0) return;
    parts_en.push_back(std::to_string(n) + " " + en_text);
    parts_zh.push_back(std::to_string(n) + " 个" + zh_text);
  };
  part(NodeMisfit::kNotReady, "not ready", "未就绪");
  part(NodeMisfit::kMaintenance, "in maintenance", "处于维护中");
  part(NodeMisfit::kSelectorMismatch, "not matching node selector " + selector, "不匹配节点选择器 " + selector);
  if (request.any_gpu()) {
    part(NodeMisfit::kGpuTypeMismatch, "without GPUs", "没有 GPU");
  } else {
    part(NodeMisfit::kGpuTypeMismatch, "lack gpu-type=" + type, "缺少 gpu-type=" + type);
  }
  part(NodeMisfit::kInsufficientCpu, "lack free cpu", "空闲 CPU 不足");
  part(NodeMisfit::kInsufficientMemory, "lack free memory", "空闲内存不足");
  part(NodeMisfit::kInsufficientGpu, "lack free GPUs (need " + std::to_string(request.gpus) + ")",
       "空闲 GPU 不足 " + std::to_string(request.gpus) + " 块");
  part(NodeMisfit::kInsufficientOther, "lack other free resources", "其他空闲资源不足");
  if (counts.fit > 0) {
    // Each of these nodes could take a replica, yet no one cluster could take
    // the whole gang (or, for gpu/any, one GPU type in it).
    std::string r = std::to_string(request.replicas);
    parts_en.push_back(std::to_string(counts.fit) + " could take a replica, but no cluster has room for all " + r +
                       " replicas together");
    parts_zh.push_back(std::to_string(counts.fit) + " 个可容纳单个副本，但没有一个集群能同时容纳全部 " + r + " 个副本");
  }
  if (!parts_en.empty()) {
    en += "; " + join(parts_en, ", ");
    zh += "；" + join(parts_zh, "，");
  }
  return make(kReasonNoNode, std::move(en), std::move(zh), std::move(d));
}

PendingReason invalid_request(const Error& error) {
  return make(kReasonInvalidRequest, error.message, error.message_zh, error.details);
}

}  // namespace cp::sched::reasons
