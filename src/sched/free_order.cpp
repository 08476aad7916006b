#include "sched/free_order.h"

#include <algorithm>
#include <limits>

#include "sched/feasible.h"

namespace cp::sched {
namespace {

void insert_sorted(std::vector<FreeOrder::Entry>& v, const FreeOrder::Entry& e) {
  v.insert(std::lower_bound(v.begin(), v.end(), e), e);
}

void erase_sorted(std::vector<FreeOrder::Entry>& v, const FreeOrder::Entry& e) {
  auto it = std::lower_bound(v.begin(), v.end(), e);
  if (it != v.end() && it->node == e.node && it->same_key(e)) v.erase(it);
}

// The entry `was` becomes `now`: moved to its new place over the entries in
// between (a node's free changes by one task's worth), not taken out and
// put back by two moves of everything after it. Where `was` is not there,
// `now` is put in.
void move_sorted(std::vector<FreeOrder::Entry>& v, const FreeOrder::Entry& was, const FreeOrder::Entry& now) {
  auto from = std::lower_bound(v.begin(), v.end(), was);
  if (from == v.end() || from->node != was.node || !from->same_key(was)) {
    insert_sorted(v, now);
    return;
  }
  if (now < was) {
    auto to = std::lower_bound(v.begin(), from, now);
    std::move_backward(to, from, from + 1);
    *to = now;
  } else {
    auto to = std::lower_bound(from + 1, v.end(), now);
    std::move(from + 1, to, from);
    *(to - 1) = now;
  }
}

// A figure as an order keeps it (Entry): within 64 bits.
std::int64_t key(Wide v) {
  constexpr Wide lo = std::numeric_limits<std::int64_t>::min(), hi = std::numeric_limits<std::int64_t>::max();
  return static_cast<std::int64_t>(std::clamp(v, lo, hi));
}

// The one project with GPU work on the node, kNoProject, or kSeveral.
ProjectId holder_of(const NodeLoad& load) {
  ProjectId one = kNoProject;
  for (const auto& [project, n] : load.gpu_holders) {
    if (n <= 0) continue;
    if (one != kNoProject && one != project) return FreeOrder::kSeveral;
    one = project;
  }
  return one;
}

}  // namespace

FreeOrder::FreeOrder(const std::vector<NodeView>& nodes, const std::vector<NodeLoad>& loads, std::size_t clusters,
                     std::size_t types)
    : types_(std::min<std::size_t>(types, 64)) {
  CP_CHECK(nodes.size() <= std::numeric_limits<std::uint32_t>::max(), "FreeOrder: node index past 32 bits");
  all_.resize(clusters * types_);
  single_.resize(clusters * types_);
  cpu_.resize(clusters);
  placed_.resize(nodes.size());
  bits_.assign(nodes.size(), 0);
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    placed_[i] = placed_of(i, nodes[i], loads[i]);
    const NodeView& v = nodes[i];
    bits_[i] = types_ >= 64 ? v.gpu_type_bits : v.gpu_type_bits & ((std::uint64_t{1} << types_) - 1);
    if (v.has_gpus() && bits_[i] == 0) every_gpu_node_ = false;
    for (std::uint64_t b = bits_[i]; b != 0; b &= b - 1) {
      std::size_t at = v.cluster_rank * types_ + static_cast<std::size_t>(std::countr_zero(b));
      all_[at].push_back(placed_[i].gpu);
      if (placed_[i].single) single_[at].push_back(placed_[i].gpu);
    }
    cpu_[v.cluster_rank].push_back(placed_[i].cpu);
  }
  for (auto& v : all_) std::sort(v.begin(), v.end());
  for (auto& v : single_) std::sort(v.begin(), v.end());
  for (auto& v : cpu_) std::sort(v.begin(), v.end());
  member_.assign(nodes.size(), 1);
}

FreeOrder::FreeOrder(std::size_t nodes, std::size_t clusters, std::size_t types, LoadMode mode)
    : types_(std::min<std::size_t>(types, 64)), mode_(mode) {
  CP_CHECK(nodes <= std::numeric_limits<std::uint32_t>::max(), "FreeOrder: node index past 32 bits");
  all_.resize(clusters * types_);
  single_.resize(clusters * types_);
  cpu_.resize(clusters);
  placed_.resize(nodes);
  bits_.assign(nodes, 0);
  member_.assign(nodes, 0);
}

void FreeOrder::add(std::size_t node, const NodeView& view, const NodeLoad& load) {
  if (member_[node]) {
    update(node, view, load);
    return;
  }
  bits_[node] = types_ >= 64 ? view.gpu_type_bits : view.gpu_type_bits & ((std::uint64_t{1} << types_) - 1);
  placed_[node] = placed_of(node, view, load);
  file(node, view, placed_[node], /*add=*/true);
  member_[node] = 1;
}

void FreeOrder::remove(std::size_t node, const NodeView& view) {
  if (!member_[node]) return;
  file(node, view, placed_[node], /*add=*/false);
  member_[node] = 0;
}

void FreeOrder::clear() {
  for (auto& v : all_) v.clear();
  for (auto& v : single_) v.clear();
  for (auto& v : cpu_) v.clear();
  std::fill(member_.begin(), member_.end(), 0);
}

FreeOrder::Placed FreeOrder::placed_of(std::size_t node, const NodeView& view, const NodeLoad& load) const {
  Placed p;
  const std::int64_t cpu = key(static_cast<Wide>(view.alloc_cpu) - cpu_in_use(load, mode_));
  const std::int64_t memory = key(static_cast<Wide>(view.alloc_memory) - memory_in_use(load, mode_));
  ProjectId holder = holder_of(load);
  const auto at = static_cast<std::uint32_t>(node);
  p.gpu = Entry{key(free_gpus(view, load, mode_)), cpu, memory, at, holder};
  p.cpu = Entry{cpu, memory, 0, at, holder};
  p.single = holder != kSeveral;
  return p;
}

void FreeOrder::file(std::size_t node, const NodeView& view, const Placed& p, bool add) {
  auto file_in = [add](std::vector<Entry>& v, const Entry& e) { add ? insert_sorted(v, e) : erase_sorted(v, e); };
  for (std::uint64_t b = bits_[node]; b != 0; b &= b - 1) {
    std::size_t at = view.cluster_rank * types_ + static_cast<std::size_t>(std::countr_zero(b));
    file_in(all_[at], p.gpu);
    if (p.single) file_in(single_[at], p.gpu);
  }
  file_in(cpu_[view.cluster_rank], p.cpu);
}

void FreeOrder::update(std::size_t node, const NodeView& view, const NodeLoad& load) {
  if (!member_[node]) return;
  Placed now = placed_of(node, view, load);
  const Placed& was = placed_[node];
  if (now.gpu.same_key(was.gpu) && now.cpu.same_key(was.cpu) && now.gpu.holder == was.gpu.holder) return;
  for (std::uint64_t b = bits_[node]; b != 0; b &= b - 1) {
    std::size_t at = view.cluster_rank * types_ + static_cast<std::size_t>(std::countr_zero(b));
    move_sorted(all_[at], was.gpu, now.gpu);
    if (was.single && now.single) {
      move_sorted(single_[at], was.gpu, now.gpu);
    } else if (was.single) {
      erase_sorted(single_[at], was.gpu);
    } else if (now.single) {
      insert_sorted(single_[at], now.gpu);
    }
  }
  move_sorted(cpu_[view.cluster_rank], was.cpu, now.cpu);
  placed_[node] = now;
}

}  // namespace cp::sched
