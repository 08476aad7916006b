#include <algorithm>
#include <charconv>
#include <chrono>
#include <set>

#include "model/documents_internal.h"
#include "model/prices.h"

namespace cp {

namespace {

constexpr std::int64_t kMaxMicros = 1'000'000'000'000;  // 1,000,000 an hour
constexpr std::size_t kMaxPrices = 10'000;

struct PriceDoc {
  std::string resource;
  docs::ScalarText per_hour;
  std::string from;
};
BOOST_DESCRIBE_STRUCT(PriceDoc, (), (resource, per_hour, from))

struct PriceTableSpecDoc {
  std::string currency = "USD";
  std::vector<PriceDoc> prices;
};
BOOST_DESCRIBE_STRUCT(PriceTableSpecDoc, (), (currency, prices))

// "2026-01-31" -> 00:00 UTC of that day.
std::optional<Millis> parse_day(const std::string& s) {
  int y = 0;
  unsigned m = 0, d = 0;
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return std::nullopt;
  auto num = [&](std::size_t at, std::size_t len, auto& out) {
    auto [p, ec] = std::from_chars(s.data() + at, s.data() + at + len, out);
    return ec == std::errc() && p == s.data() + at + len;
  };
  if (!num(0, 4, y) || !num(5, 2, m) || !num(8, 2, d)) return std::nullopt;
  using namespace std::chrono;
  const year_month_day ymd{year{y}, month{m}, day{d}};
  if (!ymd.ok()) return std::nullopt;
  return duration_cast<milliseconds>(sys_days(ymd).time_since_epoch()).count();
}

std::string format_day(Millis t) { return format_time(t).substr(0, 10); }

bool valid_resource(const std::string& r) {
  if (r == "cpu" || r == "memory" || r == "gpu") return true;
  if (!r.starts_with("gpu/") || r.size() == 4 || r.size() > 64) return false;
  return std::all_of(r.begin() + 4, r.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_';
  });
}

}  // namespace

Result<std::int64_t> parse_price(const std::string& text, const std::string& path) {
  auto bad = [&] {
    return errors::invalid(path, "must be an amount like \"2.50\" (not negative, at most 6 decimals, at most 1000000), got \"" +
                                     text + "\"",
                           "必须是形如 \"2.50\" 的金额（非负，最多 6 位小数，不超过 1000000），实际为 \"" + text + "\"");
  };
  auto dot = text.find('.');
  std::string whole = text.substr(0, dot);
  std::string frac = dot == std::string::npos ? "" : text.substr(dot + 1);
  if (whole.empty() || whole.size() > 7 || frac.size() > 6 || (dot != std::string::npos && frac.empty())) return bad();
  auto digits = [](const std::string& s) { return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; }); };
  if (!digits(whole) || !digits(frac)) return bad();
  std::int64_t micros = std::stoll(whole) * 1'000'000;
  if (!frac.empty()) micros += std::stoll(frac + std::string(6 - frac.size(), '0'));
  if (micros > kMaxMicros) return bad();
  return micros;
}

std::string format_micros(std::int64_t micros) {
  std::string out = std::to_string(micros / 1'000'000);
  std::string frac = std::to_string(1'000'000 + micros % 1'000'000).substr(1);
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  return frac.empty() ? out : out + "." + frac;
}

