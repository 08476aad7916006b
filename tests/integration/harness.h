// Runs the real `cubeplane` binary: `up` in the background, and client verbs
// as separate processes, the way a user's shell would.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <boost/json.hpp>

#include "common/http_client.h"

namespace cpit {

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string make_temp_dir(const std::string& prefix);
std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);
bool process_alive(pid_t pid);

// Polls `ready` until it returns true or `timeout` passes.
bool eventually(const std::function<bool()>& ready, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every = std::chrono::milliseconds(50));

// A long-running `cubeplane` subcommand (`up`, `server`, `agent`) in a
// process group of its own, stdout and stderr appended to one log file that
// keeps every run's output. Signals go to the process itself, not its group.
class Process {
 public:
  Process(std::vector<std::string> args, std::string log_path);
  ~Process();  // stop()
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  void start();      // fork + exec; a start while running is refused (no-op)
  void kill_hard();  // SIGKILL, reaped
  void stop();       // SIGTERM, SIGKILL after 20 s, reaped
  bool running();    // reaps it once it has ended
  pid_t pid() const { return pid_; }
  std::string log() const;     // every run's output
  std::string output() const;  // this run's output only
  // Waits until this run's output holds `prefix`; returns the rest of that
  // line, or nullopt when the process ended or `timeout` passed first.
  std::optional<std::string> wait_for_line(const std::string& prefix, std::chrono::milliseconds timeout);

 private:
  std::vector<std::string> args_;
  std::string log_path_;
  std::size_t log_offset_ = 0;  // where this run's output starts
  pid_t pid_ = -1;
};

// A TCP port on 127.0.0.1 that is free now and outside the kernel's
// ephemeral range, so no client connection takes it while a server that
// listens on it is restarted. 0 if none was found.
int free_port();

// A TCP proxy on 127.0.0.1 (port 0) to `target_port`, on a thread of its
// own. cut(): it stops forwarding, both ways, on every connection, old and
// new (they stay open: the far side sees silence, not a reset), as a
// network partition does; restore() forwards again.
class TcpProxy {
 public:
  explicit TcpProxy(int target_port);
  ~TcpProxy();
  TcpProxy(const TcpProxy&) = delete;
  TcpProxy& operator=(const TcpProxy&) = delete;
  int port() const { return port_; }
  void cut();
  void restore();

 private:
  void run();
  int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

class Platform {
 public:
  // Starts `cubeplane up --config <config> --data-dir <dir> --listen 127.0.0.1:0`.
  Platform(std::string config, std::string data_dir);
  ~Platform();
  bool start();         // waits for the URL line; false on timeout
  void kill_hard();     // SIGKILL
  void stop();          // SIGTERM and wait
  pid_t pid() const { return process_.pid(); }
  const std::string& url() const { return url_; }
  std::string admin_token() const;
  std::string log() const;

  // Runs a client verb against this platform with the given token.
  CommandResult cli(const std::vector<std::string>& args, const std::string& token,
                    const std::string& stdin_data = "") const;
  // The same, parsing stdout as JSON (adds -o json); null on failure.
  boost::json::value cli_json(const std::vector<std::string>& args, const std::string& token) const;

 private:
  std::string data_dir_;
  Process process_;
  std::string url_;
};

// Marks that the tasks of integration tests write themselves, one line
// each: kind (start | tick | end), attempt id, pid, date +%s%N. "Ran once"
// and "never overlapped" are measured on them, not assumed.
struct Mark {
  std::string kind;
  std::string attempt;
  pid_t pid = 0;
  std::int64_t ns = 0;
};
std::vector<Mark> read_marks(const std::string& path);
// A shell script that appends a start mark, a tick every 0.2 s ($TICKS of
// them), and an end mark to `marks_path`.
std::string marking_script(const std::string& marks_path);
// First and last mark of each attempt whose id starts with `task_id + "."`,
// in order of their first marks.
std::vector<std::pair<std::int64_t, std::int64_t>> attempt_spans(const std::vector<Mark>& marks,
                                                                 const std::string& task_id);

// The REST API of a running server, one fresh connection per call.
struct Api {
  std::string url;
  std::string token;
  long timeout_ms = 10000;

  cp::Result<cp::HttpResponse> call(const std::string& method, const std::string& path,
                                    const std::string& body = "",
                                    const std::map<std::string, std::string>& headers = {}) const;
  // 2xx with a JSON body, else null.
  boost::json::value get(const std::string& path) const;
};

// A PostgreSQL instance of a test's own (scripts/postgres-test-server.sh),
// beside `dir` (PostgreSQL runs as its own user), stopped at destruction.
// start(): its URL, or "" with `why` (a test then fails under CI=true and
// skips elsewhere).
class OwnPostgres {
 public:
  explicit OwnPostgres(const std::string& dir) : dir_(dir) {}
  ~OwnPostgres();
  OwnPostgres(const OwnPostgres&) = delete;
  OwnPostgres& operator=(const OwnPostgres&) = delete;
  std::string start(std::string& why);
  bool pause();   // SIGSTOP: connections hang, as on a frozen database host
  bool resume();

 private:
  std::string script() const;
  std::string dir_;
  std::string pg_dir_;
};

// Starts `pg` unless CUBEPLANE_TEST_POSTGRES=off; its URL. "" with `why`:
// `skip` true when the test should skip (off, or no PostgreSQL outside
// CI), false when it must fail (CI=true).
std::string start_test_postgres(OwnPostgres& pg, bool& skip, std::string& why);

// SIGKILL to what a failed assertion left running: the process groups of
// the tasks that wrote marks to `marks`.
void kill_marking_tasks(const std::string& marks);

}  // namespace cpit
