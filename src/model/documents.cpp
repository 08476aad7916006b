// The document envelope and the small value types that the document kinds
// share. Each kind lives in its own file: resource_group_document.cpp,
// project_group_document.cpp, priority_class_document.cpp,
// pipeline_document.cpp.
#include "model/documents.h"

#include <charconv>

#include "model/documents_internal.h"

namespace cp::docs {
namespace {

// Durations past a year are surely a mistake, and the bound keeps
// arithmetic on them (now + grace) far from overflow.
constexpr std::int64_t kMaxDurationS = 366LL * 24 * 3600;

Error duration_error(const std::string& path, std::string_view text) {
  return errors::invalid(path,
                         "invalid duration \"" + std::string(text) +
                             "\": write whole seconds, minutes or hours such as \"30s\", \"5m\", \"1h30m\"",
                         "无效的时长 \"" + std::string(text) + "\"：应为整数秒、分或小时，如 \"30s\"、\"5m\"、\"1h30m\"");
}

std::string number_text(const json::value& v) {
  if (v.is_int64()) return std::to_string(v.get_int64());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v.get_double());
  return std::string(buf, res.ptr);
}

}  // namespace

Result<Envelope> open_document(const json::value& doc, std::string_view kind) {
  if (!doc.is_object()) return type_error(DecodeContext{}, "document object");
  const json::object& obj = doc.get_object();
  for (const auto& kv : obj) {
    std::string_view k = kv.key();
    if (k != "apiVersion" && k != "kind" && k != "metadata" && k != "spec" && k != "status") {
      Error e{"unknown_field", 400, std::string(k) + ": unknown field", std::string(k) + "：未知字段", {}};
      e.details["field"] = k;
      return e;
    }
  }
  const json::value* api = obj.if_contains("apiVersion");
  if (api == nullptr || !api->is_string() || api->get_string() != kApiVersion) {
    std::string got = api == nullptr ? "nothing" : api->is_string() ? "\"" + std::string(api->get_string()) + "\"" : json_kind_name(*api);
    return errors::invalid("apiVersion", "must be \"cubeplane/v1\", got " + got,
                           "必须为 \"cubeplane/v1\"，实际为 " + got);
  }
  const json::value* k = obj.if_contains("kind");
  if (k == nullptr || !k->is_string() || k->get_string() != kind) {
    std::string got = k == nullptr ? "nothing" : k->is_string() ? "\"" + std::string(k->get_string()) + "\"" : json_kind_name(*k);
    return errors::invalid("kind", "must be \"" + std::string(kind) + "\", got " + got,
                           "必须为 \"" + std::string(kind) + "\"，实际为 " + got);
  }
  Envelope env;
  for (std::string_view part : {"metadata", "spec"}) {
    const json::value* v = obj.if_contains(part);
    if (v == nullptr || v->is_null()) return errors::invalid(std::string(part), "is required", "为必填项");
    if (!v->is_object()) return type_error(DecodeContext{std::string(part)}, "object");
    (part == "metadata" ? env.metadata : env.spec) = v->get_object();
  }
  return env;
}

json::object make_document(std::string_view kind, json::object metadata, json::object spec) {
  json::object doc;
  doc["apiVersion"] = kApiVersion;
  doc["kind"] = kind;
  doc["metadata"] = std::move(metadata);
  doc["spec"] = std::move(spec);
  return doc;
}

Result<std::string> object_name(const json::object& metadata) {
  ObjectMeta meta;
  CP_TRY(decode_strict(metadata, meta, "metadata"));
  CP_TRY(validate_name(meta.name, "metadata.name"));
  return meta.name;
}

json::object object_meta(const std::string& name, Millis created_at, std::optional<Millis> updated_at) {
  json::object meta;
  meta["name"] = name;
  meta["created_at"] = created_at;
  if (updated_at) meta["updated_at"] = *updated_at;
  return meta;
}

// --------------------------------------------------------------- QuantityText

void cp_to_json(json::value& out, const QuantityText& q) { out = json::string(q.text); }

Status cp_from_json(const json::value& in, QuantityText& out, const DecodeContext& ctx) {
  if (in.is_string()) {
    out.text = std::string(in.get_string());
  } else if (in.is_number()) {
    out.text = number_text(in);
  } else {
    return type_error(ctx, "quantity such as \"4Gi\" or 8");
  }
  return {};
}

// ------------------------------------------------------------------- Duration

Result<std::int64_t> parse_duration(std::string_view text, const std::string& path) {
  // One or more <digits><unit>, units descending: "1h30m", "90s".
  std::string_view s = text;
  if (s.empty()) return duration_error(path, text);
  std::int64_t total = 0;
  int last_unit = 4;  // h=3, m=2, s=1; each must be smaller than the one before
  while (!s.empty()) {
    std::int64_t n = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec != std::errc() || ptr == s.data() || ptr == s.data() + s.size() || n < 0) {
      return duration_error(path, text);
    }
    char unit = *ptr;
    int rank = unit == 'h' ? 3 : unit == 'm' ? 2 : unit == 's' ? 1 : 0;
    if (rank == 0 || rank >= last_unit) return duration_error(path, text);
    last_unit = rank;
    std::int64_t mult = rank == 3 ? 3600 : rank == 2 ? 60 : 1;
    if (n > kMaxDurationS / mult || total + n * mult > kMaxDurationS) {
      return errors::invalid(path, "duration \"" + std::string(text) + "\" is longer than a year",
                             "时长 \"" + std::string(text) + "\" 超过一年");
    }
    total += n * mult;
    s = std::string_view(ptr + 1, static_cast<std::size_t>(s.data() + s.size() - (ptr + 1)));
  }
  return total;
}

std::string format_duration(std::int64_t seconds) {
  if (seconds == 0) return "0s";
  std::string out;
  if (seconds >= 3600) out += std::to_string(seconds / 3600) + "h";
  if (seconds % 3600 >= 60) out += std::to_string(seconds % 3600 / 60) + "m";
  if (seconds % 60 != 0) out += std::to_string(seconds % 60) + "s";
  return out;
}

void cp_to_json(json::value& out, const Duration& d) { out = json::string(format_duration(d.seconds)); }

Status cp_from_json(const json::value& in, Duration& out, const DecodeContext& ctx) {
  if (!in.is_string()) return type_error(ctx, "duration such as \"30s\" or \"5m\"");
  CP_ASSIGN(out.seconds, parse_duration(in.get_string(), ctx.path()));
  return {};
}

// ----------------------------------------------------------------- ScalarText

Status cp_from_json(const json::value& in, ScalarText& out, const DecodeContext& ctx) {
  if (in.is_string()) {
    out.text = std::string(in.get_string());
  } else if (in.is_bool()) {
    out.text = in.get_bool() ? "true" : "false";
  } else if (in.is_number()) {
    out.text = number_text(in);
  } else {
    return type_error(ctx, "string");
  }
  return {};
}

std::map<std::string, std::string> to_string_map(const TextMap& m) {
  std::map<std::string, std::string> out;
  for (const auto& [k, v] : m) out.emplace(k, v.text);
  return out;
}

}  // namespace cp::docs
