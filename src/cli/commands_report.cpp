// usage, events, alerts, prices, audit, version
#include <memory>
#include <optional>
#include <sstream>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/views.h"

namespace cp::cli {
namespace {

constexpr std::string_view kGroupKeys[] = {"project_group", "resource_group", "cluster", "gpu_type",
                                           "user",          "outcome",        "day",     "month"};

// A usage error for the first of `args` that is not a time (nullopt: all are).
std::optional<int> bad_time_arg(ClientContext& ctx, std::initializer_list<const std::string*> args) {
  for (const auto* arg : args) {
    if (!arg->empty() && !is_valid_time_arg(*arg)) {
      return usage_error(ctx, "\"" + *arg + "\" is not a date (2026-01-31), an RFC 3339 time or ms since the epoch",
                         "\"" + *arg + "\" 不是日期（2026-01-31）、RFC 3339 时间或毫秒时间戳");
    }
  }
  return std::nullopt;
}

struct UsageOptions {
  std::string from, to, by;
  bool csv = false;
};

// "project_group, cluster" -> "project_group,cluster"; "" when a key is unknown.
std::string normalize_group_by(const std::string& by, std::string& unknown) {
  std::string out;
  std::stringstream in(by);
  std::string key;
  while (std::getline(in, key, ',')) {
    key.erase(0, key.find_first_not_of(' '));
    key.erase(key.find_last_not_of(' ') + 1);
    if (key.empty()) continue;
    if (std::find(std::begin(kGroupKeys), std::end(kGroupKeys), key) == std::end(kGroupKeys)) {
      unknown = key;
      return "";
    }
    out += (out.empty() ? "" : ",") + key;
  }
  return out;
}

void add_usage_rebuild(CLI::App& usage, ClientContext& ctx);
void add_usage_advice(CLI::App& usage, ClientContext& ctx);

void add_usage(CLI::App& app, ClientContext& ctx) {
  auto* sub = app.add_subcommand("usage", "Resource usage (GPU, CPU and memory hours), grouped");
  auto o = std::make_shared<UsageOptions>();
  sub->add_option("--from", o->from, "Start: a date (2026-01-01), an RFC 3339 time or ms since the epoch");
  sub->add_option("--to", o->to, "End (exclusive), in the same forms; the report covers whole UTC days");
  sub->add_option("--by", o->by, "Group by, comma separated: project_group,resource_group,cluster,gpu_type,user,outcome,day,month");
  sub->add_flag("--csv", o->csv, "Print CSV as the server writes it");
  on_run(sub, ctx, [&ctx, o] {
    if (auto bad = bad_time_arg(ctx, {&o->from, &o->to})) return *bad;
    std::string unknown;
    std::string by = normalize_group_by(o->by, unknown);
    if (!unknown.empty()) {
      return usage_error(ctx, "--by: unknown key \"" + unknown +
                                  "\" (project_group, resource_group, cluster, gpu_type, user, outcome, day, month)",
                         "--by：未知的分组键 \"" + unknown +
                             "\"（project_group、resource_group、cluster、gpu_type、user、outcome、day、month）");
    }
    Query q{{"from", o->from}, {"to", o->to}, {"group_by", by}};
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    if (o->csv) {
      auto csv = (*api)->get_text("/api/v1/usage", q, "text/csv");
      if (!csv) return fail(ctx, csv.error());
      *ctx.out << *csv;
      if (!csv->empty() && csv->back() != '\n') *ctx.out << "\n";
      return kExitOk;
    }
    auto usage = (*api)->get("/api/v1/usage", q);
    if (!usage) return fail(ctx, usage.error());
    return print(ctx, *usage, [](const json::value& v) {
      const json::value* items = member(v, "items");
      return usage_table(items != nullptr && items->is_array() ? items->get_array() : json::array{});
    });
  });
  add_usage_rebuild(*sub, ctx);
  add_usage_advice(*sub, ctx);
}

struct RebuildOptions {
  std::string from, to;
};

bool is_month_arg(const std::string& s) {
  Millis t = 0;
  return s.size() == 7 && parse_time(s + "-01", t);
}

void add_usage_rebuild(CLI::App& usage, ClientContext& ctx) {
  auto* sub = usage.add_subcommand("rebuild", "Rebuild the usage ledger of whole months from the attempts' events (admins)");
  auto o = std::make_shared<RebuildOptions>();
  sub->add_option("--from", o->from, "First month, YYYY-MM")->required();
  sub->add_option("--to", o->to, "Month after the last, YYYY-MM (default: the month after --from)");
  on_run(sub, ctx, [&ctx, o] {
    for (const auto* m : {&o->from, &o->to}) {
      if (!m->empty() && !is_month_arg(*m)) {
        return usage_error(ctx, "\"" + *m + "\" is not a month (YYYY-MM)", "\"" + *m + "\" 不是月份（YYYY-MM）");
      }
    }
    json::object body{{"from", o->from}};
    if (!o->to.empty()) body["to"] = o->to;
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto r = (*api)->post("/api/v1/usage/rebuild", body);
    if (!r) return fail(ctx, r.error());
    return print(ctx, *r, [&ctx](const json::value& v) {
      auto field = [&](const char* k) {
        const json::value* x = member(v, k);
        return x ? (x->is_string() ? std::string(x->get_string()) : json::serialize(*x)) : std::string();
      };
      return std::string(tr(ctx, "rebuilt ", "已重建 ")) + field("from").substr(0, 7) + " .. " +
             field("to").substr(0, 7) + ": " + field("attempts") + tr(ctx, " attempts, ", " 个尝试，") +
             field("rows_written") + tr(ctx, " rows\n", " 行\n");
    });
  });
}

struct AdviceOptions {
  int days = 14;
  std::string project_group;
};

void add_usage_advice(CLI::App& usage, ClientContext& ctx) {
  auto* sub = usage.add_subcommand(
      "advice", "Request against measured use per step, with advice (\"requests 8 CPUs, uses 1.2 at p95: 2 would do\")");
  auto o = std::make_shared<AdviceOptions>();
  sub->add_option("--days", o->days, "Over the last N days (1..90, default 14)")->check(CLI::Range(1, 90));
  sub->add_option("--project-group", o->project_group, "Only this project group");
  on_run(sub, ctx, [&ctx, o] {
    Query q{{"days", std::to_string(o->days)}, {"project_group", o->project_group}};
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto r = (*api)->get("/api/v1/usage/advice", q);
    if (!r) return fail(ctx, r.error());
    return print(ctx, *r, [&ctx](const json::value& v) {
      const json::value* items = member(v, "items");
      return advice_table(items != nullptr && items->is_array() ? items->get_array() : json::array{}, language(ctx));
    });
  });
}

struct EventsOptions {
  std::string kind, id;
  int limit = 0;
  bool all = false;
};

void add_events(CLI::App& app, ClientContext& ctx) {
  auto* sub = app.add_subcommand("events", "The history of state changes (one page unless --all)");
  auto o = std::make_shared<EventsOptions>();
  sub->add_option("--object-kind", o->kind, "Only events of this kind of object (task, cluster, node, ...)");
  sub->add_option("--object-id", o->id, "Only events of this object");
  sub->add_option("--limit", o->limit, "Events per page (server default when 0)")->check(CLI::Range(0, 10000));
  sub->add_flag("--all", o->all, "Follow next_cursor and list every page");
  on_run(sub, ctx, [&ctx, o] {
    Query q{{"object_kind", o->kind}, {"object_id", o->id}, {"limit", o->limit > 0 ? std::to_string(o->limit) : ""}};
    return print_list(ctx, "/api/v1/events", std::move(q), o->all,
                      [](const json::array& items) { return events_table(items); });
  });
}

struct AlertsOptions {
  std::string state;
  int limit = 0;
  bool all = false;
};

void add_alerts(CLI::App& app, ClientContext& ctx) {
  auto* alerts = app.add_subcommand("alerts", "Alerts: quota watermarks, offline clusters, queues, budgets");
  alerts->require_subcommand(1);
  auto* sub = alerts->add_subcommand("ls", "List alerts, newest first (one page unless --all)");
  auto o = std::make_shared<AlertsOptions>();
  sub->add_option("--state", o->state, "pending, firing or resolved; several separated by commas");
  sub->add_option("--limit", o->limit, "Alerts per page (server default when 0)")->check(CLI::Range(0, 1000));
  sub->add_flag("--all", o->all, "Follow next_cursor and list every page");
  on_run(sub, ctx, [&ctx, o] {
    Query q{{"state", o->state}, {"limit", o->limit > 0 ? std::to_string(o->limit) : ""}};
    return print_list(ctx, "/api/v1/alerts", std::move(q), o->all,
                      [&ctx](const json::array& items) { return alerts_table(items, ctx.clock->now_ms()); });
  });
}

struct AuditOptions {
  std::string user, from, to;
  int limit = 0;
  bool all = false;
};

void add_audit(CLI::App& app, ClientContext& ctx) {
  auto* audit = app.add_subcommand("audit", "The audit log: who changed what, when, from where (admins)");
  audit->require_subcommand(1);
  auto* sub = audit->add_subcommand("ls", "List changes, newest first (one page unless --all)");
  auto o = std::make_shared<AuditOptions>();
  sub->add_option("--user", o->user, "Only changes by this user");
  sub->add_option("--from", o->from, "Start: a date, an RFC 3339 time or ms since the epoch");
  sub->add_option("--to", o->to, "End (exclusive), in the same forms");
  sub->add_option("--limit", o->limit, "Entries per page (server default when 0)")->check(CLI::Range(0, 1000));
  sub->add_flag("--all", o->all, "Follow next_cursor and list every page");
  on_run(sub, ctx, [&ctx, o] {
    if (auto bad = bad_time_arg(ctx, {&o->from, &o->to})) return *bad;
    Query q{{"user", o->user}, {"from", o->from}, {"to", o->to},
            {"limit", o->limit > 0 ? std::to_string(o->limit) : ""}};
    return print_list(ctx, "/api/v1/audit", std::move(q), o->all,
                      [](const json::array& items) { return audit_table(items); });
  });
}

void add_prices(CLI::App& app, ClientContext& ctx) {
  auto* sub = app.add_subcommand("prices", "The price table (change it with `cubeplane apply -f prices.yaml`)");
  on_run(sub, ctx, [&ctx] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto table = (*api)->get("/api/v1/price-table", {});
    if (!table) return fail(ctx, table.error());
    return print(ctx, *table, [](const json::value& v) { return prices_table(v); });
  });
}

void add_version(CLI::App& app, ClientContext& ctx) {
  auto* sub = app.add_subcommand("version", "Print the client version");
  on_run(sub, ctx, [&ctx] {
    json::value v = json::object{{"client", std::string(kClientVersion)}};
    return print(ctx, v, [](const json::value&) { return "cubeplane " + std::string(kClientVersion) + "\n"; });
  });
}

}  // namespace

void register_report_commands(CLI::App& app, ClientContext& ctx) {
  add_usage(app, ctx);
  add_events(app, ctx);
  add_alerts(app, ctx);
  add_prices(app, ctx);
  add_audit(app, ctx);
  add_version(app, ctx);
}

}  // namespace cp::cli
