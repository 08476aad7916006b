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
