// Users, API tokens, whoami.
#include "http/routes_common.h"

namespace cp::http::detail {

void add_user_routes(Router& router, ControlPlane& cp) {
  router.add("GET", "/api/v1/whoami",
             {.summary = "The caller: user, platform role, project group roles",
              .tag = "users",
              .response = "{\"user\",\"role\",\"project_groups\":{name: role}}"},
             user_route(cp, [&cp](Request&, const Principal& p) -> Result<Response> {
               return ok_json(cp.whoami(p));
             }));

  router.add("GET", "/api/v1/users",
             {.summary = "List users", .tag = "users", .auth = AuthKind::admin, .response = "list of User"},
             user_route(cp, [&cp](Request&, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto users, cp.list_users(p));
               return list_of(users);
             }));

  router.add("POST", "/api/v1/users",
             {.summary = "Create a user",
              .tag = "users",
              .auth = AuthKind::admin,
              .body = BodyKind::json,
              .body_description = "{\"name\", \"role\": \"admin\"|\"user\"|\"viewer\"}",
              .response = "User",
              .success_status = 201},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto body, json_body(req));
               CP_ASSIGN(auto user, cp.create_user(p, body));
               return ok_json(to_json(user), 201);
             }));

  router.add("POST", "/api/v1/users/{name}/tokens",
             {.summary = "Create an API token for a user (admin, or the user itself)",
              .tag = "users",
              .body = BodyKind::json,
              .body_description = "{\"description\"?, \"ttl_s\"?}",
              .body_required = false,
              .response = "{\"id\",\"token\",\"user\",\"expires_at\"}; the token is shown only here",
              .success_status = 201},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto body, json_body(req, /*allow_empty=*/true));
               CP_ASSIGN(auto token, cp.create_token(p, req.param("name"), body));
               return ok_json(token, 201);
             }));
}

}  // namespace cp::http::detail
