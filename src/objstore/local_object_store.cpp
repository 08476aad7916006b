#include "objstore/local_object_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

namespace cp {
namespace fs = std::filesystem;
namespace {

// Temporary files of put() live beside their key under this name prefix.
// Keys may not use it, and list() skips it.
constexpr std::string_view kTempPrefix = ".cp-tmp-";

Error os_error(const std::string& what, const fs::path& path, int err) {
  std::string detail = what + " " + path.string() + ": " + std::strerror(err);
  return errors::internal("object store: " + detail);
}

Error key_conflict(const std::string& key) {
  return Error{"object_key_conflict", 409,
               "object key \"" + key + "\" collides with another key: in a local object store a key cannot be both "
                                        "an object and a prefix of other keys (\"a\" and \"a/b\")",
               "对象键 \"" + key + "\" 与其他键冲突：本地对象存储中一个键不能既是对象又是其他键的前缀（\"a\" 与 \"a/b\"）",
               {}};
}

Status check_local_key(const std::string& key) {
  CP_TRY(validate_object_key(key));
  if (key.starts_with(kTempPrefix) || key.find("/" + std::string(kTempPrefix)) != std::string::npos) {
    return Error{"invalid_object_key", 400,
                 "invalid object key \"" + key + "\": names starting with \".cp-tmp-\" are reserved",
                 "无效的对象键 \"" + key + "\"：以 \".cp-tmp-\" 开头的名称为保留名称", {}};
  }
  return {};
}

std::int64_t mtime_ms(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1000 + st.st_mtim.tv_nsec / 1'000'000;
}

// A name no other writer uses: the pid tells processes apart, the counter
// threads and calls. O_EXCL catches the rest (a pid reused after a crash).
std::string temp_name(const std::string& final_name) {
  static std::atomic<std::uint64_t> counter{0};
  return std::string(kTempPrefix) + final_name + "." + std::to_string(::getpid()) + "." +
         std::to_string(counter.fetch_add(1));
}

Status write_all(int fd, std::string_view data, const fs::path& path) {
  while (!data.empty()) {
    ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return os_error("write", path, errno);
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return {};
}

// Makes the rename itself durable; without it a crash may forget it.
void sync_directory(const fs::path& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);  // best effort: some file systems refuse fsync on directories
  ::close(fd);
}

// list() walks the tree in key order. Comparing the name of a directory with
// its "/" appended makes sorted directory entries come out in the byte order
// of the full keys: "a-c" < "a/b" because '-' < '/', although "a" < "a-c".
struct Entry {
  std::string sort_name;  // name, plus "/" for a directory
  bool is_dir = false;
};

struct ListQuery {
  const std::string& prefix;
  const std::string& start_after;
  std::size_t limit;
  std::vector<ObjectInfo>& out;
};

Status walk(const fs::path& dir, const std::string& dir_key, ListQuery& q) {
  std::vector<Entry> entries;
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    // Removed meanwhile, or the prefix names no directory: nothing to list.
    if (ec == std::errc::no_such_file_or_directory || ec == std::errc::not_a_directory) return {};
    return os_error("list", dir, ec.value());
  }
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    if (name.starts_with(kTempPrefix)) continue;
    std::error_code sec;
    auto st = it->symlink_status(sec);
    if (sec) continue;  // removed meanwhile
    // Symbolic links are never made by the store; following one could lead
    // out of the root.
    if (fs::is_directory(st)) {
      entries.push_back({name + "/", true});
    } else if (fs::is_regular_file(st)) {
      entries.push_back({name, false});
    }
  }
  if (ec) return os_error("list", dir, ec.value());
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.sort_name < b.sort_name; });

  for (const Entry& e : entries) {
    if (q.out.size() >= q.limit) return {};
    std::string key = dir_key + e.sort_name;
    if (e.is_dir) {
      // Descend only where keys can both match the prefix and come after
      // start_after. Every key below ends up longer than `key`, so the
      // subtree is behind start_after when start_after is past `key` without
      // running into it.
      bool matches = key.starts_with(q.prefix) || q.prefix.starts_with(key);
      bool behind = q.start_after > key && !q.start_after.starts_with(key);
      if (matches && !behind) CP_TRY(walk(dir / e.sort_name.substr(0, e.sort_name.size() - 1), key, q));
      continue;
    }
    if (!key.starts_with(q.prefix) || key <= q.start_after) continue;
    struct stat st {};
    if (::stat((dir / e.sort_name).c_str(), &st) != 0) continue;  // removed meanwhile
    q.out.push_back(ObjectInfo{key, static_cast<std::int64_t>(st.st_size), mtime_ms(st), ""});
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<LocalObjectStore>> LocalObjectStore::open(const fs::path& root) {
  if (!root.is_absolute()) {
    return errors::invalid("objects", "local object store needs an absolute directory, got \"" + root.string() + "\"",
                           "本地对象存储需要绝对路径，实际为 \"" + root.string() + "\"");
  }
  fs::path dir = root.lexically_normal();
  if (!dir.has_filename() && dir.has_relative_path()) dir = dir.parent_path();  // drop a trailing '/'
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir, ec)) {
    return errors::unavailable("cannot use \"" + dir.string() + "\" as the object store directory" +
                                   (ec ? ": " + ec.message() : ": not a directory"),
                               "无法使用 \"" + dir.string() + "\" 作为对象存储目录");
  }
  return std::unique_ptr<LocalObjectStore>(new LocalObjectStore(std::move(dir)));
}

