// The agent protocol (DESIGN.md "Agent protocol"): register, sync (a
// long-poll when there is nothing to say), logs.
#include "http/routes_common.h"

namespace cp::http::detail {
namespace {

bool has_orders(const SyncResponse& r) { return !r.start.empty() || !r.stop.empty() || !r.ack.empty(); }

}  // namespace

void add_agent_routes(Router& router, ControlPlane& cp) {
  router.add("POST", "/api/v1/agent/register",
             {.summary = "Exchange a bootstrap token for an agent credential, or renew the credential",
              .tag = "agent",
              .auth = AuthKind::none,
              .body = BodyKind::json,
              .body_description = "RegisterRequest {cluster_id, bootstrap_token, agent_instance, agent_version}; to "
                                  "renew, an empty bootstrap_token and the current credential as bearer token",
              .response = "RegisterResponse {credential, expires_at, server_time, lease_ttl_s, sync_interval_ms}"},
             public_route([&cp](Request& req) -> Result<Response> {
               CP_ASSIGN(auto body, decode_body<RegisterRequest>(req));
               CP_ASSIGN(auto out, cp.agent_register(body, bearer_token(req)));
               return ok_json(to_json(out));
             }));

  router.add("POST", "/api/v1/agent/sync",
             {.summary = "Report nodes and attempts; receive attempts to start and stop",
              .tag = "agent",
              .auth = AuthKind::agent,
              .body = BodyKind::json,
              .body_description = "SyncRequest; wait_ms > 0 holds the answer (long-poll) until there are orders",
              .response = "SyncResponse {lease_ttl_s, received_at, server_time, start, stop, ack, send_inventory, "
                          "beacon_url, beacon_term, beacon_seq, beacon_window_ms, beacon_poll_ms}"},
             agent_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto sync, decode_body<SyncRequest>(req));
               CP_ASSIGN(auto answer, cp.agent_sync(p, sync));
               if (has_orders(answer) || sync.wait_ms <= 0) return ok_json(to_json(answer));
               // Nothing to say: hold the answer until the cluster's signal
               // brings orders, or the wait ends (then the empty answer).
               auto d = std::make_shared<Deferred>();
               d->max_wait_ms = std::min(sync.wait_ms, cp.config().long_poll_max_ms);
               d->wake = &cp.cluster_signal(p.cluster_id);
               d->poll = [&cp, cluster = p.cluster_id, reported = std::move(sync.attempts), empty = std::move(answer),
                          lang = req.accept_language()](bool final) -> std::optional<Response> {
                 auto orders = cp.pending_orders(cluster, reported, empty.received_at);
                 if (!orders.ok()) return error_response(orders.error(), lang);
                 if (has_orders(*orders)) return json_response(200, to_json(*orders));
                 if (!final) return std::nullopt;
                 SyncResponse out = empty;
                 out.server_time = cp.clock().now_ms();
                 return json_response(200, to_json(out));
               };
               Response r;
               r.deferred = std::move(d);
               return r;
             }));

  router.add("POST", "/api/v1/agent/logs",
             {.summary = "Upload a piece of an attempt's log",
              .tag = "agent",
              .auth = AuthKind::agent,
              .body = BodyKind::json,
              .body_description = "LogUpload {attempt_id, epoch, replica, stream, offset, data}",
              .response = "{}"},
             agent_route(cp, [&cp](Request& req, const Principal& p) -> Result<Response> {
               CP_ASSIGN(auto upload, decode_body<LogUpload>(req));
               CP_TRY(cp.agent_logs(p, upload));
               return ok_json(json::object{});
             }));
}

}  // namespace cp::http::detail
