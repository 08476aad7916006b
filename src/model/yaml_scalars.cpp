// YAML 1.2 core schema, the tag resolution of plain scalars
// (https://yaml.org/spec/1.2.2/#1032-tag-resolution). yaml-cpp leaves this to
// its callers; the reader uses it to type values and the writer to know
// which strings must be quoted to read back as strings.
#include <charconv>
#include <cmath>
#include <limits>

#include "model/documents_internal.h"

namespace cp::docs {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_hex_digit(char c) { return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

bool all_of(std::string_view s, bool (*pred)(char)) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!pred(c)) return false;
  }
  return true;
}

// [-+]? ( \. [0-9]+ | [0-9]+ ( \. [0-9]* )? ) ( [eE] [-+]? [0-9]+ )?
bool is_float_syntax(std::string_view s) {
  std::size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  std::size_t int_digits = 0;
  while (i < s.size() && is_digit(s[i])) ++i, ++int_digits;
  std::size_t frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && is_digit(s[i])) ++i, ++frac_digits;
  }
  if (int_digits == 0 && frac_digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    std::size_t exp_digits = 0;
    while (i < s.size() && is_digit(s[i])) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  return i == s.size();
}

Error scalar_error(std::string_view text, const std::string& en, const std::string& zh) {
  return Error{"malformed_yaml", 400, "\"" + std::string(text) + "\" " + en, "\"" + std::string(text) + "\" " + zh, {}};
}

Result<json::value> parse_integer(std::string_view text, std::string_view digits, int base, bool negative) {
  // Accumulate as unsigned so that -9223372036854775808 fits.
  std::uint64_t magnitude = 0;
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), magnitude, base);
  constexpr auto kMaxPositive = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  if (ec == std::errc::result_out_of_range || magnitude > kMaxPositive + (negative ? 1 : 0)) {
    return scalar_error(text, "is too large for a 64-bit integer; quote it to keep it as text",
                        "超出 64 位整数范围；如需作为文本，请加引号");
  }
  if (ec != std::errc() || ptr != digits.data() + digits.size()) {
    return scalar_error(text, "is not a number", "不是数字");
  }
  if (negative) return json::value(static_cast<std::int64_t>(0 - magnitude));
  return json::value(static_cast<std::int64_t>(magnitude));
}

}  // namespace

Result<json::value> resolve_plain_scalar(std::string_view s) {
  if (s.empty() || s == "~" || s == "null" || s == "Null" || s == "NULL") return json::value(nullptr);
  if (s == "true" || s == "True" || s == "TRUE") return json::value(true);
  if (s == "false" || s == "False" || s == "FALSE") return json::value(false);

  // Integers: decimal with an optional sign, 0o octal, 0x hex.
  if (s.size() > 2 && s[0] == '0' && s[1] == 'o' && all_of(s.substr(2), [](char c) { return c >= '0' && c <= '7'; })) {
    return parse_integer(s, s.substr(2), 8, false);
  }
  if (s.size() > 2 && s[0] == '0' && s[1] == 'x' && all_of(s.substr(2), is_hex_digit)) {
    return parse_integer(s, s.substr(2), 16, false);
  }
  {
    bool negative = s[0] == '-';
    std::string_view digits = (s[0] == '-' || s[0] == '+') ? s.substr(1) : s;
    if (all_of(digits, is_digit)) return parse_integer(s, digits, 10, negative);
  }

  // Infinities and NaN are floats to YAML but have no JSON form.
  std::string_view unsigned_s = (s[0] == '-' || s[0] == '+') ? s.substr(1) : s;
  if (unsigned_s == ".inf" || unsigned_s == ".Inf" || unsigned_s == ".INF" || s == ".nan" || s == ".NaN" ||
      s == ".NAN") {
    return scalar_error(s, "is not a finite number; quote it to keep it as text", "不是有限数值；如需作为文本，请加引号");
  }
  if (is_float_syntax(s)) {
    // from_chars takes no leading '+'.
    std::string_view body = s[0] == '+' ? s.substr(1) : s;
    double d = 0;
    auto [ptr, ec] = std::from_chars(body.data(), body.data() + body.size(), d);
    if (ec == std::errc::result_out_of_range || !std::isfinite(d)) {
      // Overflow only: an underflow to zero (1e-400) is still a number, but
      // from_chars reports both the same way.
      bool tiny = false;
      if (auto e = body.find_first_of("eE"); e != std::string_view::npos) tiny = body[e + 1] == '-';
      if (!tiny) {
        return scalar_error(s, "is out of range for a number; quote it to keep it as text",
                            "超出数值范围；如需作为文本，请加引号");
      }
      d = 0;
    } else if (ec != std::errc() || ptr != body.data() + body.size()) {
      return scalar_error(s, "is not a number", "不是数字");
    }
    return json::value(d);
  }
  return json::value(json::string(s));
}

}  // namespace cp::docs
