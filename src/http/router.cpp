#include "http/router.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <set>

#include "common/log.h"

namespace cp::http {
namespace {

std::vector<std::string> split_path(std::string_view path) {
  std::vector<std::string> out;
  if (path.empty() || path.front() != '/') return out;
  path.remove_prefix(1);
  // "/a/b/" is routed as "/a/b": a trailing slash is forgiven.
  if (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.empty()) return out;
  std::size_t start = 0;
  for (;;) {
    auto slash = path.find('/', start);
    out.emplace_back(path.substr(start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

bool is_param(const std::string& seg) { return seg.size() > 2 && seg.front() == '{' && seg.back() == '}'; }

// Matches and returns the specificity (one bit per literal segment, most
// significant first) or nullopt.
std::optional<std::vector<bool>> match(const Route& r, const std::vector<std::string>& segs) {
  if (r.segments.size() != segs.size()) return std::nullopt;
  std::vector<bool> literal(segs.size());
  for (std::size_t i = 0; i < segs.size(); ++i) {
    if (is_param(r.segments[i])) {
      if (segs[i].empty()) return std::nullopt;
      literal[i] = false;
    } else if (r.segments[i] != segs[i]) {
      return std::nullopt;
    } else {
      literal[i] = true;
    }
  }
  return literal;
}

// Runs fn; an exception is a bug somewhere below, answered 500 and logged,
// never allowed to take down the I/O thread.
template <class Fn>
Status guarded(const Request& req, const std::string& what, Fn&& fn) {
  try {
    fn();
    return {};
  } catch (const std::exception& ex) {
    spdlog::error("{} {} ({}) threw: {}", req.method, req.path, what, ex.what());
    return errors::internal(std::string("unexpected failure: ") + ex.what());
  } catch (...) {
    spdlog::error("{} {} ({}) threw a non-standard exception", req.method, req.path, what);
    return errors::internal("unexpected failure");
  }
}

}  // namespace

std::vector<std::string> Route::param_names() const {
  std::vector<std::string> out;
  for (const auto& s : segments) {
    if (is_param(s)) out.push_back(s.substr(1, s.size() - 2));
  }
  return out;
}

void Router::add(std::string method, std::string pattern, RouteDoc doc, Handler handler) {
  CP_CHECK(!pattern.empty() && pattern.front() == '/', "route pattern must start with /");
  CP_CHECK(handler != nullptr, "route without handler");
  Route r;
  r.method = std::move(method);
  r.segments = split_path(pattern);
  std::set<std::string> names;
  for (const auto& s : r.segments) {
    CP_CHECK(!s.empty(), "empty segment in route pattern");
    if (s.find('{') != std::string::npos || s.find('}') != std::string::npos) {
      CP_CHECK(is_param(s), "a path parameter must be a whole segment");
      CP_CHECK(names.insert(s).second, "duplicate path parameter");
    }
  }
  for (const auto& other : routes_) {
    CP_CHECK(!(other.method == r.method && other.segments == r.segments), "duplicate route");
  }
  r.pattern = std::move(pattern);
  r.doc = std::move(doc);
  r.handler = std::move(handler);
  routes_.push_back(std::move(r));
}

Response Router::handle(Request& req) const {
  auto segs = split_path(req.path);
  const std::string method = req.method == "HEAD" ? "GET" : req.method;
  const Route* best = nullptr;
  std::vector<bool> best_key;
  std::set<std::string> allowed;
  for (const auto& r : routes_) {
    auto key = match(r, segs);
    if (!key) continue;
    allowed.insert(r.method);
    if (r.method != method) continue;
    if (best == nullptr || *key > best_key) {
      best = &r;
      best_key = std::move(*key);
    }
  }
  if (best == nullptr && allowed.empty() && fallback_) {
    std::optional<Response> r;
    Status st = guarded(req, "fallback", [&] { r = fallback_(req); });
    if (!st.ok()) return error_response(st.error(), req);
    if (r) return std::move(*r);
  }
  if (best == nullptr) {
    if (!allowed.empty()) {
      if (allowed.count("GET")) allowed.insert("HEAD");
      std::string allow;
      for (const auto& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
      Error e{"method_not_allowed", 405, "method " + req.method + " is not allowed on " + req.path,
              "路径 " + req.path + " 不支持方法 " + req.method, {}};
      e.details["allowed"] = allow;
      auto resp = error_response(e, req);
      resp.headers.emplace_back("Allow", allow);
      return resp;
    }
    Error e{"not_found", 404, "no such path: " + req.path, "路径不存在：" + req.path, {}};
    e.details["path"] = req.path;
    return error_response(e, req);
  }
  req.route = best->pattern;
  req.params.clear();
  for (std::size_t i = 0; i < segs.size(); ++i) {
    const auto& s = best->segments[i];
    if (is_param(s)) req.params[s.substr(1, s.size() - 2)] = segs[i];
  }
  // A change by a user is audited: the object as a GET of the same path
  // showed it just before (for PUT, PATCH and DELETE), and the answer.
  const bool audited = audit_ && (method == "POST" || method == "PUT" || method == "PATCH" || method == "DELETE") &&
                       (best->doc.auth == AuthKind::user || best->doc.auth == AuthKind::admin);
  std::optional<Response> before;
  if (audited && method != "POST") {
    for (const auto& r : routes_) {
      if (r.method != "GET" || r.pattern != best->pattern) continue;
      Request get = req;
      get.method = "GET";
      get.body.clear();
      get.query.clear();
      Response b;
      if (guarded(get, r.pattern, [&] { b = r.handler(get); }).ok() && !b.stream && !b.deferred) before = std::move(b);
    }
  }
  Response resp;
  Status st = guarded(req, best->pattern, [&] { resp = best->handler(req); });
  if (!st.ok()) resp = error_response(st.error(), req);
  if (audited && !(req.audited && resp.status / 100 == 2)) {
    Status a = guarded(req, "audit", [&] { audit_(req, before, resp); });
    if (!a.ok()) spdlog::error("audit of {} {} failed: {}", req.method, req.path, a.error().to_string());
  }
  return resp;
}

}  // namespace cp::http
