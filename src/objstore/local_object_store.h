// An ObjectStore on a local directory: the single-machine default
// (`--objects file:///var/lib/cubeplane/objects`).
//
// Key "logs/t1/a1/r0/0000000000000000" is the file
// <root>/logs/t1/a1/r0/0000000000000000. Writes go to a temporary file in the
// same directory, are fsynced, then renamed over the key: rename(2) is
// atomic, so a reader sees the old object or the new one, never a mix.
//
// One difference from S3: a key cannot also be a "directory" of other keys
// ("a" and "a/b" cannot both exist); putting one over the other is refused.
#pragma once

#include <filesystem>

#include "objstore/object_store.h"

namespace cp {

class LocalObjectStore : public ObjectStore {
 public:
  // Creates `root` (absolute) if it does not exist.
  static Result<std::unique_ptr<LocalObjectStore>> open(const std::filesystem::path& root);

  Result<ObjectInfo> put(const std::string& key, std::string_view data) override;
  Result<std::optional<std::string>> get(const std::string& key) override;
  Result<std::vector<ObjectInfo>> list(const std::string& prefix, const std::string& start_after = "",
                                       int limit = 1000) override;
  Status remove(const std::string& key) override;
  std::string url() const override;
  Result<std::string> read_url(const std::string& key, std::int64_t ttl_s) override;

  const std::filesystem::path& root() const { return root_; }

 private:
  explicit LocalObjectStore(std::filesystem::path root) : root_(std::move(root)) {}

  std::filesystem::path root_;
};

}  // namespace cp
