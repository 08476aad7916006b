// approvals ls|request|approve|deny|revoke
#include <memory>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/views.h"

namespace cp::cli {
namespace {

struct ListOptions {
  std::string state, project_group;
  bool all = false;
};

struct RequestOptions {
  std::string project_group, resource_group, reason;
};

struct DecideOptions {
  std::string id, note, ttl;
};

std::string approval_line(ClientContext& ctx, const json::value& a) {
  return std::string(tr(ctx, "approval ", "审批 ")) + str_at(a, "id") + ": " + str_at(a, "project_group") + " -> " +
         str_at(a, "resource_group") + ", " + str_at(a, "state") + "\n";
}

void add_decision(CLI::App& parent, ClientContext& ctx, const std::string& verb, const std::string& help) {
  auto* sub = parent.add_subcommand(verb, help);
  auto o = std::make_shared<DecideOptions>();
  sub->add_option("ID", o->id, "Approval id")->required();
  sub->add_option("--note", o->note, "Words for the requester (kept with the decision)");
  if (verb == "approve") sub->add_option("--ttl", o->ttl, "How long it holds: 30s, 12h, 7d (default: no end)");
  on_run(sub, ctx, [&ctx, o, verb] {
    json::object body;
    if (!o->note.empty()) body["note"] = o->note;
    if (!o->ttl.empty()) {
      auto seconds = parse_duration_arg(o->ttl);
      if (!seconds) {
        return usage_error(ctx, "--ttl: \"" + o->ttl + "\" is not a duration like 12h or 30d",
                           "--ttl：\"" + o->ttl + "\" 不是形如 12h 或 30d 的时长");
      }
      body["ttl_s"] = *seconds;
    }
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto a = (*api)->post("/api/v1/approvals/" + path_segment(o->id) + "/" + verb, body);
    if (!a) return fail(ctx, a.error());
    return print(ctx, *a, [&ctx](const json::value& v) { return approval_line(ctx, v); });
  });
}

}  // namespace

void register_approval_commands(CLI::App& app, ClientContext& ctx) {
  auto* approvals = app.add_subcommand(
      "approvals", "Ask for, list and decide approvals to use resource groups that need one");
  approvals->require_subcommand(1);

  auto* ls = approvals->add_subcommand("ls", "List approvals, newest first (one page unless --all)");
  auto lo = std::make_shared<ListOptions>();
  ls->add_option("--state", lo->state, "pending, approved, denied or revoked; several separated by commas");
  ls->add_option("--project-group", lo->project_group, "Only this project group's");
  ls->add_flag("--all", lo->all, "Follow next_cursor and list every page");
  on_run(ls, ctx, [&ctx, lo] {
    Query q{{"state", lo->state}, {"project_group", lo->project_group}};
    return print_list(ctx, "/api/v1/approvals", std::move(q), lo->all,
                      [&ctx](const json::array& items) { return approvals_table(items, ctx.clock->now_ms()); });
  });

  auto* req = approvals->add_subcommand("request", "Ask to use a resource group for a project group");
  auto ro = std::make_shared<RequestOptions>();
  req->add_option("--project-group", ro->project_group, "Your project group")->required();
  req->add_option("--resource-group", ro->resource_group, "The resource group it lists with approval: required")
      ->required();
  req->add_option("--reason", ro->reason, "Why (shown to whoever decides)");
  on_run(req, ctx, [&ctx, ro] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto a = (*api)->post("/api/v1/approvals", json::object{{"project_group", ro->project_group},
                                                           {"resource_group", ro->resource_group},
                                                           {"reason", ro->reason}});
    if (!a) return fail(ctx, a.error());
    return print(ctx, *a, [&ctx](const json::value& v) { return approval_line(ctx, v); });
  });

  add_decision(*approvals, ctx, "approve", "Approve a pending request (project-group admin or platform admin)");
  add_decision(*approvals, ctx, "deny", "Deny a pending request");
  add_decision(*approvals, ctx, "revoke", "Revoke an approval");
}

}  // namespace cp::cli
