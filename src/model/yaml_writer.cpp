// JSON -> block-style YAML, for `-o yaml` and for documents shown to people.
// The one rule that matters: what is written reads back as the same JSON
// value. YAML::Emitter quotes what would not parse, but it writes "true",
// "123" or "~" plain, which read back as a bool, a number and null; strings
// like those are double-quoted here.
#include <yaml-cpp/emitter.h>
#include <yaml-cpp/emittermanip.h>
#include <yaml-cpp/null.h>

#include <charconv>
#include <cmath>

#include "model/documents.h"
#include "model/documents_internal.h"

namespace cp {
namespace {

bool reads_back_as_string(std::string_view s) {
  auto v = docs::resolve_plain_scalar(s);
  return v.ok() && v->is_string();
}

// Multi-line text and control characters go double-quoted (escaped): a
// literal block would add or drop the final newline on the way back.
bool needs_escaping(std::string_view s) {
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) return true;
  }
  return false;
}

void emit_string(YAML::Emitter& out, std::string_view s) {
  if (!reads_back_as_string(s) || needs_escaping(s)) out << YAML::DoubleQuoted;
  out << std::string(s);
}

// Shortest text that reads back as the same double, and as a float, not an
// integer: 2.0 is written "2.0", not "2".
std::string format_double(double d) {
  if (std::isnan(d)) return ".nan";
  if (std::isinf(d)) return d > 0 ? ".inf" : "-.inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

void emit(YAML::Emitter& out, const json::value& v) {
  switch (v.kind()) {
    case json::kind::null:
      out << YAML::Null;
      break;
    case json::kind::bool_:
      out << v.get_bool();
      break;
    case json::kind::int64:
      out << static_cast<long long>(v.get_int64());
      break;
    case json::kind::uint64:
      out << static_cast<unsigned long long>(v.get_uint64());
      break;
    case json::kind::double_:
      out << format_double(v.get_double());  // plain: it is a number
      break;
    case json::kind::string:
      emit_string(out, v.get_string());
      break;
    case json::kind::array:
      out << YAML::BeginSeq;
      for (const auto& e : v.get_array()) emit(out, e);
      out << YAML::EndSeq;
      break;
    case json::kind::object:
      out << YAML::BeginMap;
      for (const auto& kv : v.get_object()) {
        out << YAML::Key;
        emit_string(out, kv.key());
        out << YAML::Value;
        emit(out, kv.value());
      }
      out << YAML::EndMap;
      break;
  }
}

}  // namespace

std::string to_yaml(const json::value& v) {
  YAML::Emitter out;
  out.SetIndent(2);
  emit(out, v);
  CP_CHECK(out.good(), "YAML emitter rejected a JSON value");
  std::string text = out.c_str();
  text += '\n';
  return text;
}

}  // namespace cp
