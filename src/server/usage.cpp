// Usage by group over a period: the ledger (usage_daily, written when each
// attempt ends, in the same transaction) for the attempts that have ended,
// plus the attempts still running, counted up to now.
//
// The ledger is kept by UTC day, so a report covers whole days: the days
// that [from, to) touches.
//
// With a price table, each row also has its cost: every ledger sum priced at
// its GPU type and day, summed exactly, rounded once to the cent. The ledger
// is read by GPU type, and by day only when a price changes inside the
// period (otherwise one price per resource covers it all, and whole months
// come from usage_monthly).
#include <algorithm>
#include <set>

#include "model/documents.h"
#include "model/prices.h"
#include "server/control_plane.h"
#include "server/internal.h"

namespace cp {

namespace {

const std::set<std::string> kDimensions = {"project_group", "resource_group", "cluster", "gpu_type",
                                           "user",          "outcome",        "day",     "month"};

std::string day_of(Millis t) { return format_time(t).substr(0, 10); }
std::string month_of(Millis t) { return format_time(t).substr(0, 7); }

struct Sums {
  std::int64_t attempts = 0, gpu_ms = 0, cpu_core_ms = 0, memory_mib_s = 0;
  Cost cost;
  void add(const UsageRow& r, const PriceTable& prices, Millis price_day) {
    attempts += r.attempts;
    gpu_ms += r.gpu_ms;
    cpu_core_ms += r.cpu_core_ms;
    memory_mib_s += r.memory_mib_s;
    if (!prices.empty()) cost.add(prices, price_day, r.gpu_type, r.gpu_ms, r.cpu_core_ms, r.memory_mib_s);
  }
};

constexpr std::string_view kPriceTableKey = "price_table";

Result<PriceTable> load_prices(Tx& tx) {
  CP_ASSIGN(auto text, tx.get_meta(std::string(kPriceTableKey)));
  PriceTable t;
  if (!text) return t;
  CP_ASSIGN(auto v, parse_json(*text));
  CP_TRY(from_json(v, t, DecodeContext{"price_table", false}));
  return t;
}

std::string key_part(const UsageRow& r, const std::string& dimension) {
  if (dimension == "project_group") return r.project_group;
  if (dimension == "resource_group") return r.resource_group;
  if (dimension == "cluster") return r.cluster;
  if (dimension == "gpu_type") return r.gpu_type;
  if (dimension == "user") return r.user;
  if (dimension == "outcome") return r.outcome;
  if (dimension == "day") return day_of(r.day);
  return month_of(r.day);
}

}  // namespace

Result<json::array> ControlPlane::usage(const Principal& p, Millis from, Millis to,
                                        const std::vector<std::string>& group_by) {
  if (p.kind != Principal::Kind::user) return internal::forbidden_for(p, "read usage", "查看用量");
  for (const auto& g : group_by) {
    if (!kDimensions.count(g)) {
      return errors::invalid("group_by", "unknown dimension \"" + g +
                                             "\" (one of project_group, resource_group, cluster, gpu_type, user, "
                                             "outcome, day, month)",
                             "未知的分组维度 \"" + g + "\"");
    }
  }
  if (to <= from) return errors::invalid("to", "must be after from", "必须晚于 from");
  const Millis from_day = internal::day_start(from);
  const Millis to_day = internal::day_start(to - 1) + internal::kDayMs;
  const Millis now = clock_.now_ms();

  // The ledger grouped by what the report needs, and always by project group
  // so that rows a user may not read can be left out.
  std::map<std::vector<std::string>, Sums> sums;
  PriceTable prices;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    sums.clear();
    CP_ASSIGN(prices, load_prices(tx));
    UsageQuery q{from_day, to_day, {"project_group"}};
    auto want = [&](const std::string& column) {
      if (std::find(q.group_by.begin(), q.group_by.end(), column) == q.group_by.end()) q.group_by.push_back(column);
    };
    for (const auto& g : group_by) want(g == "month" ? "day" : g);
    const bool by_day_for_prices = !prices.empty() && prices.changes_within(from_day, to_day);
    if (!prices.empty()) want("gpu_type");
    if (by_day_for_prices) want("day");
    const bool rows_have_day = std::find(q.group_by.begin(), q.group_by.end(), "day") != q.group_by.end();
    auto add = [&](const UsageRow& r, Millis price_day) {
      if (!p.can_read_project(r.project_group)) return;
      std::vector<std::string> key;
      for (const auto& g : group_by) key.push_back(key_part(r, g));
      sums[key].add(r, prices, price_day);
    };
    CP_ASSIGN(auto ledger, tx.usage_totals(q));
    for (const auto& r : ledger) add(r, rows_have_day ? r.day : from_day);
    // Attempts still running: what they used so far, as if they ended now.
    CP_ASSIGN(auto live, tx.active_attempts(""));
    for (Attempt a : live) {
      if (a.started_at == 0 || a.started_at >= now) continue;
      CP_ASSIGN(auto t, tx.get_task(a.task_id));
      if (!t) continue;
      a.finished_at = now;
      for (auto& r : internal::usage_of(*t, a)) {
        if (r.day < from_day || r.day >= to_day) continue;
        r.outcome = "Running";
        add(r, r.day);
      }
    }
    return {};
  }));
  json::array out;
  for (const auto& [key, s] : sums) {
    json::object o;
    for (std::size_t i = 0; i < group_by.size(); ++i) o[group_by[i]] = key[i];
    const double gpu_seconds = static_cast<double>(s.gpu_ms) / 1000.0;
    o["gpu_seconds"] = gpu_seconds;
    o["gpu_hours"] = gpu_seconds / 3600.0;
    o["cpu_core_seconds"] = static_cast<double>(s.cpu_core_ms) / 1000.0;
    o["memory_gib_seconds"] = static_cast<double>(s.memory_mib_s) / 1024.0;
    o["attempts"] = s.attempts;
    if (!prices.empty()) {
      o["cost_cents"] = s.cost.cents();
      o["cost"] = static_cast<double>(s.cost.cents()) / 100.0;
      o["currency"] = prices.currency;
    }
    out.push_back(std::move(o));
  }
  return out;
}

