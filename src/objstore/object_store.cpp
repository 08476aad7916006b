// Key rules, the platform's key layout, and the choice of store by URL.
#include "objstore/object_store.h"

#include <cinttypes>
#include <cstdio>

#include "objstore/local_object_store.h"
#include "objstore/s3_object_store.h"

namespace cp {
namespace {

// S3's own limit; the local store keeps to it so that keys stay portable.
constexpr std::size_t kMaxKeyBytes = 1024;

Error bad_key(std::string_view key, const std::string& en, const std::string& zh) {
  // Control characters are what makes a key bad often enough; do not echo them.
  std::string shown;
  for (unsigned char c : key.substr(0, 200)) shown += (c < 0x20 || c == 0x7f) ? '?' : static_cast<char>(c);
  Error e{"invalid_object_key", 400, "invalid object key \"" + shown + "\": " + en,
          "无效的对象键 \"" + shown + "\"：" + zh, {}};
  return e;
}

Error unsupported_url(const std::string& url, const std::string& en, const std::string& zh) {
  Error e{"unsupported_objects_url", 400, en, zh, {}};
  e.details["url"] = url;
  return e;
}

}  // namespace

Status validate_object_key(std::string_view key) {
  if (key.empty()) return bad_key(key, "is empty", "为空");
  if (key.size() > kMaxKeyBytes) return bad_key(key, "is longer than 1024 bytes", "超过 1024 字节");
  if (key.front() == '/') return bad_key(key, "must not start with '/'", "不能以 '/' 开头");
  for (unsigned char c : key) {
    if (c < 0x20 || c == 0x7f) return bad_key(key, "contains a control character", "包含控制字符");
  }
  // Segment by segment: no empty ones ("a//b", "a/"), no "." or "..", so a
  // key names exactly one place and never climbs out of the store.
  std::size_t start = 0;
  while (true) {
    std::size_t slash = key.find('/', start);
    std::string_view seg = key.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start);
    if (seg.empty()) return bad_key(key, "has an empty path segment", "包含空的路径段");
    if (seg == "." || seg == "..") return bad_key(key, "must not contain \".\" or \"..\" segments", "不能包含 \".\" 或 \"..\" 路径段");
    if (slash == std::string_view::npos) return {};
    start = slash + 1;
  }
}

Status validate_list_request(const std::string& prefix, int limit) {
  if (limit < 0) return errors::invalid("limit", "must not be negative", "不能为负数");
  if (prefix.empty()) return {};
  Status ok = validate_object_key(prefix + "x");
  if (ok.ok()) return {};
  Error e = ok.error();
  e.message = "invalid prefix \"" + prefix + "\": keys under it would be invalid (" + e.message + ")";
  e.message_zh = "无效的前缀 \"" + prefix + "\"（" + e.message_zh + "）";
  return e;
}

Result<std::unique_ptr<ObjectStore>> open_object_store(const std::string& url) {
  constexpr std::string_view kFile = "file://";
  if (url.starts_with(kFile)) {
    std::string path = url.substr(kFile.size());
    if (path.empty() || path.front() != '/') {
      return unsupported_url(url, "objects URL \"" + url + "\" needs an absolute directory: file:///path/to/dir",
                             "对象存储地址 \"" + url + "\" 需要绝对路径：file:///path/to/dir");
    }
    CP_ASSIGN(auto store, LocalObjectStore::open(path));
    return std::unique_ptr<ObjectStore>(std::move(store));
  }
  if (url.starts_with("s3://")) {
    CP_ASSIGN(S3Options options, parse_s3_url(url));
    CP_ASSIGN(options.credentials, s3_credentials_from_env());
    CP_ASSIGN(auto store, S3ObjectStore::open(std::move(options)));
    return std::unique_ptr<ObjectStore>(std::move(store));
  }
  return unsupported_url(url, "unsupported objects URL \"" + url + "\": use file:///path/to/dir or s3://bucket",
                         "不支持的对象存储地址 \"" + url + "\"：请使用 file:///path/to/dir 或 s3://bucket");
}

std::string log_chunk_key(const std::string& task_id, const std::string& attempt_id, int replica, std::int64_t offset) {
  // Zero-padded so that lexicographic order (the order list returns) is
  // byte-offset order. The offset comes from agents, so a negative one is
  // not a crash: it makes a distinct, valid key ("-000000000000005") that
  // callers should have refused.
  char padded[32];
  std::snprintf(padded, sizeof padded, "%016" PRId64, offset);
  return log_prefix(task_id, attempt_id) + "r" + std::to_string(replica) + "/" + padded;
}

std::string log_prefix(const std::string& task_id, const std::string& attempt_id) {
  return "logs/" + task_id + "/" + attempt_id + "/";
}

}  // namespace cp
