// What the verb files (commands_*.cpp) share: connecting, printing a result
// in the chosen output format, and reporting errors with the right exit code.
// Internal to src/cli.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <memory>
#include <string>

#include "cli/api_client.h"
#include "cli/cli.h"

namespace cp::cli {

// The verb's body runs after parsing: `sub`'s callback stores it in ctx.action.
void on_run(CLI::App* sub, ClientContext& ctx, std::function<int()> body);

// Server, token (flags > env > saved config) and Accept-Language.
Result<ApiClientOptions> connection_options(const ClientContext& ctx);
// The options for a resolved connection: its server list checked (a
// malformed one is a usage error), each move to the next server said on
// ctx.err, the language.
Result<ApiClientOptions> client_options(const ClientContext& ctx, const Connection& c);
// An ApiClient for the verb, or the reason there is none (a broken config file).
Result<std::unique_ptr<ApiClient>> connect(const ClientContext& ctx);

std::string language(const ClientContext& ctx);
// The sentence in the user's language.
const char* tr(const ClientContext& ctx, const char* en, const char* zh);

// The code of an Error that is the user's own mistake found before any
// request (a malformed --server list): fail() exits 2 for it.
inline constexpr std::string_view kUsageErrorCode = "usage_error";

// Prints "error: <message>" to ctx.err; returns 1 (2 for kUsageErrorCode).
int fail(const ClientContext& ctx, const Error& e);
// Prints "error: <message>" to ctx.err; returns 2.
int usage_error(const ClientContext& ctx, const std::string& en, const std::string& zh);

// -o json: the value pretty-printed; -o yaml: as YAML; table: `table(v)`.
int print(const ClientContext& ctx, const json::value& v, const std::function<std::string(const json::value&)>& table);

// GET a list: one page, or with `all` every page (then printed as
// {"items": [...], "next_cursor": ""}). In table mode a further page is
// mentioned on stderr.
int print_list(ClientContext& ctx, const std::string& path, Query query, bool all,
               const std::function<std::string(const json::array&)>& table);

// Reads a file, or stdin for "-".
Result<std::string> read_input(const ClientContext& ctx, const std::string& file);

// In the order `cubeplane --help` lists them.
void register_login_command(CLI::App& app, ClientContext& ctx);     // login
void register_task_commands(CLI::App& app, ClientContext& ctx);     // submit, tasks
void register_cluster_commands(CLI::App& app, ClientContext& ctx);  // clusters, nodes, control-plane
void register_group_commands(CLI::App& app, ClientContext& ctx);    // resource-groups, project-groups, priority-classes, apply
void register_account_commands(CLI::App& app, ClientContext& ctx);  // users, tokens
void register_report_commands(CLI::App& app, ClientContext& ctx);   // usage, events, alerts, prices, audit, version
void register_approval_commands(CLI::App& app, ClientContext& ctx);  // approvals

}  // namespace cp::cli
