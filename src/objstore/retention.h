// Retention on any ObjectStore: remove what is older than a cutoff under a
// prefix, a page at a time. The server's retention job runs it on "tmp/"
// (objects there expire after N days); it needs nothing from a backend but
// list and remove, so S3 lifecycle rules are not required (though they may
// be used as well).
#pragma once

#include <cstdint>
#include <string>

#include "objstore/object_store.h"

namespace cp {

// Removes every object under `prefix` whose modified time is before
// `cutoff_ms`, listing `batch` keys at a time (so that memory stays small and
// each round trip is short), and at most `max_remove` of them (-1: no limit),
// so that a caller can keep each pass short. Returns how many it removed.
// Stops at the first error; what it removed by then stays removed, and a
// later run goes on.
Result<std::int64_t> remove_older_than(ObjectStore& store, const std::string& prefix, std::int64_t cutoff_ms,
                                       int batch = 100, std::int64_t max_remove = -1);

}  // namespace cp
