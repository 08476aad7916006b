// Method + path pattern -> handler, each route carrying the description the
// OpenAPI document is built from (so the document cannot drift from the
// table that actually serves requests).
//
//   router.add("GET", "/api/v1/tasks/{id}/logs", {.summary = "...", .tag = "tasks"}, handler);
//
// Matching: a path matches a pattern when it has as many segments and every
// literal segment is equal; "{name}" segments capture into Request::params.
// When several patterns match, literal segments win over parameters, left to
// right. A path that matches with another method answers 405 with Allow; no
// match at all goes to the fallback (static UI) if it takes the request,
// else 404 in the JSON error format. HEAD is served by the GET route.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "http/http.h"

namespace cp::http {

enum class AuthKind { none, user, admin, agent };
enum class BodyKind { none, json, document };  // document: YAML or JSON

struct QueryParamDoc {
  std::string name;
  std::string description;
  std::string type = "string";  // OpenAPI schema type: string | integer | boolean
  bool required = false;
  std::vector<std::string> enum_values;
};

struct RouteDoc {
  std::string summary;
  std::string tag;
  AuthKind auth = AuthKind::user;
  BodyKind body = BodyKind::none;
  std::string body_description;
  bool body_required = true;
  std::string response = "OK";  // description of the success response
  int success_status = 200;
  std::vector<std::string> response_content_types{"application/json"};
  std::vector<QueryParamDoc> query;
  std::string description;  // longer text, optional
};

using Handler = std::function<Response(Request&)>;
// Returns nullopt to decline (the router then answers 404).
using Fallback = std::function<std::optional<Response>(Request&)>;

struct Route {
  std::string method;
  std::string pattern;
  RouteDoc doc;
  Handler handler;
  std::vector<std::string> segments;  // pattern split at '/', "{id}" kept as written

  std::vector<std::string> param_names() const;
};

class Router {
 public:
  // CHECKs a malformed pattern or a duplicate (method, pattern): both are
  // programming errors in the route table.
  void add(std::string method, std::string pattern, RouteDoc doc, Handler handler);
  void set_fallback(Fallback fallback) { fallback_ = std::move(fallback); }
  // Called after every POST, PUT, PATCH or DELETE of a user or admin route
  // with what a GET of the same path answered just before (PUT, PATCH and
  // DELETE, where the path has a GET) and the answer given.
  using AuditFn = std::function<void(const Request&, const std::optional<Response>& before, const Response& answer)>;
  void set_audit(AuditFn fn) { audit_ = std::move(fn); }

  // Routes the request, sets req.params and req.route, runs the handler.
  // A handler that throws answers 500 (the exception is logged).
  Response handle(Request& req) const;

  const std::vector<Route>& routes() const { return routes_; }

 private:
  std::vector<Route> routes_;
  Fallback fallback_;
  AuditFn audit_;
};

}  // namespace cp::http
