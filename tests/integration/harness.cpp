#include "harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace cpit {

std::string make_temp_dir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  char* p = mkdtemp(tmpl.data());
  return p ? std::string(p) : std::string();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

bool process_alive(pid_t pid) {
  if (pid <= 0) return false;
  if (kill(pid, 0) != 0) return false;
  // A zombie is dead for our purposes.
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  auto close = stat.rfind(')');
  return !(close != std::string::npos && close + 2 < stat.size() && stat[close + 2] == 'Z');
}

bool eventually(const std::function<bool()>& ready, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (ready()) return true;
    std::this_thread::sleep_for(every);
  }
  return ready();
}

Platform::Platform(std::string config, std::string data_dir)
    : config_(std::move(config)), data_dir_(std::move(data_dir)) {
  log_path_ = data_dir_ + "/up.log";
}

Platform::~Platform() { stop(); }

bool Platform::start() {
  url_.clear();
  std::string log = log_path_;
  const std::size_t before = read_file(log_path_).size();
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    setpgid(0, 0);
    execl(CUBEPLANE_BINARY, CUBEPLANE_BINARY, "up", "--config", config_.c_str(), "--data-dir", data_dir_.c_str(),
          "--listen", "127.0.0.1:0", "--log-level", "info", static_cast<char*>(nullptr));
    _exit(127);
  }
  return eventually(
      [&] {
        // Only what this start wrote: the log keeps earlier starts' lines.
        std::string text = read_file(log_path_).substr(std::min(before, read_file(log_path_).size()));
        auto pos = text.rfind("UI and API:  ");
        if (pos == std::string::npos) return false;
        auto end = text.find('\n', pos);
        std::string u = text.substr(pos + 13, end - pos - 13);
        if (!u.empty() && u.back() == '/') u.pop_back();
        url_ = u;
        return !url_.empty();
      },
      std::chrono::seconds(60));
}

void Platform::kill_hard() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

void Platform::stop() {
  if (pid_ > 0) {
    kill(pid_, SIGTERM);
    bool exited = eventually([&] { return waitpid(pid_, nullptr, WNOHANG) == pid_; }, std::chrono::seconds(20));
    if (!exited) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    pid_ = -1;
  }
}

std::string Platform::admin_token() const {
  std::string t = read_file(data_dir_ + "/admin-token");
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

std::string Platform::log() const { return read_file(log_path_); }

CommandResult Platform::cli(const std::vector<std::string>& args, const std::string& token,
                            const std::string& stdin_data) const {
  std::string dir = make_temp_dir("cpcli");
  std::string out_path = dir + "/out", err_path = dir + "/err", in_path = dir + "/in";
  write_file(in_path, stdin_data);
  pid_t pid = fork();
  if (pid == 0) {
    int in = open(in_path.c_str(), O_RDONLY);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    setenv("CUBEPLANE_SERVER", url_.c_str(), 1);
    setenv("CUBEPLANE_TOKEN", token.c_str(), 1);
    setenv("HOME", dir.c_str(), 1);  // no saved login leaks in
    unsetenv("CUBEPLANE_CONFIG");
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(CUBEPLANE_BINARY));
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(CUBEPLANE_BINARY, argv.data());
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CommandResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  std::remove(out_path.c_str());
  std::remove(err_path.c_str());
  std::remove(in_path.c_str());
  rmdir(dir.c_str());
  return r;
}

boost::json::value Platform::cli_json(const std::vector<std::string>& args, const std::string& token) const {
  auto a = args;
  a.push_back("-o");
  a.push_back("json");
  auto r = cli(a, token);
  if (r.exit_code != 0) return nullptr;
  boost::system::error_code ec;
  auto v = boost::json::parse(r.out, ec);
  if (ec) return nullptr;
  return v;
}

}  // namespace cpit
