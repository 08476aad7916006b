#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <random>
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

std::vector<Mark> read_marks(const std::string& path) {
  std::vector<Mark> out;
  std::istringstream lines(read_file(path));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    Mark m;
    if (f >> m.kind >> m.attempt >> m.pid >> m.ns) out.push_back(m);
  }
  return out;
}

std::string marking_script(const std::string& marks_path) {
  const std::string mark = "\"$CUBEPLANE_ATTEMPT_ID $$ $(date +%s%N)\" >> " + marks_path;
  return "echo start " + mark + "; i=0; while [ $i -lt $TICKS ]; do echo tick " + mark +
         "; sleep 0.2; i=$((i+1)); done; echo end " + mark;
}

std::vector<std::pair<std::int64_t, std::int64_t>> attempt_spans(const std::vector<Mark>& marks,
                                                                 const std::string& task_id) {
  std::map<std::string, std::pair<std::int64_t, std::int64_t>> span;
  for (const auto& m : marks) {
    if (!m.attempt.starts_with(task_id + ".")) continue;
    auto [it, fresh] = span.emplace(m.attempt, std::make_pair(m.ns, m.ns));
    if (!fresh) {
      it->second.first = std::min(it->second.first, m.ns);
      it->second.second = std::max(it->second.second, m.ns);
    }
  }
  std::vector<std::pair<std::int64_t, std::int64_t>> out;
  for (const auto& [attempt, s] : span) out.push_back(s);
  std::sort(out.begin(), out.end());
  return out;
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

Process::Process(std::vector<std::string> args, std::string log_path)
    : args_(std::move(args)), log_path_(std::move(log_path)) {}

Process::~Process() { stop(); }

void Process::start() {
  if (running()) return;
  log_offset_ = read_file(log_path_).size();
  // Everything the child needs is built before fork().
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(CUBEPLANE_BINARY));
  for (const auto& a : args_) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const char* log = log_path_.c_str();
  pid_ = fork();
  if (pid_ == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    setpgid(0, 0);
    execv(CUBEPLANE_BINARY, argv.data());
    _exit(127);
  }
}

bool Process::running() {
  if (pid_ <= 0) return false;
  if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
    pid_ = -1;
    return false;
  }
  return true;
}

void Process::kill_hard() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }
}

void Process::stop() {
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

std::string Process::log() const { return read_file(log_path_); }

std::string Process::output() const {
  std::string text = read_file(log_path_);
  return text.substr(std::min(log_offset_, text.size()));
}

std::optional<std::string> Process::wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout) {
  std::optional<std::string> found;
  eventually(
      [&] {
        std::string text = output();
        auto pos = text.rfind(prefix);
        auto end = pos == std::string::npos ? pos : text.find('\n', pos);
        if (end != std::string::npos) {
          found = text.substr(pos + prefix.size(), end - pos - prefix.size());
          return true;
        }
        return !running();
      },
      timeout, std::chrono::milliseconds(10));
  return found;
}

int free_port() {
  int low = 32768;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  range >> low;
  if (low <= 2048) return 0;
  std::random_device rd;
  std::uniform_int_distribution<int> pick(1024, low - 1);
  for (int i = 0; i < 100; ++i) {
    int port = pick(rd);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    close(fd);
    if (ok) return port;
  }
  return 0;
}

TcpProxy::TcpProxy(int target_port) : target_port_(target_port) {
  listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listen_fd_ < 0 || bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      listen(listen_fd_, 64) != 0 || getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) {
    return;
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

TcpProxy::~TcpProxy() {
  stop_ = true;
  if (wake_[1] >= 0) (void)!write(wake_[1], "x", 1);
  if (thread_.joinable()) thread_.join();
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) close(fd);
  }
}

void TcpProxy::cut() {
  cut_ = true;
  (void)!write(wake_[1], "x", 1);
}

void TcpProxy::restore() {
  cut_ = false;
  (void)!write(wake_[1], "x", 1);
}

