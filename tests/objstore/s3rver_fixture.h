// A real S3-compatible server for the tests: s3rver (npm, pinned in
// tools/s3rver/package.json) behind tools/s3rver/s3rver-sigv4.js, a front
// that checks each request's AWS Signature Version 4 as S3 does (s3rver
// alone accepts any V4 signature).
//
// Started as a child process on 127.0.0.1, port 0 (it prints the port it
// got), with a fresh data directory and the bucket "cp-test"; stopped and
// its directory removed when the S3rverProcess goes. One shared server
// serves the whole test binary (each store gets its own prefix); tests that
// stop a server start their own.
//
// Missing node or node_modules is a test failure naming
// scripts/install-npm-deps.sh, not a silent skip; CUBEPLANE_TEST_S3=off
// skips the S3 tests on purpose.
#pragma once

#include <sys/types.h>

#include <filesystem>
#include <memory>
#include <string>

#include "common/result.h"

namespace cp::testing_objstore {

inline constexpr const char* kS3rverBucket = "cp-test";
inline constexpr const char* kS3rverKey = "S3RVER";  // the only credentials s3rver knows
inline constexpr const char* kS3rverSecret = "S3RVER";

class S3rverProcess {
 public:
  // Starts the server and waits (with a deadline) until it answers.
  static Result<std::unique_ptr<S3rverProcess>> start();
  ~S3rverProcess();
  S3rverProcess(const S3rverProcess&) = delete;
  S3rverProcess& operator=(const S3rverProcess&) = delete;

  // Ends the process (closing its stdin, then SIGTERM, then SIGKILL) and removes its directory.
  void stop();

  int port() const { return port_; }
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Test hooks of the front: the next `times` signed requests with `method`
  // whose URL contains `match` are answered `status` (S3's InternalError or
  // SlowDown body); the log of signed requests, "METHOD URL" per line.
  void fail_next(const std::string& method, const std::string& match, int status, int times);
  std::string requests() const;

 private:
  S3rverProcess() = default;

  pid_t pid_ = -1;
  int stdin_fd_ = -1;  // closing it ends the server
  int port_ = 0;
  std::filesystem::path dir_;
};

// CUBEPLANE_TEST_S3=off
bool s3_tests_off();

// The server shared by this test binary, started at first use and stopped
// at exit; an error (with what to do) when it cannot start.
Result<S3rverProcess*> shared_s3rver();

}  // namespace cp::testing_objstore
