// cubeplane-shim: the local executor's supervisor shim as a program of its
// own (src/agent/executors/shim.h). The agent starts it with posix_spawn,
// its report pipe on fd 3 and its gate on fd 4, and then writes the spec of
// the command into the gate. Not meant to be run by hand.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <string>
#include <string_view>

#include "agent/executors/shim.h"

int main(int argc, char** argv) {
  (void)argv;
  if (argc != 1 || ::isatty(cp::shim::kGateFd) || ::fcntl(cp::shim::kGateFd, F_GETFD) < 0) {
    std::fputs(
        "cubeplane-shim is started by the Cubeplane agent (local executor), not by hand\n"
        "cubeplane-shim 由 Cubeplane agent（本地执行器）启动，不应手动运行\n",
        stderr);
    return 2;
  }
  ::close_range(cp::shim::kGateFd + 1, ~0u, 0);  // nothing of the agent's but the two pipes
  cp::shim::enter_shim();
  // The gate: nothing runs until the agent has journaled this shim and sent
  // the spec. EOF before all of it means the agent died first: never
  // started, nothing to record.
  std::string bytes;
  char buf[16384];
  std::size_t want = 0;
  while (want == 0 || bytes.size() < want) {
    ssize_t n = ::read(cp::shim::kGateFd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) ::_exit(0);
    bytes.append(buf, static_cast<std::size_t>(n));
    if (want == 0) want = cp::shim::spec_size(bytes);
  }
  ::close(cp::shim::kGateFd);
  cp::shim::ShimPlan plan;
  if (!cp::shim::decode_spec(bytes, plan.spec)) {
    std::fputs("cubeplane-shim: the agent sent a malformed spec; nothing was run\n", stderr);
    ::_exit(0);
  }
  cp::shim::prepare(plan);
  cp::shim::supervise(plan, cp::shim::kReportFd);
}
