// Runs the real `cubeplane` binary: `up` in the background, and client verbs
// as separate processes, the way a user's shell would.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <boost/json.hpp>

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

class Platform {
 public:
  // Starts `cubeplane up --config <config> --data-dir <dir> --listen 127.0.0.1:0`.
  Platform(std::string config, std::string data_dir);
  ~Platform();
  bool start();         // waits for the URL line; false on timeout
  void kill_hard();     // SIGKILL
  void stop();          // SIGTERM and wait
  pid_t pid() const { return pid_; }
  const std::string& url() const { return url_; }
  std::string admin_token() const;
  std::string log() const;

  // Runs a client verb against this platform with the given token.
  CommandResult cli(const std::vector<std::string>& args, const std::string& token,
                    const std::string& stdin_data = "") const;
  // The same, parsing stdout as JSON (adds -o json); null on failure.
  boost::json::value cli_json(const std::vector<std::string>& args, const std::string& token) const;

 private:
  std::string config_;
  std::string data_dir_;
  std::string log_path_;
  pid_t pid_ = -1;
  std::string url_;
};

}  // namespace cpit