void TcpProxy::run() {
  std::map<int, int> peer;  // fd -> the fd it forwards to, both directions
  auto drop = [&](int fd) {
    auto it = peer.find(fd);
    if (it == peer.end()) return;
    const int other = it->second;
    close(fd);
    close(other);
    peer.erase(fd);
    peer.erase(other);
  };
  while (!stop_) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}};
    const bool forwarding = !cut_;
    if (forwarding) {
      fds.push_back({listen_fd_, POLLIN, 0});
      for (const auto& [fd, other] : peer) fds.push_back({fd, POLLIN, 0});
    }
    if (poll(fds.data(), fds.size(), 200) <= 0) continue;
    if (fds[0].revents) {
      char buf[64];
      while (read(wake_[0], buf, sizeof buf) > 0) {
      }
    }
    if (!forwarding || cut_) continue;
    if (fds[1].revents & POLLIN) {
      int in = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (in >= 0) {
        int out = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        addr.sin_port = htons(static_cast<std::uint16_t>(target_port_));
        if (out >= 0 && connect(out, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
          peer[in] = out;
          peer[out] = in;
        } else {
          close(in);
          if (out >= 0) close(out);
        }
      }
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents || !peer.count(fds[i].fd)) continue;
      char buf[65536];
      const ssize_t n = read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        drop(fds[i].fd);
        continue;
      }
      // Blocking writes: the far side is a test's server or agent, both quick readers.
      const int to = peer[fds[i].fd];
      for (ssize_t off = 0; off < n;) {
        const ssize_t w = write(to, buf + off, static_cast<std::size_t>(n - off));
        if (w <= 0) break;
        off += w;
      }
    }
  }
  for (const auto& [fd, other] : peer) close(fd);
}

Platform::Platform(std::string config, std::string data_dir)
    : data_dir_(std::move(data_dir)),
      process_({"up", "--config", std::move(config), "--data-dir", data_dir_, "--listen", "127.0.0.1:0",
                "--log-level", "info"},
               data_dir_ + "/up.log") {}

Platform::~Platform() { stop(); }

bool Platform::start() {
  url_.clear();
  process_.start();
  auto u = process_.wait_for_line("UI and API:  ", std::chrono::seconds(60));
  if (!u) return false;
  url_ = *u;
  if (!url_.empty() && url_.back() == '/') url_.pop_back();
  return !url_.empty();
}

void Platform::kill_hard() { process_.kill_hard(); }

void Platform::stop() { process_.stop(); }

std::string Platform::admin_token() const {
  std::string t = read_file(data_dir_ + "/admin-token");
  while (!t.empty() && (t.back() == '\n' || t.back() == ' ')) t.pop_back();
  return t;
}

std::string Platform::log() const { return process_.log(); }

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

cp::Result<cp::HttpResponse> Api::call(const std::string& method, const std::string& path, const std::string& body,
                                       const std::map<std::string, std::string>& headers) const {
  cp::HttpClient client;
  cp::HttpRequestOptions o;
  o.headers = headers;
  if (!token.empty()) o.headers["Authorization"] = "Bearer " + token;
  o.timeout_ms = timeout_ms;
  return client.request(method, url + path, body, "application/json", o);
}

boost::json::value Api::get(const std::string& path) const {
  auto r = call("GET", path);
  if (!r.ok() || r->status / 100 != 2) return nullptr;
  boost::system::error_code ec;
  auto v = boost::json::parse(r->body, ec);
  return ec ? boost::json::value(nullptr) : v;
}

std::string OwnPostgres::script() const {
  return std::string(CUBEPLANE_SOURCE_DIR) + "/scripts/postgres-test-server.sh";
}

std::string OwnPostgres::start(std::string& why) {
  pg_dir_ = make_temp_dir("cp-own-pg");
  const std::string url_file = dir_ + "/pg-url", log = dir_ + "/pg-start.log";
  if (pg_dir_.empty() ||
      std::system((script() + " start " + pg_dir_ + " >" + url_file + " 2>" + log).c_str()) != 0) {
    why = "no PostgreSQL server to start: " + read_file(log);
    return "";
  }
  std::string url = read_file(url_file);
  while (!url.empty() && (url.back() == '\n' || url.back() == ' ')) url.pop_back();
  return url;
}

bool OwnPostgres::pause() { return std::system((script() + " pause " + pg_dir_).c_str()) == 0; }
bool OwnPostgres::resume() { return std::system((script() + " resume " + pg_dir_).c_str()) == 0; }

std::string start_test_postgres(OwnPostgres& pg, bool& skip, std::string& why) {
  skip = false;
  const char* off = std::getenv("CUBEPLANE_TEST_POSTGRES");
  if (off != nullptr && std::string(off) == "off") {
    skip = true;
    why = "CUBEPLANE_TEST_POSTGRES=off";
    return "";
  }
  std::string url = pg.start(why);
  if (url.empty()) {
    const char* ci = std::getenv("CI");
    skip = !(ci && std::string(ci) == "true");
    if (!skip) why = "CI=true but " + why;
  }
  return url;
}

void kill_marking_tasks(const std::string& marks) {
  for (const auto& m : read_marks(marks)) {
    if (process_alive(m.pid) &&
        read_file("/proc/" + std::to_string(m.pid) + "/cmdline").find(marks) != std::string::npos) {
      kill(-m.pid, SIGKILL);
    }
  }
}

OwnPostgres::~OwnPostgres() {
  if (!pg_dir_.empty()) (void)std::system((script() + " stop " + pg_dir_ + " >/dev/null 2>&1").c_str());
}

}  // namespace cpit
