#include "model/types.h"

#include <algorithm>

namespace cp {

Labels Node::effective_labels() const {
  Labels out = labels;
  for (const auto& [k, v] : label_overrides) {
    if (v.empty()) {
      out.erase(k);
    } else {
      out[k] = v;
    }
  }
  return out;
}

bool Node::in_maintenance() const {
  if (maintenance) return true;
  auto l = effective_labels();
  auto it = l.find(std::string(kLabelMaintenance));
  return it != l.end() && (it->second == "true" || it->second == "yes" || it->second == "1");
}

Resources ResourceGroup::guaranteed() const {
  Resources r;
  for (const auto& [k, q] : quota) r.set(k, q.guaranteed);
  return r;
}

Resources ResourceGroup::ceiling() const {
  Resources r;
  for (const auto& [k, q] : quota) r.set(k, q.max.value_or(q.guaranteed));
  return r;
}

std::optional<ProjectRole> ProjectGroup::role_of(std::string_view user) const {
  for (const auto& m : members) {
    if (m.user == user) return m.role;
  }
  return std::nullopt;
}

bool ProjectGroup::allows_resource_group(std::string_view rg) const {
  if (rg == default_resource_group) return true;
  return std::any_of(resource_groups.begin(), resource_groups.end(), [&](const auto& g) { return g.name == rg; });
}

bool is_terminal(TaskState s) {
  return s == TaskState::Succeeded || s == TaskState::Failed || s == TaskState::Cancelled;
}

bool holds_resources(TaskState s) {
  return s == TaskState::Admitted || s == TaskState::Dispatched || s == TaskState::Running ||
         s == TaskState::Preempting;
}

bool can_transition(TaskState from, TaskState to) {
  using S = TaskState;
  if (is_terminal(from)) return false;
  if (to == S::Cancelled) return true;  // from any live state
  switch (from) {
    case S::Queued: return to == S::Admitted || to == S::Dispatched || to == S::Failed;
    case S::Admitted: return to == S::Dispatched || to == S::Queued;
    case S::Dispatched:
      return to == S::Running || to == S::Preempting || to == S::Lost || to == S::Queued || to == S::Succeeded ||
             to == S::Failed;
    case S::Running:
      return to == S::Succeeded || to == S::Failed || to == S::Preempting || to == S::Lost || to == S::Queued;
    case S::Preempting: return to == S::Queued || to == S::Succeeded || to == S::Failed || to == S::Lost;
    case S::Lost: return to == S::Queued || to == S::Failed;
    default: return false;
  }
}

bool is_terminal(AttemptState s) {
  return s == AttemptState::Succeeded || s == AttemptState::Failed || s == AttemptState::Cancelled ||
         s == AttemptState::Preempted || s == AttemptState::Lost;
}

}  // namespace cp
