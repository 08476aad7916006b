#include "sched/reasons.h"

#include "common/clock.h"
#include "sched/request.h"
#include "sched/scheduler.h"

namespace cp::sched::reasons {

using namespace std::string_view_literals;
namespace {

PendingReason make(std::string_view code, std::string en, std::string zh, json::object details) {
  return PendingReason{std::string(code), std::move(en), std::move(zh), std::move(details)};
}

// A reason kept as its figures, worded by word(figures) when first read.
template <class Figures>
Reasons::Shared kept_as(Figures figures) {
  return std::make_shared<const FiguredReason<Figures>>(std::move(figures));
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

json::array pairs(NamedAmountsView items) {
  json::array a;
  a.reserve(items.size());
  for (const auto& [name, amount] : items) {
    json::object o(2);
    o.emplace("name", name);
    o.emplace("amount", amount);
    a.emplace_back(std::move(o));
  }
  return a;
}

// "a 4, b 2": appended to `out`.
void append_pairs(std::string& out, std::string_view resource, NamedAmountsView items, std::string_view sep) {
  for (std::size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += sep;
    out += items[i].first;
    out += ' ';
    out += format_quantity(resource, items[i].second);
  }
}

// The same list in both languages, in brackets after its opening words.
void append_pairs_both(std::string& en, std::string& zh, std::string_view en_open, std::string_view zh_open,
                       std::string_view resource, NamedAmountsView items) {
  en += en_open;
  append_pairs(en, resource, items, ", ");
  en += ')';
  zh += zh_open;
  append_pairs(zh, resource, items, "，");
  zh += "）";
}

// Built for every class of task refused on quota in a cycle (tens of
// thousands in a big queue): the object sized once, the sentences appended
// in place rather than from temporaries.
PendingReason quota(const QuotaFigures& f) {
  json::object d(f.cohort.empty() ? 7 : 12);
  d.emplace("resource", f.resource);
  d.emplace("used", f.used);
  d.emplace("requested", f.requested);
  d.emplace("limit", f.limit);
  d.emplace("guaranteed", f.guaranteed);
  d.emplace("resource_group", f.resource_group);
  d.emplace("holders", pairs(f.holders));
  const std::string_view r = f.resource;
  const std::string_view g = f.resource_group;
  const std::string u = format_quantity(r, f.used), q = format_quantity(r, f.requested), l = format_quantity(r, f.limit);
  std::string en, zh;
  en.reserve(160);
  zh.reserve(160);
  en.append("quota: "sv).append(r).append(" "sv).append(u).append(" of "sv).append(l).append(" in use by "sv).append(g);
  zh.append("配额不足："sv).append(g).append(" 的 "sv).append(r).append(" 已用 "sv).append(u).append("/"sv).append(l);
  if (!f.holders.empty()) {
    append_pairs_both(en, zh, " (", "（", r, f.holders);
  }
  en.append(", this task asks for "sv).append(q);
  zh.append("，本任务申请 "sv).append(q);
  if (!f.cohort.empty()) {
    d.emplace("cohort", f.cohort);
    d.emplace("ceiling", f.ceiling);
    d.emplace("cohort_idle", f.cohort_idle);
    d.emplace("may_borrow", f.may_borrow);
    d.emplace("borrowers", pairs(f.borrowers));
    if (!f.may_borrow) {
      en.append("; its priority class is not preemptible, so it may not borrow from cohort "sv).append(f.cohort);
      zh.append("；其优先级不可被抢占，因此不能向资源池 "sv).append(f.cohort).append(" 借用"sv);
    } else if (f.used + f.requested > f.ceiling) {
      const std::string c = format_quantity(r, f.ceiling);
      en.append("; borrowing stops at the group's max of "sv).append(c);
      zh.append("；借用上限为 "sv).append(c);
    } else {
      const std::string idle = format_quantity(r, f.cohort_idle);
      en.append("; cohort "sv).append(f.cohort).append(" has "sv).append(idle).append(" idle"sv);
      zh.append("；资源池 "sv).append(f.cohort).append(" 仅剩 "sv).append(idle).append(" 空闲"sv);
      if (!f.borrowers.empty()) {
        append_pairs_both(en, zh, " (borrowed by ", "（被借用：", r, f.borrowers);
      }
    }
  }
  return make(kReasonQuota, std::move(en), std::move(zh), std::move(d));
}

namespace {

// (name, amount) pairs as views of the kept names, or kept from views.
template <class Out, class In>
Out pairs_as(const In& items) {
  Out out;
  out.reserve(items.size());
  for (const auto& [name, amount] : items) out.emplace_back(name, amount);
  return out;
}

}  // namespace

std::string_view code_of(const QuotaRefusal&) { return kReasonQuota; }

PendingReason word(const QuotaRefusal& f) {
  const auto holders = pairs_as<NamedAmounts>(f.holders), borrowers = pairs_as<NamedAmounts>(f.borrowers);
  return quota(QuotaFigures{f.resource_group, f.resource, f.used, f.requested, f.guaranteed, f.limit, holders,
                            f.cohort, f.ceiling, f.cohort_idle, f.may_borrow, borrowers});
}

Reasons::Shared quota_refusal(const QuotaFigures& f) {
  using Amounts = QuotaRefusal::Amounts;
  return kept_as(QuotaRefusal{std::string(f.resource_group), std::string(f.resource), f.used, f.requested,
                              f.guaranteed, f.limit, pairs_as<Amounts>(f.holders), std::string(f.cohort), f.ceiling,
                              f.cohort_idle, f.may_borrow, pairs_as<Amounts>(f.borrowers)});
}

std::string_view quota_resource(const Reason& refusal) {
  if (const auto* kept = dynamic_cast<const FiguredReason<QuotaRefusal>*>(&refusal)) return kept->figures().resource;
  const json::value* r = refusal.worded().details.if_contains("resource");
  return r != nullptr && r->is_string() ? std::string_view(r->get_string()) : std::string_view();
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

PendingReason storage_pool(const PoolFilter& pool, std::string_view group, const ClusterCounts& counts,
                           std::int64_t usable) {
  const auto excluded = static_cast<std::int64_t>(pool.excluded.size());
  const auto in_pool = static_cast<std::int64_t>(pool.pool_clusters.size());
  json::object d;
  d["storage_pool"] = pool.pool;
  d["resource_group"] = group;
  d["clusters_excluded"] = excluded;
  d["excluded"] = string_array(pool.excluded);
  d["pool_clusters"] = string_array(pool.pool_clusters);
  d["pool_offline"] = pool.pool_offline;
  d["usable"] = usable;
  d["clusters_total"] = counts.total;
  d["not_pinned"] = counts.not_pinned;
  d["selector_mismatch"] = counts.selector_mismatch;
  const std::string& p = pool.pool;
  std::string g(group);
  std::string others_en, others_zh;
  if (excluded > 0) {
    others_en = count_of(excluded, "cluster", "clusters") + " in other pools not considered (" +
                join(pool.excluded, ", ") + ")";
    others_zh = "其他存储池的 " + std::to_string(excluded) + " 个集群不予考虑（" + join(pool.excluded, "、") + "）";
  }
  std::string en, zh;
  if (usable > 0) {
    en = "bound to storage pool " + p + ", where its checkpoints and data are: " + others_en;
    zh = "已绑定存储池 " + p + "（检查点和数据所在）：" + others_zh;
    return make(kReasonStoragePool, std::move(en), std::move(zh), std::move(d));
  }
  std::vector<std::string> parts_en, parts_zh;
  if (in_pool == 0) {
    en = "storage pool " + p + " has no cluster in resource group " + g + " that the task may use";
    zh = "存储池 " + p + " 在资源组 " + g + " 中没有本任务可用的集群";
  } else {
    en = "storage pool " + p + " has no cluster online";
    zh = "存储池 " + p + " 中没有在线集群";
    // Nothing usable: every cluster of the pool that the task may use is down.
    parts_en.push_back(count_of(pool.pool_offline, "cluster", "clusters") + " of the pool offline (" +
                       join(pool.pool_clusters, ", ") + ")");
    parts_zh.push_back("该池 " + std::to_string(pool.pool_offline) + " 个集群离线（" +
                       join(pool.pool_clusters, "、") + "）");
  }
  if (excluded > 0) {
    parts_en.push_back(others_en);
    parts_zh.push_back(others_zh);
  }
  en += ": the task's checkpoints and data are there";
  zh += "：任务的检查点和数据位于该池";
  if (!parts_en.empty()) {
    en += "; " + join(parts_en, "; ");
    zh += "；" + join(parts_zh, "；");
  }
  return make(kReasonStoragePool, std::move(en), std::move(zh), std::move(d));
}

Reasons::Shared no_node(const NodeCounts& counts, const Request& request, const ResourceGroup& group,
                        const std::vector<std::string>& clusters) {
  // Only the figures its words and details use.
  NoNodeFigures f{counts, request.replicas, request.gpus, request.any_gpu(), {}, {}, clusters};
  if (counts[NodeMisfit::kGpuTypeMismatch] != 0 && !f.any_gpu) f.gpu_type = request.gpu_type;
  if (counts[NodeMisfit::kSelectorMismatch] != 0) f.node_selector = selector_text(group.node_selector);
  return kept_as(std::move(f));
}

std::string_view code_of(const NoNodeFigures& f) {
  // Nodes had room for single replicas but no cluster for the whole gang: the
  // task waits for its gang to fit together, not for a node to exist.
  return f.counts.fit > 0 && f.replicas > 1 ? kReasonGang : kReasonNoNode;
}

PendingReason word(const NoNodeFigures& f) {
  const NodeCounts& counts = f.counts;
  const std::vector<std::string>& clusters = f.clusters;
  json::object d(kNodeMisfitCount + 4);
  d.emplace("nodes_total", counts.total);
  for (std::size_t i = 0; i < kNodeMisfitCount; ++i) d.emplace(misfit_key(static_cast<NodeMisfit>(i)), counts.misfits[i]);
  d.emplace("nodes_fit", counts.fit);
  d.emplace("replicas", f.replicas);
  d.emplace("clusters", string_array(clusters));

  // Worded for every class of task short of nodes: the sentences appended
  // in place, and a cause's words only when some node has it.
  std::string en = "no node fits: " + count_of(counts.total, "node", "nodes");
  std::string zh = "没有可用节点：共 " + std::to_string(counts.total) + " 个节点";
  if (counts.total == 0) {
    en.append(" in "sv).append(join(clusters, ", "));
    zh.append("（集群 "sv).append(join(clusters, "、")).append("）"sv);
  }
  // "; 3 in maintenance, 9 lack gpu-type=...": each cause with its count.
  int parts = 0;
  auto part = [&](std::int64_t n) {
    en.append(parts == 0 ? "; " : ", ");
    zh.append(parts == 0 ? "；" : "，");
    ++parts;
    const std::string figure = std::to_string(n);
    en.append(figure).append(" "sv);
    zh.append(figure).append(" 个"sv);
  };
  auto cause = [&](NodeMisfit m) {
    const std::int64_t n = counts[m];
    if (n != 0) part(n);
    return n != 0;
  };
  if (cause(NodeMisfit::kNotReady)) en.append("not ready"sv), zh.append("未就绪"sv);
  if (cause(NodeMisfit::kMaintenance)) en.append("in maintenance"sv), zh.append("处于维护中"sv);
  if (cause(NodeMisfit::kSelectorMismatch)) {
    en.append("not matching node selector "sv).append(f.node_selector);
    zh.append("不匹配节点选择器 "sv).append(f.node_selector);
  }
  if (cause(NodeMisfit::kGpuTypeMismatch)) {
    if (f.any_gpu) {
      en.append("without GPUs"sv);
      zh.append("没有 GPU"sv);
    } else {
      en.append("lack gpu-type="sv).append(f.gpu_type);
      zh.append("缺少 gpu-type="sv).append(f.gpu_type);
    }
  }
  if (cause(NodeMisfit::kInsufficientCpu)) en.append("lack free cpu"sv), zh.append("空闲 CPU 不足"sv);
  if (cause(NodeMisfit::kInsufficientMemory)) en.append("lack free memory"sv), zh.append("空闲内存不足"sv);
  if (cause(NodeMisfit::kInsufficientGpu)) {
    const std::string gpus = std::to_string(f.gpus);
    en.append("lack free GPUs (need "sv).append(gpus).append(")"sv);
    zh.append("空闲 GPU 不足 "sv).append(gpus).append(" 块"sv);
  }
  if (cause(NodeMisfit::kInsufficientOther)) en.append("lack other free resources"sv), zh.append("其他空闲资源不足"sv);
  if (counts.fit > 0) {
    // Each of these nodes could take a replica, yet no one cluster could take
    // the whole gang (or, for gpu/any, one GPU type in it).
    const std::string r = std::to_string(f.replicas);
    part(counts.fit);
    en.append("could take a replica, but no cluster has room for all "sv).append(r).append(" replicas together"sv);
    zh.append("可容纳单个副本，但没有一个集群能同时容纳全部 "sv).append(r).append(" 个副本"sv);
  }
  return make(code_of(f), std::move(en), std::move(zh), std::move(d));
}

Reasons::Shared preemption_grace(std::vector<VictimFigure> victims, bool already_stopping) {
  return kept_as(GraceFigures{std::move(victims), already_stopping});
}

std::string_view code_of(const GraceFigures&) { return kReasonPreemptionGrace; }

PendingReason word(const GraceFigures& f) {
  const std::vector<VictimFigure>& victims = f.victims;
  const bool already_stopping = f.already_stopping;
  json::array list;
  list.reserve(victims.size());
  const auto n = static_cast<std::int64_t>(victims.size());
  std::string en = already_stopping
                       ? "waiting for " + count_of(n, "stopping task", "stopping tasks") + " to checkpoint and exit: "
                       : "preempting " + count_of(n, "task", "tasks") + " to make room; waiting out their grace: ";
  std::string zh = already_stopping ? "等待 " + std::to_string(n) + " 个正在停止的任务保存检查点并退出："
                                    : "正在抢占 " + std::to_string(n) + " 个任务以腾出资源，等待其宽限期结束：";
  for (std::size_t i = 0; i < victims.size(); ++i) {
    const VictimFigure& v = victims[i];
    json::object o(3);
    o.emplace("attempt", v.attempt_id);
    o.emplace("task", v.task_id);
    o.emplace("kind", v.kind);
    list.push_back(std::move(o));
    if (i > 0) {
      en.append(", "sv);
      zh.append("、"sv);
    }
    en.append(v.task_id);
    zh.append(v.task_id);
  }
  json::object d(2);
  d.emplace("victims", std::move(list));
  d.emplace("already_stopping", already_stopping);
  return make(code_of(f), std::move(en), std::move(zh), std::move(d));
}

Reasons::Shared reservation(std::vector<std::string> held_for) {
  return kept_as(ReservationFigures{std::move(held_for)});
}

std::string_view code_of(const ReservationFigures&) { return kReasonReservation; }

PendingReason word(const ReservationFigures& f) {
  const std::vector<std::string>& held_for = f.held_for;
  json::object d(1);
  d.emplace("held_for", string_array(held_for));
  std::string en = "would fit, but the room is held for earlier waiting ";
  en.append(held_for.size() == 1 ? "task " : "tasks ").append(join(held_for, ", ")).append(" so they are not starved"sv);
  std::string zh = "资源已为更早等待的任务 ";
  zh.append(join(held_for, "、")).append(" 预留（防止其饿死），本任务需等待"sv);
  return make(code_of(f), std::move(en), std::move(zh), std::move(d));
}

Reasons::Shared preempt_later(std::string_view priority_class, std::int64_t preempt_after_s, Millis queued_at) {
  return kept_as(PreemptLaterFigures{std::string(priority_class), preempt_after_s, queued_at});
}

std::string_view code_of(const PreemptLaterFigures&) { return kReasonPreemptLater; }

PendingReason word(const PreemptLaterFigures& f) {
  const std::string_view priority_class = f.priority_class;
  const std::string after = std::to_string(f.preempt_after_s);
  const std::string from = format_time(f.queued_at + f.preempt_after_s * 1000);
  json::object d(3);
  d.emplace("priority_class", priority_class);
  d.emplace("preempt_after_s", f.preempt_after_s);
  d.emplace("may_preempt_at", from);
  std::string en = "priority class ";
  en.append(priority_class).append(" may preempt after "sv).append(after).append("s in the queue, from "sv);
  en.append(from);
  std::string zh = "优先级 ";
  zh.append(priority_class).append(" 排队 "sv).append(after).append(" 秒后才可抢占，自 "sv);
  zh.append(from).append(" 起"sv);
  return make(code_of(f), std::move(en), std::move(zh), std::move(d));
}

Reasons::Shared fallbacks(const Task& task, Millis waited_ms) {
  // Made for every waiting task with fallbacks (its wait is its own).
  const std::vector<StepShape>& shapes = task.step.fallbacks;
  std::vector<char> tried;
  tried.reserve(shapes.size());
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    tried.push_back(shape_open(task, static_cast<int>(i + 1), waited_ms) ? 1 : 0);
  }
  return kept_as(FallbackFigures{shapes, task.queued_at, std::move(tried)});
}

std::string_view code_of(const FallbackFigures&) { return kReasonFallback; }

PendingReason word(const FallbackFigures& f) {
  json::array shapes;
  shapes.reserve(f.shapes.size());
  std::string en = "fallback shapes: ";
  std::string zh = "备选规格：";
  for (std::size_t i = 0; i < f.shapes.size(); ++i) {
    const StepShape& s = f.shapes[i];
    const bool tried = i < f.tried.size() && f.tried[i] != 0;
    const std::string opens_at = format_time(f.queued_at + s.after_s * 1000);
    std::string what = s.resources.to_string();
    if (i > 0) {
      en.append("; "sv);
      zh.append("；"sv);
    }
    en.append(what);
    zh.append(what);
    if (tried) {
      en.append(" (tried)"sv);
      zh.append("（已尝试）"sv);
    } else {
      en.append(" (from "sv).append(opens_at).append(")"sv);
      zh.append("（自 "sv).append(opens_at).append(" 起）"sv);
    }
    json::object o(5);
    o.emplace("shape", static_cast<std::int64_t>(i + 1));
    o.emplace("after_s", s.after_s);
    o.emplace("opens_at", opens_at);
    o.emplace("tried", tried);
    o.emplace("resources", std::move(what));
    shapes.push_back(std::move(o));
  }
  json::object d(1);
  d.emplace("shapes", std::move(shapes));
  return make(code_of(f), std::move(en), std::move(zh), std::move(d));
}

PendingReason for_shape(PendingReason reason, int shape) {
  std::string n = std::to_string(shape);
  reason.message = "with fallback shape " + n + ": " + reason.message;
  reason.message_zh = "备选规格 " + n + "：" + reason.message_zh;
  reason.details["shape"] = shape;
  return reason;
}

PendingReason reserved(const std::vector<std::string>& nodes, std::string_view group) {
  json::object d;
  d["nodes"] = string_array(nodes);
  d["resource_group"] = group;
  std::string g(group);
  if (nodes.empty()) {
    return make("reserved", "first in line in " + g + ": its quota is held for it until running work ends",
                "在 " + g + " 中排在首位：已为其预留配额，等待运行中的任务结束", std::move(d));
  }
  std::string list = join(nodes, ", ");
  return make("reserved", "first in line: room is held for it on " + list + " until running work there ends",
              "排在首位：已在 " + join(nodes, "、") + " 上为其预留资源，等待其上运行中的任务结束", std::move(d));
}

PendingReason invalid_request(const Error& error) {
  return make(kReasonInvalidRequest, error.message, error.message_zh, error.details);
}

}  // namespace cp::sched::reasons
