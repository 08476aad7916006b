#include "cli/format.h"

#include <algorithm>
#include <cstdint>

#include "common/http_client.h"

namespace cp::cli {

std::string format_age(Millis now, Millis then) {
  if (then == 0) return "-";
  Millis secs = now > then ? (now - then) / 1000 : 0;
  if (secs < 60) return std::to_string(secs) + "s";
  if (secs < 60 * 60) return std::to_string(secs / 60) + "m";
  if (secs < 24 * 60 * 60) return std::to_string(secs / 3600) + "h";
  return std::to_string(secs / 86400) + "d";
}

std::string format_time_short(Millis t) {
  if (t == 0) return "-";
  std::string s = format_time(t);  // "2026-01-01T00:00:00.000Z"
  return s.size() > 19 ? s.substr(0, 19) + "Z" : s;
}

namespace {

// Decodes one UTF-8 sequence at s[i]; returns its length (1 for a malformed
// byte, which then counts as one narrow column).
std::size_t decode_utf8(std::string_view s, std::size_t i, char32_t& cp) {
  auto b = static_cast<unsigned char>(s[i]);
  std::size_t len = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || i + len > s.size()) {
    cp = b;
    return 1;
  }
  cp = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
  for (std::size_t k = 1; k < len; ++k) {
    auto c = static_cast<unsigned char>(s[i + k]);
    if ((c >> 6) != 0x2) {
      cp = b;
      return 1;
    }
    cp = (cp << 6) | (c & 0x3F);
  }
  return len;
}

bool is_wide(char32_t c) {
  return (c >= 0x1100 && c <= 0x115F) || (c >= 0x2E80 && c <= 0xA4CF && c != 0x303F) ||
         (c >= 0xAC00 && c <= 0xD7A3) || (c >= 0xF900 && c <= 0xFAFF) || (c >= 0xFE30 && c <= 0xFE4F) ||
         (c >= 0xFF00 && c <= 0xFF60) || (c >= 0xFFE0 && c <= 0xFFE6) || (c >= 0x1F300 && c <= 0x1F64F) ||
         (c >= 0x20000 && c <= 0x3FFFD);
}

std::string one_line(std::string_view s) {
  std::string out(s);
  std::replace_if(out.begin(), out.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  return out;
}

std::string pad(const std::string& s, std::size_t width) {
  std::size_t w = display_width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

}  // namespace

std::size_t display_width(std::string_view s) {
  std::size_t width = 0;
  for (std::size_t i = 0; i < s.size();) {
    char32_t c = 0;
    i += decode_utf8(s, i, c);
    width += is_wide(c) ? 2 : 1;
  }
  return width;
}

std::string truncate(std::string_view s, std::size_t max_width) {
  std::string line = one_line(s);
  if (display_width(line) <= max_width) return line;
  constexpr std::string_view kEllipsis = "...";
  std::size_t budget = max_width > kEllipsis.size() ? max_width - kEllipsis.size() : 0;
  std::size_t width = 0;
  std::size_t i = 0;
  while (i < line.size()) {
    char32_t c = 0;
    std::size_t len = decode_utf8(line, i, c);
    std::size_t w = is_wide(c) ? 2 : 1;
    if (width + w > budget) break;
    width += w;
    i += len;
  }
  return line.substr(0, i) + std::string(kEllipsis.substr(0, std::min(kEllipsis.size(), max_width)));
}

void Table::add_row(std::vector<std::string> cells) {
  for (auto& c : cells) c = one_line(c);
  rows_.push_back(std::move(cells));
}

std::string Table::render() const {
  std::vector<std::size_t> widths(headers_.size(), 0);
  for (std::size_t c = 0; c < headers_.size(); ++c) widths[c] = display_width(headers_[c]);
  for (const auto& row : rows_) {
    for (std::size_t c = 0; c < row.size() && c < widths.size(); ++c) {
      widths[c] = std::max(widths[c], display_width(row[c]));
    }
  }
  auto render_row = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (std::size_t c = 0; c < widths.size(); ++c) {
      const std::string empty;
      const std::string& cell = c < cells.size() ? cells[c] : empty;
      if (c + 1 == widths.size()) {
        line += cell;
      } else {
        line += pad(cell, widths[c]) + "   ";
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    return line + "\n";
  };
  std::string out = render_row(headers_);
  for (const auto& row : rows_) out += render_row(row);
  return out;
}

void Details::add(std::string key, std::string value) { lines_.emplace_back(std::move(key), std::move(value)); }

std::string Details::render() const {
  std::size_t width = 0;
  for (const auto& [k, v] : lines_) width = std::max(width, display_width(k) + 1);
  std::string out;
  for (const auto& [k, v] : lines_) {
    std::string line = pad(k + ":", width) + "  " + v;
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

namespace {

void pretty_into(std::string& out, const json::value& v, int indent) {
  auto newline = [&](int level) {
    out += '\n';
    out.append(static_cast<std::size_t>(level) * 2, ' ');
  };
  if (v.is_object()) {
    const auto& obj = v.get_object();
    if (obj.empty()) {
      out += "{}";
      return;
    }
    out += '{';
    bool first = true;
    for (const auto& kv : obj) {
      if (!first) out += ',';
      first = false;
      newline(indent + 1);
      out += json::serialize(json::string(kv.key()));
      out += ": ";
      pretty_into(out, kv.value(), indent + 1);
    }
    newline(indent);
    out += '}';
  } else if (v.is_array()) {
    const auto& arr = v.get_array();
    if (arr.empty()) {
      out += "[]";
      return;
    }
    out += '[';
    bool first = true;
    for (const auto& e : arr) {
      if (!first) out += ',';
      first = false;
      newline(indent + 1);
      pretty_into(out, e, indent + 1);
    }
    newline(indent);
    out += ']';
  } else {
    out += json::serialize(v);
  }
}

}  // namespace

std::string pretty_json(const json::value& v) {
  std::string out;
  pretty_into(out, v, 0);
  out += '\n';
  return out;
}

int exit_code_for_http_status(long status) { return status >= 200 && status < 300 ? 0 : 1; }

const json::value* member(const json::value& v, std::string_view key) {
  if (!v.is_object()) return nullptr;
  return v.get_object().if_contains(key);
}

const json::value* member_path(const json::value& v, std::string_view path) {
  const json::value* cur = &v;
  while (cur != nullptr && !path.empty()) {
    auto dot = path.find('.');
    cur = member(*cur, path.substr(0, dot));
    path = dot == std::string_view::npos ? std::string_view{} : path.substr(dot + 1);
  }
  return cur;
}

std::string scalar_text(const json::value* v) {
  if (v == nullptr || v->is_null()) return "";
  if (v->is_string()) return std::string(v->get_string());
  if (v->is_int64()) return std::to_string(v->get_int64());
  if (v->is_uint64()) return std::to_string(v->get_uint64());
  if (v->is_bool()) return v->get_bool() ? "true" : "false";
  return json::serialize(*v);
}

std::string str_at(const json::value& v, std::string_view path) { return scalar_text(member_path(v, path)); }

Millis millis_at(const json::value& v, std::string_view path) {
  const json::value* m = member_path(v, path);
  if (m == nullptr) return 0;
  if (m->is_int64()) return m->get_int64();
  if (m->is_uint64()) return static_cast<Millis>(m->get_uint64());
  if (m->is_double()) return static_cast<Millis>(m->get_double());
  return 0;
}

std::string join_labels(const json::value* labels) {
  if (labels == nullptr || !labels->is_object()) return "";
  std::string out;
  for (const auto& kv : labels->get_object()) {
    if (!out.empty()) out += ',';
    out += std::string(kv.key()) + "=" + scalar_text(&kv.value());
  }
  return out;
}

std::string join_strings(const json::value* list, std::string_view sep) {
  if (list == nullptr || !list->is_array()) return "";
  std::string out;
  for (const auto& e : list->get_array()) {
    if (!out.empty()) out += sep;
    out += scalar_text(&e);
  }
  return out;
}

std::string gpu_summary(const json::value* resources) {
  std::string out;
  if (resources != nullptr && resources->is_object()) {
    for (const auto& kv : resources->get_object()) {
      std::string_view key = kv.key();
      if (!key.starts_with("gpu/")) continue;
      std::string count = scalar_text(&kv.value());
      if (count.empty() || count == "0") continue;
      if (!out.empty()) out += ", ";
      out += count + "x " + std::string(key.substr(4));
    }
  }
  return out.empty() ? "-" : out;
}

std::string quota_summary(const json::value& group_document) {
  const json::value* quota = member_path(group_document, "spec.quota");
  if (quota == nullptr || !quota->is_object()) return "";
  const json::value* status = member(group_document, "status");
  const json::value* used = status != nullptr ? member(*status, "used") : nullptr;
  bool show_used = status != nullptr && status->is_object();
  std::string out;
  for (const auto& kv : quota->get_object()) {
    const json::value& entry = kv.value();
    // A bare amount ("cpu: 128") reads as the guaranteed amount.
    std::string guaranteed = entry.is_object() ? scalar_text(member(entry, "guaranteed")) : scalar_text(&entry);
    std::string max = entry.is_object() ? scalar_text(member(entry, "max")) : "";
    if (guaranteed.empty()) guaranteed = "0";
    if (!out.empty()) out += ", ";
    out += std::string(kv.key()) + " ";
    if (show_used) {
      std::string u = used != nullptr ? scalar_text(member(*used, kv.key())) : "";
      out += (u.empty() ? "0" : u) + "/";
    }
    out += guaranteed;
    if (!max.empty()) out += " (max " + max + ")";
  }
  return out;
}

bool is_chinese(std::string_view accept_language) {
  while (!accept_language.empty() && accept_language.front() == ' ') accept_language.remove_prefix(1);
  return accept_language.size() >= 2 && (accept_language[0] == 'z' || accept_language[0] == 'Z') &&
         (accept_language[1] == 'h' || accept_language[1] == 'H');
}

std::string localized_message(const json::value& reason, std::string_view accept_language) {
  std::string en = str_at(reason, "message");
  std::string zh = str_at(reason, "message_zh");
  if (is_chinese(accept_language)) return zh.empty() ? en : zh;
  return en.empty() ? zh : en;
}

std::string seconds_as_hours(std::int64_t seconds) {
  bool negative = seconds < 0;
  std::int64_t abs = negative ? -seconds : seconds;
  std::int64_t tenths = (abs * 10 + 1800) / 3600;
  return std::string(negative && tenths != 0 ? "-" : "") + std::to_string(tenths / 10) + "." +
         std::to_string(tenths % 10);
}

Result<json::object> parse_label_args(const std::vector<std::string>& args, bool allow_removal) {
  json::object labels;
  for (const auto& arg : args) {
    auto eq = arg.find('=');
    std::string key;
    std::string value;
    if (eq != std::string::npos) {
      key = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      if (value.empty() && !allow_removal) key.clear();
    } else if (allow_removal && arg.size() > 1 && arg.back() == '-') {
      key = arg.substr(0, arg.size() - 1);
    }
    if (key.empty()) {
      return allow_removal ? errors::invalid("", "\"" + arg + "\" is not k=v (or k- to remove a label)",
                                             "\"" + arg + "\" 不是 k=v 形式（或用 k- 删除标签）")
                           : errors::invalid("", "\"" + arg + "\" is not k=v", "\"" + arg + "\" 不是 k=v 形式");
    }
    labels[key] = value;
  }
  return labels;
}

std::string path_segment(std::string_view s) { return url_encode(s); }

bool is_valid_time_arg(std::string_view s) {
  if (s.empty()) return false;
  if (std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return s.size() <= 15;
  Millis t = 0;
  return parse_time(s, t);
}

std::optional<std::int64_t> parse_duration_arg(std::string_view text) {
  std::int64_t total = 0;
  std::int64_t n = -1;
  for (char c : text) {
    if (c >= '0' && c <= '9') {
      n = (n < 0 ? 0 : n) * 10 + (c - '0');
      if (n > 100'000'000) return std::nullopt;
      continue;
    }
    std::int64_t unit = c == 's' ? 1 : c == 'm' ? 60 : c == 'h' ? 3600 : c == 'd' ? 86400 : 0;
    if (unit == 0 || n < 0) return std::nullopt;
    total += n * unit;
    n = -1;
  }
  if (n >= 0 || total <= 0) return std::nullopt;  // a number without its unit
  return total;
}

}  // namespace cp::cli
