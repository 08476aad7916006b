// Clusters, their bootstrap tokens, and nodes.
#include "http/routes_common.h"

namespace cp::http::detail {
namespace {

// A cluster as the API shows it: the stored fields and `unknown_attempts`,
// how many of its attempts are Unknown (server/unknown_attempts.h).
Result<json::array> clusters_json(ControlPlane& cp, const std::vector<Cluster>& clusters) {
  std::vector<std::string> ids;
  ids.reserve(clusters.size());
  for (const auto& c : clusters) ids.push_back(c.id);
  CP_ASSIGN(auto unknown, cp.unknown_attempt_counts(ids));
  json::array out;
  out.reserve(clusters.size());
  for (const auto& c : clusters) {
    json::value v = to_json(c);
    auto it = unknown.find(c.id);
    v.as_object()["unknown_attempts"] = it == unknown.end() ? 0 : it->second;
    out.push_back(std::move(v));
  }
  return out;
}

json::value node_json(const Node& n) {
  json::value v = to_json(n);
  v.as_object()["effective_labels"] = to_json(n.effective_labels());
  v.as_object()["in_maintenance"] = n.in_maintenance();
  return v;
}

}  // namespace

void add_cluster_routes(Router& router, ControlPlane& cp) {
  router.add("GET", "/api/v1/clusters",
             {.summary = "List clusters",
              .tag = "clusters",
              .response = "list of Cluster, each with unknown_attempts"},
             user_route(cp, [&cp](Request&, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto clusters, cp.list_clusters(p));
               CP_ASSIGN(auto items, clusters_json(cp, clusters));
               return list_response(std::move(items));
             }));

  router.add("POST", "/api/v1/clusters",
             {.summary = "Register a cluster",
              .tag = "clusters",
              .auth = AuthKind::admin,
              .body = BodyKind::json,
              .body_description = "{\"id\",\"display_name\",\"executor\",\"storage_pool\",\"storage_mount\"?,\"labels\"}",
              .response = "Cluster",
              .success_status = 201},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto body, json_body(req));
               CP_ASSIGN(auto cluster, cp.create_cluster(p, body));
               return ok_json(to_json(cluster), 201);
             }));

  router.add("GET", "/api/v1/clusters/{id}",
             {.summary = "A cluster with its state and the reason for it",
              .tag = "clusters",
              .response = "Cluster, with unknown_attempts"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto cluster, cp.get_cluster(p, req.param("id")));
               CP_ASSIGN(auto items, clusters_json(cp, {cluster}));
               return ok_json(items.front());
             }));

  router.add("PATCH", "/api/v1/clusters/{id}",
             {.summary = "Change a cluster's name, labels, storage pool or draining",
              .tag = "clusters",
              .auth = AuthKind::admin,
              .body = BodyKind::json,
              .body_description = "{\"display_name\"?, \"labels\"?, \"storage_pool\"?, \"storage_mount\"?, \"draining\"?: bool}",
              .response = "Cluster"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto body, json_body(req));
               CP_ASSIGN(auto cluster, cp.patch_cluster(p, req.param("id"), body));
               return ok_json(to_json(cluster));
             }));

  router.add("DELETE", "/api/v1/clusters/{id}",
             {.summary = "Remove a cluster", .tag = "clusters", .auth = AuthKind::admin, .response = "{}"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_TRY(cp.delete_cluster(p, req.param("id")));
               return ok_json(json::object{});
             }));

  router.add("POST", "/api/v1/clusters/{id}/bootstrap-tokens",
             {.summary = "A one-time token an agent exchanges for its credential",
              .tag = "clusters",
              .auth = AuthKind::admin,
              .body = BodyKind::json,
              .body_description = "{\"ttl_s\"?: 86400}",
              .body_required = false,
              .response = "{\"token\": \"cpb_...\", \"cluster_id\", \"expires_at\"}",
              .success_status = 201},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto body, json_body(req, /*allow_empty=*/true));
               CP_ASSIGN(auto token, cp.create_bootstrap_token(p, req.param("id"), body));
               return ok_json(token, 201);
             }));

  router.add("POST", "/api/v1/clusters/{id}/confirm-lost",
             {.summary = "Confirm that the Unknown attempts of an offline cluster are gone: they end Lost and their "
                         "tasks requeue in the cluster's storage pool (admin)",
              .tag = "clusters",
              .auth = AuthKind::admin,
              .response = "{\"cluster\", \"confirmed\": [{\"attempt\", \"task\", \"requeued\"}], \"message\", "
                          "\"message_zh\"}",
              .description = "For Slurm and Kubernetes clusters whose agent fell silent: their jobs may still run, "
                             "so their attempts are Unknown and nothing reruns until the agent reports their end or "
                             "a platform admin confirms them lost here, after checking that the jobs are gone "
                             "(squeue, kubectl get pods). 409 while the cluster is not offline (its agent reports "
                             "its attempts itself); with nothing Unknown, 200 and nothing changes."},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto answer, cp.confirm_lost(p, req.param("id")));
               return ok_json(answer);
             }));

  router.add("GET", "/api/v1/nodes",
             {.summary = "List nodes (labels, GPUs, Ready, maintenance), by cluster and name, a page at a time",
              .tag = "clusters",
              .response = "list of Node, each with effective_labels; next_cursor while more follow",
              .query = {{.name = "cluster", .description = "only this cluster's nodes"},
                        {.name = "limit", .description = "1..1000 (default 100)", .type = "integer"},
                        {.name = "cursor", .description = "next_cursor of the previous page"}}},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               NodeQuery q;
               q.cluster_id = req.query_param("cluster");
               CP_ASSIGN(q.limit, limit_param(req));
               q.cursor = req.query_param("cursor");
               CP_ASSIGN(auto page, cp.list_nodes_page(p, q));
               json::array items;
               items.reserve(page.items.size());
               for (const auto& n : page.items) items.push_back(node_json(n));
               return list_response(std::move(items), page.next_cursor);
             }));

  // Also what the audit log shows as `before` of a PATCH of the node: the
  // router takes it from the GET of the same path.
  router.add("GET", "/api/v1/clusters/{id}/nodes/{name}",
             {.summary = "A node (labels, GPUs, Ready, maintenance)",
              .tag = "clusters",
              .response = "Node, with effective_labels"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto node, cp.get_node(p, req.param("id"), req.param("name")));
               return ok_json(node_json(node));
             }));

  router.add("PATCH", "/api/v1/clusters/{id}/nodes/{name}",
             {.summary = "Override a node's labels or put it in maintenance",
              .tag = "clusters",
              .auth = AuthKind::admin,
              .body = BodyKind::json,
              .body_description = "{\"labels\"?: {key: value, or \"\" to remove}, \"maintenance\"?: bool}",
              .response = "Node"},
             user_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto body, json_body(req));
               CP_ASSIGN(auto node, cp.patch_node(p, req.param("id"), req.param("name"), body));
               return ok_json(node_json(node));
             }));
}

}  // namespace cp::http::detail