// The ledger is written in the transaction that ends each attempt, so it
// agrees with the attempts after any crash; a rebuild is for the rest: a
// ledger restored from an older backup than the events, a bug fixed in the
// arithmetic, rows edited by hand. It replays every attempt end event whose
// attempt overlaps the months. Events are stamped when the server learned
// of the end, which an agent's clock may put a little after the attempt's
// own finished_at: the walk starts a day early.
Result<json::object> ControlPlane::rebuild_usage(const Principal& p, Millis from_month, Millis to_month) {
  if (!p.is_admin()) return internal::forbidden_for(p, "rebuild the usage ledger", "重建用量账本");
  if (month_start(from_month) != from_month || month_start(to_month) != to_month) {
    return errors::invalid("from", "from and to must be month starts (YYYY-MM)", "from 和 to 须为月份（YYYY-MM）");
  }
  if (to_month <= from_month) return errors::invalid("to", "must be after from", "必须晚于 from");
  const Millis now = clock_.now_ms();
  if (from_month > now) return errors::invalid("from", "is in the future", "不能晚于当前时间");
  const Millis walk_from = from_month - internal::kDayMs;
  // Events older than this may be gone: event retention removes them by
  // age, task retention with their finished tasks.
  std::int64_t keep_s = 0;
  for (auto s : {config_.event_retention_s, config_.task_retention_s}) {
    if (s > 0) keep_s = keep_s == 0 ? s : std::min(keep_s, s);
  }
  if (keep_s > 0 && walk_from < now - keep_s * 1000) {
    Error e = errors::conflict(
            "events before " + format_time(now - keep_s * 1000).substr(0, 10) +
                " may have been removed by retention (event_retention_s, task_retention_s): the ledger of " +
                format_time(from_month).substr(0, 7) + " cannot be rebuilt from them",
            format_time(now - keep_s * 1000).substr(0, 10) + " 之前的事件可能已被保留策略删除，无法据此重建 " +
                format_time(from_month).substr(0, 7) + " 的用量账本");
    e.details["oldest_complete"] = format_time(now - keep_s * 1000);
    return e;
  }
  std::int64_t attempts = 0, removed = 0, written = 0;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    attempts = written = 0;
    CP_ASSIGN(removed, tx.delete_usage_months(from_month, to_month));
    CP_ASSIGN(auto first, tx.first_event_since(walk_from));
    if (first == 0) return {};
    std::set<std::string> seen;
    std::vector<UsageRow> rows;
    EventQuery q;
    q.object_kind = "attempt";
    q.type = "attempt.state";
    q.after_id = first - 1;
    q.limit = 1000;
    for (;;) {
      CP_ASSIGN(auto page, tx.list_events(q));
      for (const auto& e : page) {
        AttemptState state{};
        if (!boost::describe::enum_from_string(e.to.c_str(), state) || !is_terminal(state)) continue;
        auto source = internal::usage_source(e);
        if (!source) {
          // An end event written before events carried their usage: the
          // attempt's own row still knows it, unless retention took it.
          CP_ASSIGN(auto a, tx.get_attempt(e.object_id));
          std::optional<Task> t;
          if (a) {
            CP_ASSIGN(t, tx.get_task(a->task_id));
          }
          if (!a || !t) {
            if (e.at < from_month) continue;  // in the day before: may well be outside the months
            Error err = errors::conflict(
                      "the end of attempt " + e.object_id + " (event " + std::to_string(e.id) +
                          ") carries no usage and the attempt is gone: the ledger cannot be rebuilt",
                      "尝试 " + e.object_id + " 的结束事件（" + std::to_string(e.id) +
                          "）不含用量且该尝试已不存在：无法重建用量账本");
            err.details["event"] = e.id;
            return err;
          }
          source = std::pair{std::move(*t), std::move(*a)};
        }
        if (!seen.insert(e.object_id).second) continue;
        bool counted = false;
        for (auto& r : internal::usage_of(source->first, source->second)) {
          if (r.day < from_month || r.day >= to_month) continue;
          rows.push_back(std::move(r));
          counted = true;
        }
        if (counted) ++attempts;
      }
      if (page.size() < static_cast<std::size_t>(q.limit)) break;
      q.after_id = page.back().id;
      if (rows.size() >= 10000) {  // bound memory: the ledger adds rows of the same key
        written += static_cast<std::int64_t>(rows.size());
        CP_TRY(tx.add_usage(rows));
        rows.clear();
      }
    }
    written += static_cast<std::int64_t>(rows.size());
    CP_TRY(tx.add_usage(rows));
    json::object data;
    data["from"] = format_time(from_month);
    data["to"] = format_time(to_month);
    data["attempts"] = attempts;
    CP_ASSIGN(auto eid, tx.append_event(internal::make_event(now, p.user, "usage", format_time(from_month).substr(0, 7),
                                                             "usage.rebuilt", "", "", "", std::move(data))));
    (void)eid;
    return {};
  }));
  json::object out;
  out["from"] = format_time(from_month);
  out["to"] = format_time(to_month);
  out["attempts"] = attempts;
  out["rows_removed"] = removed;
  out["rows_written"] = written;
  return out;
}

