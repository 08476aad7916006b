// Resource groups, project groups and priority classes: documents in YAML or
// JSON ({apiVersion, kind, metadata, spec}), all on the same pattern.
#include "http/routes_common.h"

namespace cp::http::detail {
namespace {

struct DocumentKind {
  const char* path;   // "resource-groups"
  const char* kind;   // "ResourceGroup"
  const char* label;  // "resource group"
  const char* tag;
};

constexpr DocumentKind kKinds[] = {
    {"resource-groups", "ResourceGroup", "resource group", "resource-groups"},
    {"project-groups", "ProjectGroup", "project group", "project-groups"},
    {"priority-classes", "PriorityClass", "priority class", "priority-classes"},
};

void add_kind(Router& router, ControlPlane& cp, const DocumentKind& k) {
  const std::string base = std::string("/api/v1/") + k.path;
  const std::string kind = k.kind;
  const std::string label = k.label;
  const std::string doc_response = "document: {apiVersion, kind, metadata: {name, created_at, updated_at}, spec, status}";

  router.add("GET", base, {.summary = "List " + label + "s", .tag = k.tag, .response = "list of documents"},
             user_route(cp, [&cp, kind](Request&, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto docs, cp.list_documents(p, kind));
               return list_response(std::move(docs));
             }));

  router.add("POST", base,
             {.summary = "Create a " + label + " (refused if the name exists)",
              .tag = k.tag,
              .auth = AuthKind::admin,
              .body = BodyKind::document,
              .body_description = "a " + kind + " document in YAML (application/yaml) or JSON",
              .response = doc_response,
              .success_status = 201},
             user_route(cp, [&cp, kind](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto doc, document_body(req));
               CP_ASSIGN(auto applied, cp.apply_document(p, kind, doc, std::nullopt));
               return ok_json(applied.first, 201);
             }));

  router.add("GET", base + "/{name}", {.summary = "A " + label, .tag = k.tag, .response = doc_response},
             user_route(cp, [&cp, kind](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto doc, cp.get_document(p, kind, req.param("name")));
               return ok_json(doc);
             }));

  router.add("PUT", base + "/{name}",
             {.summary = "Create or replace a " + label + " (metadata.name must equal {name})",
              .tag = k.tag,
              .auth = AuthKind::admin,
              .body = BodyKind::document,
              .body_description = "a " + kind + " document in YAML (application/yaml) or JSON",
              .response = doc_response + "; 201 when created"},
             user_route(cp, [&cp, kind](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto doc, document_body(req));
               CP_ASSIGN(auto applied, cp.apply_document(p, kind, doc, req.param("name")));
               return ok_json(applied.first, applied.second ? 201 : 200);
             }));

  router.add("DELETE", base + "/{name}",
             {.summary = "Delete a " + label, .tag = k.tag, .auth = AuthKind::admin, .response = "{}"},
             user_route(cp, [&cp, kind](Request& req, const Principal& p) -> Result<Response> {
               CP_TRY(cp.delete_document(p, kind, req.param("name")));
               return ok_json(json::object{});
             }));
}

}  // namespace

void add_document_routes(Router& router, ControlPlane& cp) {
  for (const auto& k : kKinds) add_kind(router, cp, k);
}

}  // namespace cp::http::detail
