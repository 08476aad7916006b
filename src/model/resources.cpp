#include "model/resources.h"

#include <cctype>
#include <limits>

namespace cp {
namespace {

__extension__ typedef __int128 int128;  // exact products of up to 2^90

bool is_cpu(std::string_view r) { return r == kCpu; }
bool is_memory(std::string_view r) { return r == kMemory || r == "ephemeral-storage"; }

Error bad_quantity(const std::string& path, std::string_view text, std::string en, std::string zh) {
  Error e = errors::invalid(path, "invalid quantity \"" + std::string(text) + "\": " + en,
                            "无效的数量 \"" + std::string(text) + "\"：" + zh);
  e.code = "invalid_quantity";
  return e;
}

// a * b, false on overflow past kMaxQuantity.
bool mul_ok(std::int64_t a, std::int64_t b, std::int64_t& out) {
  if (a != 0 && b > kMaxQuantity / a) return false;
  out = a * b;
  return out <= kMaxQuantity;
}

}  // namespace

Result<std::int64_t> parse_quantity(std::string_view resource, std::string_view text, const std::string& path) {
  std::string_view s = text;
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  if (s.empty()) return bad_quantity(path, text, "empty", "为空");
  if (s.front() == '-') return bad_quantity(path, text, "must not be negative", "不能为负数");
  if (s.front() == '+') s.remove_prefix(1);
  // digits [. digits] [suffix]
  std::size_t i = 0;
  std::int64_t whole = 0;
  std::size_t int_digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
    if (whole > (kMaxQuantity - 9) / 10) return bad_quantity(path, text, "too large", "数值过大");
    whole = whole * 10 + (s[i] - '0');
    ++i;
    ++int_digits;
  }
  std::int64_t frac = 0;
  std::int64_t frac_scale = 1;  // 10^digits
  std::size_t frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      if (frac_digits >= 9) return bad_quantity(path, text, "too many decimal places", "小数位过多");
      frac = frac * 10 + (s[i] - '0');
      frac_scale *= 10;
      ++i;
      ++frac_digits;
    }
    if (frac_digits == 0) return bad_quantity(path, text, "digits expected after '.'", "小数点后缺少数字");
  }
  if (int_digits == 0 && frac_digits == 0) return bad_quantity(path, text, "not a number", "不是数字");
  std::string_view suffix = s.substr(i);

  // multiplier as a fraction num/den of the base unit
  std::int64_t num = 1, den = 1;
  if (is_cpu(resource)) {
    if (suffix.empty()) {
      num = 1000;
    } else if (suffix == "m") {
      num = 1;
    } else {
      return bad_quantity(path, text, "cpu takes a plain number of cores or millicores (\"500m\")",
                          "cpu 应为核数或毫核（如 \"500m\"）");
    }
  } else if (is_memory(resource)) {
    static const std::pair<std::string_view, std::int64_t> kSuffixes[] = {
        {"", 1},
        {"k", 1000},
        {"K", 1000},
        {"M", 1000 * 1000},
        {"G", 1000LL * 1000 * 1000},
        {"T", 1000LL * 1000 * 1000 * 1000},
        {"P", 1000LL * 1000 * 1000 * 1000 * 1000},
        {"Ki", 1LL << 10},
        {"Mi", 1LL << 20},
        {"Gi", 1LL << 30},
        {"Ti", 1LL << 40},
        {"Pi", 1LL << 50},
    };
    bool found = false;
    for (const auto& [suf, mult] : kSuffixes) {
      if (suffix == suf) {
        num = mult;
        found = true;
        break;
      }
    }
    if (!found) {
      return bad_quantity(path, text, "unknown unit (use Ki, Mi, Gi, Ti, k, M, G, T)",
                          "未知单位（可用 Ki、Mi、Gi、Ti、k、M、G、T）");
    }
  } else {
    if (!suffix.empty()) return bad_quantity(path, text, "expected a whole number", "应为整数");
  }
  (void)den;
  std::int64_t whole_part = 0;
  if (!mul_ok(whole, num, whole_part)) return bad_quantity(path, text, "too large", "数值过大");
  // fractional part: frac * num / frac_scale must be whole
  std::int64_t frac_part = 0;
  if (frac != 0) {
    // frac < 10^9 and num <= 2^50: use 128-bit to stay exact.
    int128 prod = static_cast<int128>(frac) * num;
    if (prod % frac_scale != 0) {
      return bad_quantity(path, text,
                          is_cpu(resource) ? "cpu is counted in whole millicores" : "must come out as a whole number",
                          is_cpu(resource) ? "cpu 的最小单位是 1m" : "换算后必须为整数");
    }
    frac_part = static_cast<std::int64_t>(prod / frac_scale);
  }
  std::int64_t total = whole_part + frac_part;
  if (total > kMaxQuantity) return bad_quantity(path, text, "too large", "数值过大");
  return total;
}

std::string format_quantity(std::string_view resource, std::int64_t amount) {
  if (is_cpu(resource)) {
    if (amount % 1000 == 0) return std::to_string(amount / 1000);
    return std::to_string(amount) + "m";
  }
  if (is_memory(resource) && amount != 0) {
    static const std::pair<const char*, std::int64_t> kUnits[] = {
        {"Pi", 1LL << 50}, {"Ti", 1LL << 40}, {"Gi", 1LL << 30}, {"Mi", 1LL << 20}, {"Ki", 1LL << 10}};
    for (const auto& [suf, mult] : kUnits) {
      if (amount % mult == 0) return std::to_string(amount / mult) + suf;
    }
  }
  return std::to_string(amount);
}