Result<PriceTable> price_table_from_document(const json::value& doc) {
  CP_ASSIGN(auto env, docs::open_document(doc, "PriceTable"));
  CP_ASSIGN(auto name, docs::object_name(env.metadata));
  if (name != "default") {
    return errors::invalid("metadata.name", "there is one price table, named \"default\"",
                           "只有一个价格表，名为 \"default\"");
  }
  PriceTableSpecDoc spec;
  CP_TRY(docs::decode_strict(env.spec, spec, "spec"));
  PriceTable t;
  if (spec.currency.size() != 3 ||
      !std::all_of(spec.currency.begin(), spec.currency.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
    return errors::invalid("spec.currency", "must be an ISO 4217 code such as USD or CNY",
                           "必须是 ISO 4217 货币代码，如 USD 或 CNY");
  }
  t.currency = spec.currency;
  if (spec.prices.size() > kMaxPrices) {
    return errors::invalid("spec.prices", "at most 10000 prices", "最多 10000 个价格");
  }
  std::set<std::pair<std::string, Millis>> seen;
  for (std::size_t i = 0; i < spec.prices.size(); ++i) {
    const auto& p = spec.prices[i];
    const std::string path = "spec.prices[" + std::to_string(i) + "]";
    if (!valid_resource(p.resource)) {
      return errors::invalid(path + ".resource", "must be cpu, memory, gpu or gpu/<type>, got \"" + p.resource + "\"",
                             "必须是 cpu、memory、gpu 或 gpu/<类型>，实际为 \"" + p.resource + "\"");
    }
    CP_ASSIGN(auto micros, parse_price(p.per_hour.text, path + ".per_hour"));
    auto from = parse_day(p.from);
    if (!from) {
      return errors::invalid(path + ".from", "must be a date like 2026-01-01, got \"" + p.from + "\"",
                             "必须是形如 2026-01-01 的日期，实际为 \"" + p.from + "\"");
    }
    if (!seen.insert({p.resource, *from}).second) {
      return errors::invalid(path, "a second price for " + p.resource + " from " + p.from,
                             p.resource + " 在 " + p.from + " 起已有价格");
    }
    t.prices.push_back(Price{p.resource, micros, *from});
  }
  std::sort(t.prices.begin(), t.prices.end(),
            [](const Price& a, const Price& b) { return std::tie(a.resource, a.from) < std::tie(b.resource, b.from); });
  return t;
}

json::object price_table_to_document(const PriceTable& t) {
  json::array prices;
  for (const auto& p : t.prices) {
    prices.push_back(json::object{
        {"resource", p.resource}, {"per_hour", format_micros(p.micros_per_hour)}, {"from", format_day(p.from)}});
  }
  json::object spec;
  spec["currency"] = t.currency;
  spec["prices"] = std::move(prices);
  return docs::make_document("PriceTable", docs::object_meta("default", 0, t.updated_at), std::move(spec));
}

std::optional<std::int64_t> PriceTable::price_at(const std::string& resource, Millis day) const {
  std::optional<std::int64_t> out;
  for (const auto& p : prices) {
    if (p.resource == resource && p.from <= day) out = p.micros_per_hour;  // sorted by from
  }
  if (!out && resource.starts_with("gpu/")) return price_at("gpu", day);
  return out;
}

bool PriceTable::changes_within(Millis from, Millis to) const {
  return std::any_of(prices.begin(), prices.end(), [&](const Price& p) { return p.from > from && p.from < to; });
}

void Cost::add(const PriceTable& t, Millis day, const std::string& gpu_type, std::int64_t gpu_ms,
               std::int64_t cpu_core_ms, std::int64_t memory_mib_s) {
  // The common denominator is 3,600,000 x 1,024 x 10,000: hours of ms, GiB
  // of MiB, cents of micro-units.
  if (gpu_ms > 0 && !gpu_type.empty()) {
    if (auto p = t.price_at("gpu/" + gpu_type, day)) num_ += Wide{gpu_ms} * *p * 1024;
  }
  if (cpu_core_ms > 0) {
    if (auto p = t.price_at("cpu", day)) num_ += Wide{cpu_core_ms} * *p * 1024;
  }
  if (memory_mib_s > 0) {
    if (auto p = t.price_at("memory", day)) num_ += Wide{memory_mib_s} * 1000 * *p;
  }
}

std::int64_t Cost::cents() const {
  const Wide den = Wide{3'600'000} * 1024 * 10'000;
  return static_cast<std::int64_t>((num_ + den / 2) / den);
}

}  // namespace cp
