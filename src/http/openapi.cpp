#include "http/openapi.h"

#include <algorithm>
#include <cctype>
#include <set>

namespace cp::http {
namespace {

const char* kErrorRef = "#/components/responses/Error";

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

std::string operation_id(const Route& r) {
  std::string id = lower(r.method);
  for (const auto& seg : r.segments) {
    id += '_';
    for (char c : seg) {
      if (std::isalnum(static_cast<unsigned char>(c))) {
        id += c;
      } else if (c == '-' || c == '.') {
        id += '_';
      }
    }
  }
  return id;
}

const char* auth_name(AuthKind a) {
  switch (a) {
    case AuthKind::none: return "none";
    case AuthKind::user: return "user";
    case AuthKind::admin: return "admin";
    case AuthKind::agent: return "agent";
  }
  return "user";
}

json::object schema_for_content_type(const std::string& ct) {
  json::object s;
  if (ct.find("json") != std::string::npos) {
    s["type"] = "object";
  } else {
    s["type"] = "string";
  }
  return s;
}

json::object error_ref() {
  json::object o;
  o["$ref"] = kErrorRef;
  return o;
}

json::object operation(const Route& r) {
  const RouteDoc& d = r.doc;
  json::object op;
  op["operationId"] = operation_id(r);
  op["summary"] = d.summary;
  if (!d.description.empty()) op["description"] = d.description;
  if (!d.tag.empty()) op["tags"] = json::array{json::value(d.tag)};
  op["x-cubeplane-auth"] = auth_name(d.auth);

  json::array params;
  for (const auto& name : r.param_names()) {
    json::object p;
    p["name"] = name;
    p["in"] = "path";
    p["required"] = true;
    p["schema"] = json::object{{"type", "string"}};
    params.push_back(std::move(p));
  }
  for (const auto& q : d.query) {
    json::object p;
    p["name"] = q.name;
    p["in"] = "query";
    p["required"] = q.required;
    if (!q.description.empty()) p["description"] = q.description;
    json::object schema{{"type", q.type}};
    if (!q.enum_values.empty()) {
      json::array e;
      for (const auto& v : q.enum_values) e.push_back(json::value(v));
      schema["enum"] = std::move(e);
    }
    p["schema"] = std::move(schema);
    params.push_back(std::move(p));
  }
  if (!params.empty()) op["parameters"] = std::move(params);

  if (d.body != BodyKind::none) {
    json::object content;
    json::object obj_schema{{"schema", json::object{{"type", "object"}}}};
    content["application/json"] = obj_schema;
    if (d.body == BodyKind::document) content["application/yaml"] = obj_schema;
    json::object body;
    body["required"] = d.body_required;
    body["description"] = d.body_description.empty()
                              ? (d.body == BodyKind::document ? "a document in YAML or JSON" : "a JSON object")
                              : d.body_description;
    body["content"] = std::move(content);
    op["requestBody"] = std::move(body);
  }

  json::object responses;
  json::object ok;
  ok["description"] = d.response.empty() ? "OK" : d.response;
  if (d.success_status != 204 && !d.response_content_types.empty()) {
    json::object content;
    for (const auto& ct : d.response_content_types) content[ct] = json::object{{"schema", schema_for_content_type(ct)}};
    ok["content"] = std::move(content);
  }
  responses[std::to_string(d.success_status)] = std::move(ok);
  if (d.body != BodyKind::none || !d.query.empty() || !r.param_names().empty()) responses["400"] = error_ref();
  if (d.auth != AuthKind::none) {
    responses["401"] = error_ref();
    responses["403"] = error_ref();
  }
  if (!r.param_names().empty()) responses["404"] = error_ref();
  if (d.body != BodyKind::none) {
    responses["413"] = error_ref();
    responses["415"] = error_ref();
  }
  responses["4XX"] = error_ref();
  responses["5XX"] = error_ref();
  op["responses"] = std::move(responses);

  if (d.auth == AuthKind::none) {
    op["security"] = json::array{};
  } else {
    op["security"] = json::array{json::object{{"bearerAuth", json::array{}}}};
  }
  return op;
}

json::object components() {
  json::object error_inner;
  error_inner["type"] = "object";
  error_inner["required"] = json::array{"code", "message"};
  error_inner["properties"] = json::object{
      {"code", json::object{{"type", "string"}, {"description", "stable machine code, e.g. quota_exceeded"}}},
      {"message", json::object{{"type", "string"}, {"description", "in the language of Accept-Language"}}},
      {"details", json::object{{"type", "object"}, {"additionalProperties", true}}},
  };
  json::object error_schema;
  error_schema["type"] = "object";
  error_schema["required"] = json::array{"error"};
  error_schema["properties"] = json::object{{"error", std::move(error_inner)}};

  json::object list_schema;
  list_schema["type"] = "object";
  list_schema["properties"] = json::object{
      {"items", json::object{{"type", "array"}, {"items", json::object{{"type", "object"}}}}},
      {"next_cursor", json::object{{"type", "string"}, {"description", "\"\" at the end"}}},
  };

  json::object error_response;
  error_response["description"] = "error";
  error_response["content"] = json::object{
      {"application/json", json::object{{"schema", json::object{{"$ref", "#/components/schemas/Error"}}}}}};

  json::object bearer;
  bearer["type"] = "http";
  bearer["scheme"] = "bearer";
  bearer["description"] = "a user API token, or for /api/v1/agent/* an agent credential";

  json::object c;
  c["securitySchemes"] = json::object{{"bearerAuth", std::move(bearer)}};
  c["schemas"] = json::object{{"Error", std::move(error_schema)}, {"List", std::move(list_schema)}};
  c["responses"] = json::object{{"Error", std::move(error_response)}};
  return c;
}

}  // namespace

json::object build_openapi(const Router& router, const OpenApiInfo& info) {
  json::object doc;
  doc["openapi"] = "3.0.3";
  doc["info"] = json::object{{"title", info.title}, {"version", info.version}, {"description", info.description}};
  doc["servers"] = json::array{json::object{{"url", info.server_url}}};
  doc["security"] = json::array{json::object{{"bearerAuth", json::array{}}}};

  json::object paths;
  json::array tags;
  std::set<std::string> seen_tags;
  for (const auto& r : router.routes()) {
    auto& item = paths[r.pattern];
    if (!item.is_object()) item = json::object{};
    item.as_object()[lower(r.method)] = operation(r);
    if (!r.doc.tag.empty() && seen_tags.insert(r.doc.tag).second) tags.push_back(json::object{{"name", r.doc.tag}});
  }
  doc["tags"] = std::move(tags);
  doc["paths"] = std::move(paths);
  doc["components"] = components();
  return doc;
}

}  // namespace cp::http