Result<std::map<std::string, MonthUse>> ControlPlane::month_to_date(Millis now) {
  Principal system;
  system.user = "system";
  system.role = PlatformRole::admin;
  const Millis month = month_start(now);
  CP_ASSIGN(auto rows, usage(system, month, std::max(now, month + 1), {"project_group"}));
  std::map<std::string, MonthUse> out;
  for (const auto& r : rows) {
    const auto& o = r.as_object();
    auto& u = out[std::string(o.at("project_group").as_string())];
    u.gpu_hours = o.at("gpu_hours").to_number<double>();
    if (const auto* c = o.if_contains("cost_cents")) u.cost_cents = c->to_number<std::int64_t>();
    if (const auto* c = o.if_contains("currency")) u.currency = std::string(c->as_string());
  }
  return out;
}

namespace internal {

json::object budget_status(const Budget& budget, const MonthUse& use, Millis now) {
  const Millis month = month_start(now), next = next_month_start(now);
  const double elapsed = static_cast<double>(now - month) / static_cast<double>(next - month);
  json::object out;
  out["month"] = format_time(month).substr(0, 7);
  out["month_elapsed"] = elapsed;
  // One measure: used, the budget, the share, and the pace: what the month
  // ends at if it goes on as it has, and when the budget runs out at it.
  auto measure = [&](double used, double limit) {
    json::object m;
    m["used"] = used;
    m["budget"] = limit;
    m["percent"] = limit > 0 ? used / limit * 100.0 : 0.0;
    const double projected = elapsed > 0 ? used / elapsed : used;
    m["projected"] = projected;
    if (used >= limit) {
      m["exhausted"] = true;
    } else if (projected > limit && used > 0) {
      m["runs_out_at"] = format_time(month + static_cast<Millis>(static_cast<double>(now - month) * limit / used));
    }
    return m;
  };
  if (budget.gpu_hours && *budget.gpu_hours > 0) {
    out["gpu_hours"] = measure(use.gpu_hours, static_cast<double>(*budget.gpu_hours));
  }
  if (budget.cost_cents && *budget.cost_cents > 0 && !use.currency.empty()) {
    auto m = measure(static_cast<double>(use.cost_cents) / 100.0, static_cast<double>(*budget.cost_cents) / 100.0);
    m["currency"] = use.currency;
    out["cost"] = std::move(m);
  }
  return out;
}

}  // namespace internal

Result<json::object> ControlPlane::get_price_table(const Principal& p) {
  if (p.kind != Principal::Kind::user) return internal::forbidden_for(p, "read prices", "查看价格");
  PriceTable t;
  CP_TRY(store_.read([&](Tx& tx) -> Status {
    CP_ASSIGN(t, load_prices(tx));
    return {};
  }));
  return price_table_to_document(t);
}

Result<json::object> ControlPlane::apply_price_table(const Principal& p, const json::value& doc) {
  if (!p.is_admin()) return internal::forbidden_for(p, "change prices", "修改价格");
  CP_ASSIGN(auto t, price_table_from_document(doc));
  const Millis now = clock_.now_ms();
  t.updated_at = now;
  CP_TRY(store_.write([&](Tx& tx) -> Status {
    CP_TRY(tx.set_meta(std::string(kPriceTableKey), dump(to_json(t))));
    json::object data;
    data["currency"] = t.currency;
    data["prices"] = static_cast<std::int64_t>(t.prices.size());
    CP_ASSIGN(auto eid, tx.append_event(internal::make_event(now, p.user, "price_table", "default",
                                                             "price_table.applied", "", "", "", std::move(data))));
    (void)eid;
    return {};
  }));
  return price_table_to_document(t);
}

}  // namespace cp
