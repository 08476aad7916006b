#include "agent/executors/file_logs.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace cp::file_logs {

std::int64_t file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<std::int64_t>(st.st_size);
}

std::string read_at(const std::string& path, std::int64_t offset, std::size_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  std::string data(max_bytes, '\0');
  ssize_t got = ::pread(fd, data.data(), max_bytes, static_cast<off_t>(offset));
  ::close(fd);
  data.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
  return data;
}

}  // namespace cp::file_logs