Result<Resources> Resources::parse(std::string_view spec) {
  Resources r;
  std::size_t pos = 0;
  while (pos < spec.size()) {
    std::size_t comma = spec.find(',', pos);
    std::string_view item = spec.substr(pos, comma == std::string_view::npos ? std::string_view::npos : comma - pos);
    pos = comma == std::string_view::npos ? spec.size() : comma + 1;
    if (item.empty()) continue;
    std::size_t colon = item.rfind(':');
    if (colon == std::string_view::npos) {
      return errors::invalid("", "expected name:quantity in \"" + std::string(item) + "\"",
                             "应为 名称:数量，实际为 \"" + std::string(item) + "\"");
    }
    std::string name(item.substr(0, colon));
    CP_ASSIGN(auto amount, parse_quantity(name, item.substr(colon + 1), name));
    r.set(name, r.get(name) + amount);
  }
  return r;
}

Resources Resources::parse_or_die(std::string_view spec) {
  auto r = parse(spec);
  CP_CHECK(r.ok(), "bad resources spec in code");
  return std::move(r).value();
}

std::int64_t Resources::get(std::string_view name) const {
  auto it = amounts_.find(name);
  return it == amounts_.end() ? 0 : it->second;
}

void Resources::set(std::string_view name, std::int64_t amount) {
  if (amount == 0) {
    auto it = amounts_.find(name);
    if (it != amounts_.end()) amounts_.erase(it);
    return;
  }
  amounts_.insert_or_assign(std::string(name), amount);
}

std::int64_t Resources::gpus() const {
  std::int64_t n = 0;
  for (auto it = amounts_.lower_bound(kGpuPrefix); it != amounts_.end() && it->first.starts_with(kGpuPrefix); ++it) {
    n += it->second;
  }
  return n;
}

std::string Resources::gpu_type() const {
  auto it = amounts_.lower_bound(kGpuPrefix);
  if (it != amounts_.end() && it->first.starts_with(kGpuPrefix)) return it->first.substr(kGpuPrefix.size());
  return "";
}

Resources& Resources::operator+=(const Resources& o) {
  // Amounts sit in one array that set() may move: never walk it while setting.
  if (&o == this) return *this += Resources(o);
  for (const auto& [k, v] : o.amounts_) {
    std::int64_t sum = 0;
    CP_CHECK(!__builtin_add_overflow(get(k), v, &sum), "resource overflow");
    set(k, sum);
  }
  return *this;
}

Resources& Resources::operator-=(const Resources& o) {
  if (&o == this) return *this -= Resources(o);
  for (const auto& [k, v] : o.amounts_) {
    std::int64_t diff = 0;
    CP_CHECK(!__builtin_sub_overflow(get(k), v, &diff), "resource overflow");
    set(k, diff);
  }
  return *this;
}

Resources Resources::times(std::int64_t n) const {
  Resources r;
  for (const auto& [k, v] : amounts_) {
    std::int64_t p = 0;
    CP_CHECK(!__builtin_mul_overflow(v, n, &p), "resource overflow");
    r.set(k, p);
  }
  return r;
}

bool Resources::fits_in(const Resources& limit) const {
  for (const auto& [k, v] : amounts_) {
    if (v > limit.get(k)) return false;
  }
  return true;
}

std::vector<std::string> Resources::exceeding(const Resources& limit) const {
  std::vector<std::string> out;
  for (const auto& [k, v] : amounts_) {
    if (v > limit.get(k)) out.push_back(k);
  }
  return out;
}

bool Resources::any_negative() const {
  for (const auto& [k, v] : amounts_) {
    if (v < 0) return true;
  }
  return false;
}

std::string Resources::to_string() const {
  std::string s;
  for (const auto& [k, v] : amounts_) {
    if (!s.empty()) s += ", ";
    s += k + "=" + format_quantity(k, v);
  }
  return s;
}

void cp_to_json(json::value& out, const Resources& r) {
  json::object obj;
  for (const auto& [k, v] : r.amounts()) obj[k] = format_quantity(k, v);
  out = std::move(obj);
}

Status cp_from_json(const json::value& in, Resources& out, const DecodeContext& ctx) {
  if (in.is_null()) {
    out = Resources();
    return {};
  }
  if (!in.is_object()) return type_error(ctx, "map of resource quantities");
  Resources r;
  for (const auto& kv : in.get_object()) {
    std::string name(kv.key());
    auto c = ctx.at(name);
    std::string text;
    if (kv.value().is_string()) {
      text = std::string(kv.value().get_string());
    } else if (kv.value().is_int64()) {
      text = std::to_string(kv.value().get_int64());
    } else if (kv.value().is_uint64()) {
      text = std::to_string(kv.value().get_uint64());
    } else if (kv.value().is_double()) {
      char buf[64];
      auto res = std::to_chars(buf, buf + sizeof buf, kv.value().get_double());
      text.assign(buf, res.ptr);
    } else {
      return type_error(c, "quantity");
    }
    CP_ASSIGN(auto amount, parse_quantity(name, text, c.path()));
    r.set(name, amount);
  }
  out = std::move(r);
  return {};
}

}  // namespace cp
