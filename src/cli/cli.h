// The client verbs of the `cubeplane` binary (API.md "Command line"), on one
// CLI11 App that main.cpp owns together with the server/agent/up verbs.
//
//   argv ──CLI11 parse──> global flags into ClientContext
//                         the chosen verb's callback sets ctx.action
//        ──run_action───> action(): ApiClient calls, prints, returns the exit code
//
// Exit codes (API.md): 0 success, 1 a refused request (the server's message
// printed to stderr) or an unreachable server, 2 a usage error.
#pragma once

#include <CLI/CLI.hpp>

#include <chrono>
#include <functional>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "cli/config.h"
#include "cli/version.h"
#include "common/clock.h"

namespace cp::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitRefused = 1;
inline constexpr int kExitUsage = 2;


struct ClientContext {
  // Global flags. Empty = not given; see config.h for what fills them then.
  std::string server;            // --server
  std::string token;             // --token
  std::string output = "table";  // -o/--output table|json|yaml
  std::string lang;              // --lang en|zh

  // Set by the callback of the verb that was parsed; run_action runs it once
  // parsing has finished, so every flag (even one after the verb) is in.
  // main.cpp's own verbs may set it too.
  std::function<int()> action;

  // Where verbs write, read and look things up; tests replace these.
  std::ostream* out = &std::cout;
  std::ostream* err = &std::cerr;
  std::istream* in = &std::cin;
  EnvLookup env = process_env();
  const Clock* clock = &SystemClock::instance();
  // Waits between the attempts of a retried request (submit).
  std::function<void(Millis)> sleep = [](Millis ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
};

// Adds the global flags (--server, --token, -o, --lang; they may also follow
// the verb) and every client verb to `app`. `ctx` must outlive `app`'s use.
void register_client_commands(CLI::App& app, ClientContext& ctx);

// For a CLI::ParseError from app.parse: prints help or the usage error
// (to ctx.out / ctx.err) and returns 0 for --help, else 2.
int exit_code_for_parse_error(const CLI::App& app, const CLI::ParseError& e, ClientContext& ctx);

// Runs ctx.action (0 when no verb set one); an escaped exception is reported
// and exits 1.
int run_action(ClientContext& ctx);

// The whole flow for main():
//   int main(int argc, char** argv) {
//     return cp::cli::run_cli(argc, argv, [](CLI::App& app, cp::cli::ClientContext& ctx) {
//       /* add server, agent, up; their callbacks set ctx.action */
//     });
//   }
using AddCommands = std::function<void(CLI::App&, ClientContext&)>;
int run_cli(int argc, const char* const* argv, const AddCommands& add_more = {});
// The same with a given context and arguments (without the program name).
int run_cli(ClientContext& ctx, const std::vector<std::string>& args, const AddCommands& add_more = {});

}  // namespace cp::cli
