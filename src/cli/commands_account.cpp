// login, users create|ls, tokens create
#include <memory>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/views.h"

namespace cp::cli {
namespace {

void add_login(CLI::App& app, ClientContext& ctx) {
  auto* sub = app.add_subcommand(
      "login", "Check a server and token with the server, then save them to ~/.config/cubeplane/config.yaml "
               "(or $CUBEPLANE_CONFIG)");
  sub->add_option("--server", ctx.server,
                  "Cubeplane server URL, or several separated by commas (else $CUBEPLANE_SERVER, the saved one)");
  sub->add_option("--token", ctx.token, "API token (else $CUBEPLANE_TOKEN)");
  on_run(sub, ctx, [&ctx] {
    std::string path = config_path(ctx.env);
    // A broken saved file must not stop a new login from replacing it.
    auto saved = load_config(path);
    ConnectionSources s;
    if (!ctx.server.empty()) s.flag_server = ctx.server;
    if (!ctx.token.empty()) s.flag_token = ctx.token;
    s.env_server = ctx.env("CUBEPLANE_SERVER");
    s.env_token = ctx.env("CUBEPLANE_TOKEN");
    if (saved.ok()) s.saved.server = saved->server;  // a saved token is no new login
    Connection c = resolve_connection(s);
    if (c.token.empty()) {
      return usage_error(ctx, "login needs --token (or CUBEPLANE_TOKEN)", "login 需要 --token（或 CUBEPLANE_TOKEN）");
    }
    auto o = client_options(ctx, c);
    if (!o) return fail(ctx, o.error());
    ApiClient api(*o);
    auto whoami = api.get("/api/v1/whoami");
    if (!whoami) return fail(ctx, whoami.error());
    Status saved_now = save_config(path, SavedConfig{c.server, c.token});
    if (!saved_now.ok()) return fail(ctx, saved_now.error());
    return print(ctx, *whoami, [&](const json::value& v) {
      std::string who = str_at(v, "user");
      std::string role = str_at(v, "role");
      if (!role.empty()) who += " (" + role + ")";
      return std::string(tr(ctx, "Logged in to ", "已登录 ")) + c.server + tr(ctx, " as ", "，用户 ") + who +
             tr(ctx, "; saved to ", "；已保存到 ") + path + "\n";
    });
  });
}

void add_users(CLI::App& app, ClientContext& ctx) {
  auto* users = app.add_subcommand("users", "Create and list users (admin)");
  users->require_subcommand(1);

  struct CreateOptions {
    std::string name;
    std::string role = "user";
  };
  auto* create = users->add_subcommand("create", "Create a user");
  auto o = std::make_shared<CreateOptions>();
  create->add_option("NAME", o->name, "User name")->required();
  create->add_option("--role", o->role, "Platform role: admin, user or viewer")
      ->check(CLI::IsMember({"admin", "user", "viewer"}))
      ->capture_default_str();
  on_run(create, ctx, [&ctx, o] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto user = (*api)->post("/api/v1/users", json::object{{"name", o->name}, {"role", o->role}});
    if (!user) return fail(ctx, user.error());
    return print(ctx, *user, [&](const json::value& v) { return users_table(json::array{v}, ctx.clock->now_ms()); });
  });

  auto* ls = users->add_subcommand("ls", "List users");
  on_run(ls, ctx, [&ctx] {
    return print_list(ctx, "/api/v1/users", {}, true,
                      [&](const json::array& items) { return users_table(items, ctx.clock->now_ms()); });
  });
}

void add_tokens(CLI::App& app, ClientContext& ctx) {
  auto* tokens = app.add_subcommand("tokens", "Create API tokens");
  tokens->require_subcommand(1);

  struct CreateOptions {
    std::string user;
    std::string description;
    std::int64_t ttl_s = 0;
  };
  auto* create = tokens->add_subcommand("create", "Create an API token for a user (admin, or the user itself)");
  auto o = std::make_shared<CreateOptions>();
  create->add_option("--user", o->user, "User the token acts as")->required();
  create->add_option("--description", o->description, "What the token is for");
  create->add_option("--ttl", o->ttl_s, "Seconds until it expires (default: never)")->check(CLI::PositiveNumber);
  on_run(create, ctx, [&ctx, o] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    json::object body;
    if (!o->description.empty()) body["description"] = o->description;
    if (o->ttl_s > 0) body["ttl_s"] = o->ttl_s;
    auto answer = (*api)->post("/api/v1/users/" + path_segment(o->user) + "/tokens", body);
    if (!answer) return fail(ctx, answer.error());
    return print(ctx, *answer, [&](const json::value& v) { return secret_text(v, language(ctx)); });
  });
}

}  // namespace

void register_login_command(CLI::App& app, ClientContext& ctx) { add_login(app, ctx); }

void register_account_commands(CLI::App& app, ClientContext& ctx) {
  add_users(app, ctx);
  add_tokens(app, ctx);
}

}  // namespace cp::cli
