#include "agent/files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cp::agent_files {
namespace {
// All of `data` to fd; 0, or the errno of the write that failed.
int write_all(int fd, std::string_view data) {
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<std::size_t>(n);
  }
  return 0;
}
}  // namespace

Status write_atomic(const std::string& path, std::string_view data, mode_t mode, Durability durable) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
  if (fd < 0) return errors::internal("cannot write " + tmp + ": " + std::strerror(errno));
  if (int err = write_all(fd, data); err != 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    return errors::internal("cannot write " + tmp + ": " + std::strerror(err));
  }
  ::fchmod(fd, mode);  // O_CREAT's mode is filtered by the umask; the credential must stay 0600 whatever it is
  if (durable == Durability::machine_crash) ::fsync(fd);
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    return errors::internal("cannot rename " + tmp + " to " + path + ": " + std::strerror(err));
  }
  return ok_status();
}

Status append_record(const std::string& path, std::string_view record, mode_t mode, std::size_t compact_bytes) {
  if (record.find('\n') != std::string_view::npos) return errors::internal("a record for " + path + " holds a newline");
  std::string line;
  line.reserve(record.size() + 2);
  line += '\n';
  line += record;
  line += '\n';
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, mode);
  if (fd < 0) return errors::internal("cannot write " + path + ": " + std::strerror(errno));
  if (int err = write_all(fd, line); err != 0) {
    ::close(fd);
    return errors::internal("cannot write " + path + ": " + std::strerror(err));
  }
  struct stat st {};
  const bool big = ::fstat(fd, &st) == 0 && static_cast<std::size_t>(st.st_size) > compact_bytes;
  ::close(fd);
  if (big) return write_atomic(path, line, mode, Durability::process_crash);
  return ok_status();
}

std::vector<std::string> read_records(const std::string& path) {
  std::vector<std::string> out;
  auto text = read_all(path);
  if (!text) return out;
  std::string_view rest(*text);
  while (!rest.empty()) {
    auto nl = rest.rfind('\n');
    std::string_view line = nl == std::string_view::npos ? rest : rest.substr(nl + 1);
    if (!line.empty()) out.emplace_back(line);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(0, nl);
  }
  return out;
}

std::optional<std::string> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return std::nullopt;
  return std::move(ss).str();
}

Status make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) return errors::internal("cannot create directory " + path + ": " + ec.message());
  return ok_status();
}

}  // namespace cp::agent_files
