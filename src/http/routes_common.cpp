#include "http/routes_common.h"

#include <boost/describe/enumerators.hpp>
#include <boost/mp11/algorithm.hpp>

#include <charconv>

#include "model/documents.h"

namespace cp::http::detail {
namespace {

bool is_yaml_type(const std::string& mt) {
  return mt == "application/yaml" || mt == "text/yaml" || mt == "application/x-yaml" || mt == "text/x-yaml";
}

bool is_json_type(const std::string& mt) {
  return mt == "application/json" || (mt.starts_with("application/") && mt.ends_with("+json"));
}

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

Error bad_param(const std::string& name, const std::string& en, const std::string& zh) {
  Error e = errors::invalid(name, en, zh);
  e.details["parameter"] = name;
  return e;
}

}  // namespace

std::string bearer_token(const Request& req) {
  std::string h = req.header("authorization");
  auto sp = h.find(' ');
  if (sp == std::string::npos) return "";
  std::string scheme = h.substr(0, sp);
  for (auto& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (scheme != "bearer") return "";
  auto start = h.find_first_not_of(' ', sp);
  if (start == std::string::npos) return "";
  auto end = h.find_last_not_of(' ');
  return h.substr(start, end - start + 1);
}

Response to_response(Result<Response> r, const Request& req) {
  if (r.ok()) return std::move(r).value();
  auto resp = error_response(r.error(), req);
  if (r.error().status == 401) resp.headers.emplace_back("WWW-Authenticate", "Bearer realm=\"cubeplane\"");
  return resp;
}

Handler public_route(PlainHandler fn) {
  return [fn = std::move(fn)](Request& req) { return to_response(fn(req), req); };
}

Handler user_route(ControlPlane& cp, PrincipalHandler fn) {
  return [&cp, fn = std::move(fn)](Request& req) {
    auto p = cp.authenticate(bearer_token(req));
    if (!p.ok()) return to_response(p.error(), req);
    return to_response(fn(req, *p), req);
  };
}

Handler agent_route(ControlPlane& cp, PrincipalHandler fn) {
  return [&cp, fn = std::move(fn)](Request& req) {
    auto p = cp.authenticate_agent(bearer_token(req));
    if (!p.ok()) return to_response(p.error(), req);
    return to_response(fn(req, *p), req);
  };
}

Result<json::value> json_body(const Request& req, bool allow_empty, json::storage_ptr storage) {
  auto mt = req.media_type();
  if (is_yaml_type(mt)) {
    Error e{"unsupported_media_type", 415, "this call takes JSON (application/json), not " + mt,
            "此接口只接受 JSON（application/json），不接受 " + mt, {}};
    e.details["content_type"] = mt;
    return e;
  }
  if (blank(req.body)) {
    if (allow_empty) return json::value(json::object{});
    return errors::invalid("", "a JSON body is required", "需要 JSON 请求体");
  }
  return parse_json(req.body, 64, std::move(storage));
}

Result<json::value> document_body(const Request& req) {
  if (blank(req.body)) return errors::invalid("", "a document (YAML or JSON) is required", "需要文档（YAML 或 JSON）");
  if (is_json_type(req.media_type())) return parse_json(req.body, 64);
  return parse_document(req.body);
}

Result<std::int64_t> int_param(const Request& req, const std::string& name, std::int64_t fallback, std::int64_t min,
                               std::int64_t max) {
  auto it = req.query.find(name);
  if (it == req.query.end() || it->second.empty()) return fallback;
  const std::string& s = it->second;
  std::int64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) {
    return bad_param(name, "must be an integer, got \"" + s + "\"", "应为整数，实际为 \"" + s + "\"");
  }
  if (v < min || v > max) {
    std::string range = std::to_string(min) + ".." + std::to_string(max);
    return bad_param(name, "must be in " + range + ", got " + s, "取值范围为 " + range + "，实际为 " + s);
  }
  return v;
}

Result<bool> bool_param(const Request& req, const std::string& name, bool fallback) {
  auto it = req.query.find(name);
  if (it == req.query.end()) return fallback;
  const std::string& s = it->second;
  if (s.empty() || s == "true" || s == "1" || s == "yes") return true;  // "?follow" alone means yes
  if (s == "false" || s == "0" || s == "no") return false;
  return bad_param(name, "must be true or false, got \"" + s + "\"", "应为 true 或 false，实际为 \"" + s + "\"");
}

Result<int> limit_param(const Request& req, int fallback) {
  CP_ASSIGN(auto v, int_param(req, "limit", fallback, 1, 1000));
  return static_cast<int>(v);
}

Result<std::set<TaskState>> states_param(const Request& req) {
  std::set<TaskState> out;
  auto it = req.query.find("state");
  if (it == req.query.end() || it->second.empty()) return out;
  std::string_view rest = it->second;
  while (!rest.empty()) {
    auto comma = rest.find(',');
    std::string name(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    TaskState st{};
    if (!boost::describe::enum_from_string(name.c_str(), st)) {
      std::string allowed;
      boost::mp11::mp_for_each<boost::describe::describe_enumerators<TaskState>>([&](auto d) {
        if (!allowed.empty()) allowed += ", ";
        allowed += d.name;
      });
      Error e = bad_param("state", "unknown task state \"" + name + "\" (one of: " + allowed + ")",
                          "未知的任务状态 \"" + name + "\"（可选：" + allowed + "）");
      e.details["allowed"] = allowed;
      return e;
    }
    out.insert(st);
  }
  return out;
}

Result<Millis> time_param(const Request& req, const std::string& name, Millis fallback) {
  auto it = req.query.find(name);
  if (it == req.query.end() || it->second.empty()) return fallback;
  Millis t = 0;
  if (!parse_time(it->second, t)) {
    return bad_param(name, "expected a date (2026-01-31) or an RFC 3339 time, got \"" + it->second + "\"",
                     "应为日期（2026-01-31）或 RFC 3339 时间，实际为 \"" + it->second + "\"");
  }
  return t;
}

Response list_response(json::array items, const std::string& next_cursor) {
  json::object o;
  o["items"] = std::move(items);
  o["next_cursor"] = next_cursor;
  return json_response(200, o);
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start <= s.size()) {
    auto comma = s.find(',', start);
    auto piece = s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!piece.empty()) out.push_back(piece);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace cp::http::detail
