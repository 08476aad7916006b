#include "objstore/retention.h"

namespace cp {

Result<std::int64_t> remove_older_than(ObjectStore& store, const std::string& prefix, std::int64_t cutoff_ms,
                                       int batch, std::int64_t max_remove) {
  if (batch < 1) return errors::invalid("batch", "must be at least 1", "必须至少为 1");
  std::int64_t removed = 0;
  std::string after;
  while (true) {
    // Paging by the last key seen, not by count: removing keys behind the
    // cursor does not move the keys ahead of it.
    CP_ASSIGN(auto page, store.list(prefix, after, batch));
    for (const ObjectInfo& info : page) {
      if (info.modified_ms >= cutoff_ms) continue;
      if (max_remove >= 0 && removed >= max_remove) return removed;
      CP_TRY(store.remove(info.key));
      ++removed;
    }
    if (static_cast<int>(page.size()) < batch) return removed;
    after = page.back().key;
  }
}

}  // namespace cp
