// The object store: logs, artifacts and checkpoints by key. Keys are
// slash-separated paths ("logs/<task>/<attempt>/000001"). Objects are written
// whole, as on S3; logs are appended as numbered chunk objects.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"

namespace cp {

struct ObjectInfo {
  std::string key;
  std::int64_t size = 0;
  std::int64_t modified_ms = 0;
  std::string version_id;  // "" where the store has no versions
};

class ObjectStore {
 public:
  virtual ~ObjectStore() = default;
  // Atomic: a reader sees the old object or the new one, never a mix.
  virtual Result<ObjectInfo> put(const std::string& key, std::string_view data) = 0;
  virtual Result<std::optional<std::string>> get(const std::string& key) = 0;
  // Keys under prefix in lexicographic order, at most `limit`, after `start_after`.
  virtual Result<std::vector<ObjectInfo>> list(const std::string& prefix, const std::string& start_after = "",
                                               int limit = 1000) = 0;
  virtual Status remove(const std::string& key) = 0;  // missing is not an error
  virtual std::string url() const = 0;
  // A URL that reads one object without this store's credential, for
  // `ttl_s` seconds at least where the store limits it (S3: a presigned GET,
  // at most 7 days; a local store: file:///<root>/<key>, readable on this
  // machine only). Agents read the control plane's beacon through it
  // (DESIGN.md "Fencing and outages"). Key checked as put's.
  virtual Result<std::string> read_url(const std::string& key, std::int64_t ttl_s) = 0;
};

// The longest life of a read_url (S3 refuses presigned URLs past 7 days).
constexpr std::int64_t kMaxReadUrlTtlS = 7 * 86400;

// Rejects keys that are empty, absolute, contain "..", "//", NUL or control characters.
Status validate_object_key(std::string_view key);
// The arguments of ObjectStore::list: a limit that is not negative, and a
// prefix that is the beginning of some valid key (it may end mid-name,
// "logs/t1/a"). Every backend checks them the same way.
Status validate_list_request(const std::string& prefix, int limit);

// file:///abs/dir, or s3://bucket[/prefix]?endpoint=...&region=...&style=path|virtual
// with credentials from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (s3_object_store.h).
Result<std::unique_ptr<ObjectStore>> open_object_store(const std::string& url);

// Keys used by the platform.
std::string log_chunk_key(const std::string& task_id, const std::string& attempt_id, int replica, std::int64_t offset);
std::string log_prefix(const std::string& task_id, const std::string& attempt_id);

}  // namespace cp