std::string LocalObjectStore::url() const { return "file://" + root_.string(); }

Result<std::string> LocalObjectStore::read_url(const std::string& key, std::int64_t /*ttl_s*/) {
  CP_TRY(validate_object_key(key));
  return "file://" + (root_ / key).string();
}

// Writers never lock each other out; remove() prunes directories that became
// empty, and a put() into the same directory can lose that race:
//
//   put(a/b/x)                      remove(a/b/y)
//   create_directories(a/b)
//                                   unlink(a/b/y); rmdir(a/b) -> ok, it is empty
//   open(a/b/.cp-tmp-x...) -> ENOENT
//
// So put() retries from create_directories when the directory went away.
// Once the temporary file exists the directory is not empty, rmdir fails, and
// the rename cannot lose its directory any more.
Result<ObjectInfo> LocalObjectStore::put(const std::string& key, std::string_view data) {
  CP_TRY(check_local_key(key));
  const fs::path path = root_ / key;
  const fs::path dir = path.parent_path();
  const std::string name = path.filename().string();

  fs::path temp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec == std::errc::not_a_directory || ec == std::errc::file_exists) return key_conflict(key);
    if (ec == std::errc::no_such_file_or_directory && attempt < 10) continue;  // a parent pruned midway
    if (ec) return os_error("create directory", dir, ec.value());
    temp = dir / temp_name(name);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 && ((errno != ENOENT && errno != EEXIST) || attempt >= 10)) return os_error("create", temp, errno);
  }

  Status written = write_all(fd, data, temp);
  if (written.ok() && ::fsync(fd) != 0) written = os_error("fsync", temp, errno);
  if (::close(fd) != 0 && written.ok()) written = os_error("close", temp, errno);
  if (!written.ok()) {
    ::unlink(temp.c_str());
    return written.error();
  }
  if (::rename(temp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    // The key is a directory: other keys live below it.
    if (err == EISDIR || err == ENOTEMPTY || err == EEXIST) return key_conflict(key);
    return os_error("rename", path, err);
  }
  sync_directory(dir);

  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    // Replaced or removed by another writer in between: report what we wrote.
    return ObjectInfo{key, static_cast<std::int64_t>(data.size()), 0, ""};
  }
  return ObjectInfo{key, static_cast<std::int64_t>(st.st_size), mtime_ms(st), ""};
}

Result<std::optional<std::string>> LocalObjectStore::get(const std::string& key) {
  CP_TRY(check_local_key(key));
  const fs::path path = root_ / key;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT || errno == ENOTDIR) return std::optional<std::string>();
    return os_error("open", path, errno);
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int err = errno;
    ::close(fd);
    return os_error("stat", path, err);
  }
  if (!S_ISREG(st.st_mode)) {  // a directory is a prefix, not an object
    ::close(fd);
    return std::optional<std::string>();
  }
  // The open descriptor keeps reading the file it opened even if put()
  // renames a new one over the name meanwhile: one version, whole.
  std::string data;
  data.reserve(static_cast<std::size_t>(st.st_size));
  char buf[64 * 1024];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return os_error("read", path, err);
    }
    if (n == 0) break;
    data.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return std::optional<std::string>(std::move(data));
}

Result<std::vector<ObjectInfo>> LocalObjectStore::list(const std::string& prefix, const std::string& start_after,
                                                       int limit) {
  CP_TRY(validate_list_request(prefix, limit));
  std::vector<ObjectInfo> out;
  if (limit == 0) return out;
  // Start at the deepest directory the prefix names entirely.
  std::size_t slash = prefix.rfind('/');
  std::string dir_key = slash == std::string::npos ? "" : prefix.substr(0, slash + 1);
  ListQuery q{prefix, start_after, static_cast<std::size_t>(limit), out};
  CP_TRY(walk(dir_key.empty() ? root_ : root_ / dir_key, dir_key, q));
  return out;
}

Status LocalObjectStore::remove(const std::string& key) {
  CP_TRY(check_local_key(key));
  const fs::path path = root_ / key;
  if (::unlink(path.c_str()) != 0) {
    // Missing, or a directory (a prefix of other keys, not an object).
    if (errno == ENOENT || errno == ENOTDIR || errno == EISDIR || errno == EPERM) return {};
    return os_error("remove", path, errno);
  }
  // Prune directories left empty so that the tree does not grow without
  // bound; rmdir refuses any that is not empty, which is the check.
  for (fs::path dir = path.parent_path(); dir != root_ && dir.has_relative_path(); dir = dir.parent_path()) {
    if (::rmdir(dir.c_str()) != 0) break;
  }
  return {};
}

}  // namespace cp
