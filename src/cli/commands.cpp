#include "cli/commands.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "cli/format.h"
#include "common/server_urls.h"
#include "model/documents.h"

namespace cp::cli {

void on_run(CLI::App* sub, ClientContext& ctx, std::function<int()> body) {
  // A verb's --help lists only its own options; the global ones are named here.
  sub->footer("Global options: --server URL[,URL...], --token TOKEN, -o table|json|yaml, --lang en|zh");
  // A verb with verbs of its own (usage, usage advice) runs only when none
  // of them was given.
  sub->callback([&ctx, sub, body = std::move(body)] {
    if (sub->get_subcommands().empty()) ctx.action = body;
  });
}

std::string language(const ClientContext& ctx) { return accept_language(ctx.lang, ctx.env); }

const char* tr(const ClientContext& ctx, const char* en, const char* zh) {
  return is_chinese(language(ctx)) ? zh : en;
}

Result<ApiClientOptions> connection_options(const ClientContext& ctx) {
  ConnectionSources s;
  if (!ctx.server.empty()) s.flag_server = ctx.server;
  if (!ctx.token.empty()) s.flag_token = ctx.token;
  s.env_server = ctx.env("CUBEPLANE_SERVER");
  s.env_token = ctx.env("CUBEPLANE_TOKEN");
  // The saved login is read only when it may matter, so that a broken file
  // does not stand in the way of a command given everything by flags.
  bool complete = (s.flag_server || s.env_server) && (s.flag_token || s.env_token);
  if (!complete) {
    CP_ASSIGN(s.saved, load_config(config_path(ctx.env)));
  }
  return client_options(ctx, resolve_connection(s));
}

Result<ApiClientOptions> client_options(const ClientContext& ctx, const Connection& c) {
  if (auto servers = parse_server_urls(c.server, "server"); !servers.ok()) {
    Error e = servers.error();
    e.code = std::string(kUsageErrorCode);
    return e;
  }
  ApiClientOptions o;
  o.server = c.server;
  o.token = c.token;
  o.accept_language = language(ctx);
  o.on_failover = [&ctx](const std::string& from, const Error& why, const std::string& to) {
    const std::string reason = why.message_for(language(ctx));
    if (is_chinese(language(ctx))) {
      *ctx.err << "服务器 " << from << " 没有应答（" << reason << "）；改试 " << to << "\n";
    } else {
      *ctx.err << "server " << from << " did not answer (" << reason << "); trying " << to << "\n";
    }
  };
  return o;
}

Result<std::unique_ptr<ApiClient>> connect(const ClientContext& ctx) {
  CP_ASSIGN(ApiClientOptions o, connection_options(ctx));
  return std::make_unique<ApiClient>(std::move(o));
}

int fail(const ClientContext& ctx, const Error& e) {
  *ctx.err << tr(ctx, "error: ", "错误：") << e.message_for(language(ctx)) << "\n";
  return e.code == kUsageErrorCode ? kExitUsage : kExitRefused;
}

int usage_error(const ClientContext& ctx, const std::string& en, const std::string& zh) {
  *ctx.err << tr(ctx, "error: ", "错误：") << (is_chinese(language(ctx)) ? zh : en) << "\n";
  return kExitUsage;
}

int print(const ClientContext& ctx, const json::value& v, const std::function<std::string(const json::value&)>& table) {
  if (ctx.output == "json") {
    *ctx.out << pretty_json(v);
  } else if (ctx.output == "yaml") {
    std::string text = to_yaml(v);
    if (!text.empty() && text.back() != '\n') text += '\n';
    *ctx.out << text;
  } else {
    *ctx.out << table(v);
  }
  ctx.out->flush();
  return kExitOk;
}

int print_list(ClientContext& ctx, const std::string& path, Query query, bool all,
               const std::function<std::string(const json::array&)>& table) {
  auto api = connect(ctx);
  if (!api) return fail(ctx, api.error());
  json::value page;
  if (all) {
    auto items = (*api)->list_all(path, std::move(query));
    if (!items) return fail(ctx, items.error());
    page = json::object{{"items", std::move(*items)}, {"next_cursor", ""}};
  } else {
    auto answer = (*api)->get(path, query);
    if (!answer) return fail(ctx, answer.error());
    page = std::move(*answer);
  }
  int rc = print(ctx, page, [&](const json::value& v) {
    const json::value* items = member(v, "items");
    return table(items != nullptr && items->is_array() ? items->get_array() : json::array{});
  });
  if (ctx.output == "table" && !str_at(page, "next_cursor").empty()) {
    *ctx.err << tr(ctx, "(more results: add --all to list every page)\n", "（还有更多结果：加 --all 列出全部）\n");
  }
  return rc;
}

Result<std::string> read_input(const ClientContext& ctx, const std::string& file) {
  std::stringstream text;
  if (file == "-") {
    text << ctx.in->rdbuf();
    return text.str();
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    std::string reason = std::strerror(errno);
    return Error{"cannot_read", 400, "cannot read " + file + ": " + reason, "无法读取 " + file + "：" + reason, {}};
  }
  text << in.rdbuf();
  return text.str();
}

}  // namespace cp::cli
