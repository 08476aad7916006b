#include "cli/cli.h"

#include <exception>

#include "cli/commands.h"

namespace cp::cli {

void register_client_commands(CLI::App& app, ClientContext& ctx) {
  // Subcommands inherit fallthrough when they are created, so it is set
  // first: `cubeplane tasks ls -o json` hands -o back to this app.
  app.fallthrough();
  app.require_subcommand(1);
  app.add_option("--server", ctx.server,
                 "Cubeplane server URL, or several separated by commas, tried in order (else $CUBEPLANE_SERVER, "
                 "the saved login, http://127.0.0.1:8080)");
  app.add_option("--token", ctx.token, "API token (else $CUBEPLANE_TOKEN, the saved login)");
  app.add_option("-o,--output", ctx.output, "Output format: table (default), json or yaml")
      ->check(CLI::IsMember({"table", "json", "yaml"}));
  app.add_option("--lang", ctx.lang, "Language of messages: en or zh (else from LC_ALL/LC_MESSAGES/LANG)")
      ->check(CLI::IsMember({"en", "zh", "zh-CN", "zh_CN"}));

  register_login_command(app, ctx);
  register_task_commands(app, ctx);
  register_cluster_commands(app, ctx);
  register_group_commands(app, ctx);
  register_account_commands(app, ctx);
  register_report_commands(app, ctx);
  register_approval_commands(app, ctx);
}

int exit_code_for_parse_error(const CLI::App& app, const CLI::ParseError& e, ClientContext& ctx) {
  int rc = app.exit(e, *ctx.out, *ctx.err);
  return rc == 0 ? kExitOk : kExitUsage;
}

int run_action(ClientContext& ctx) {
  if (!ctx.action) return kExitOk;
  try {
    return ctx.action();
  } catch (const std::exception& e) {
    *ctx.err << "error: " << e.what() << "\n";
    return kExitRefused;
  }
}

int run_cli(ClientContext& ctx, const std::vector<std::string>& args, const AddCommands& add_more) {
  CLI::App app{"Cubeplane: compute governance for AI teams", "cubeplane"};
  register_client_commands(app, ctx);
  if (add_more) add_more(app, ctx);
  std::vector<const char*> argv{"cubeplane"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return exit_code_for_parse_error(app, e, ctx);
  }
  return run_action(ctx);
}

int run_cli(int argc, const char* const* argv, const AddCommands& add_more) {
  ClientContext ctx;
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return run_cli(ctx, args, add_more);
}

}  // namespace cp::cli
