#include "cli/api_client.h"

#include "cli/format.h"
#include "cli/version.h"
#include "common/server_urls.h"

namespace cp::cli {
namespace {

// One rule for "did it work", shared with the exit code (format.h).
bool is_success(long status) { return exit_code_for_http_status(status) == 0; }

// A gateway before a dead server, a server starting or giving up the lead:
// another server of the same control plane may answer.
bool is_gateway_failure(long status) { return status == 502 || status == 503 || status == 504; }

// Whether a transport failure may have delivered the request (HttpClient's
// details.request_sent); when in doubt, yes.
bool may_have_been_sent(const Error& e) {
  const json::value* sent = e.details.if_contains("request_sent");
  return sent == nullptr || !sent->is_bool() || sent->as_bool();
}

std::string with_query(std::string out, std::string_view path, const Query& query) {
  char sep = path.find('?') == std::string_view::npos ? '?' : '&';
  for (const auto& [k, v] : query) {
    if (v.empty()) continue;
    out += sep;
    out += url_encode(k) + "=" + url_encode(v);
    sep = '&';
  }
  return out;
}

Error with_hint(Error e) {
  e.message += " (is the server running? set it with --server or CUBEPLANE_SERVER)";
  e.message_zh += "（服务器是否在运行？可用 --server 或 CUBEPLANE_SERVER 指定）";
  return e;
}

std::string body_excerpt(std::string_view body) {
  std::string text = truncate(body, 200);
  return text.empty() ? "(empty body)" : text;
}

// A 2xx answer's body as JSON (an empty one as null).
Result<json::value> json_of(const HttpResponse& resp) {
  if (resp.body.find_first_not_of(" \t\r\n") == std::string::npos) return json::value(nullptr);
  auto parsed = parse_json(resp.body);
  if (!parsed.ok()) {
    std::string excerpt = body_excerpt(resp.body);
    return Error{"malformed_response", 502, "the server's answer is not JSON: " + excerpt,
                 "服务器的回答不是 JSON：" + excerpt, {}};
  }
  return std::move(parsed).value();
}

}  // namespace

Error error_from_response(long status, std::string_view body) {
  int code = static_cast<int>(status);
  auto parsed = parse_json(body);
  if (parsed.ok()) {
    const json::value* err = member(*parsed, "error");
    if (err != nullptr && err->is_object()) {
      std::string message = str_at(*err, "message");
      std::string error_code = str_at(*err, "code");
      if (error_code.empty()) error_code = "http_" + std::to_string(status);
      if (message.empty()) message = error_code;
      Error e{error_code, code, message, message, {}};
      if (const json::value* d = member(*err, "details"); d != nullptr && d->is_object()) e.details = d->get_object();
      return e;
    }
  }
  std::string excerpt = body_excerpt(body);
  return Error{"http_" + std::to_string(status), code,
               "the server answered HTTP " + std::to_string(status) + ": " + excerpt,
               "服务器返回 HTTP " + std::to_string(status) + "：" + excerpt,
               {}};
}

ApiClient::ApiClient(ApiClientOptions opts)
    : opts_(std::move(opts)), servers_(parse_server_urls(opts_.server, "server")) {}

std::string ApiClient::url(std::string_view path, const Query& query) const {
  const std::string& server = servers_.ok() ? (*servers_)[current_] : opts_.server;
  return with_query(server + std::string(path), path, query);
}

ApiClient::Failover ApiClient::failover_for(const std::string& method) {
  // RFC 9110 9.2.2: sending these twice has the effect of sending them once.
  if (method == "GET" || method == "HEAD" || method == "PUT" || method == "DELETE") return Failover::kNoAnswer;
  return Failover::kNotSent;
}

bool ApiClient::move_on(const Error& why, std::size_t& tried) {
  const std::vector<std::string>& servers = *servers_;
  const std::string& from = servers[current_];
  // A request that every server failed starts its next round (submit's
  // retries) where this one started.
  current_ = (current_ + 1) % servers.size();
  if (++tried >= servers.size()) return false;
  if (opts_.on_failover) opts_.on_failover(from, why, servers[current_]);
  return true;
}

HttpRequestOptions ApiClient::request_options(const std::string& accept) const {
  HttpRequestOptions o;
  o.timeout_ms = opts_.timeout_ms;
  o.headers["Accept"] = accept;
  o.headers["Accept-Language"] = opts_.accept_language.empty() ? "en" : opts_.accept_language;
  o.headers["User-Agent"] = "cubeplane-cli/" + std::string(kClientVersion);
  if (!opts_.token.empty()) o.headers["Authorization"] = "Bearer " + opts_.token;
  return o;
}

Result<HttpResponse> ApiClient::exchange(const std::string& method, std::string_view path, const Query& query,
                                         std::string_view body, const std::string& content_type,
                                         const std::string& accept, Failover failover,
                                         const std::map<std::string, std::string>& headers) {
  if (!servers_.ok()) return servers_.error();
  HttpRequestOptions options = request_options(accept);
  for (const auto& [name, value] : headers) options.headers[name] = value;
  for (std::size_t tried = 0;;) {
    auto resp = http_.request(method, url(path, query), std::string(body), content_type, options);
    if (!resp.ok()) {
      const bool may_go_on = failover == Failover::kNoAnswer || !may_have_been_sent(resp.error());
      if (may_go_on && move_on(resp.error(), tried)) continue;
      return with_hint(resp.error());
    }
    if (failover == Failover::kNoAnswer && is_gateway_failure(resp->status) &&
        move_on(error_from_response(resp->status, resp->body), tried)) {
      continue;
    }
    return resp;
  }
}

Result<HttpResponse> ApiClient::send(const std::string& method, std::string_view path, const Query& query,
                                     std::string_view body, const std::string& content_type,
                                     const std::string& accept) {
  CP_ASSIGN(HttpResponse resp, exchange(method, path, query, body, content_type, accept, failover_for(method)));
  if (!is_success(resp.status)) return error_from_response(resp.status, resp.body);
  return resp;
}

Result<json::value> ApiClient::send_json(const std::string& method, std::string_view path, const Query& query,
                                         std::string_view body, const std::string& content_type) {
  CP_ASSIGN(HttpResponse resp, send(method, path, query, body, content_type, "application/json"));
  return json_of(resp);
}

Result<json::value> ApiClient::post_idempotent(std::string_view path, std::string_view body,
                                               const std::string& content_type, const std::string& idempotency_key,
                                               const RetryPolicy& retry) {
  Millis wait = retry.first_wait_ms;
  for (int attempt = 1;; ++attempt) {
    // Every server of the list first, then the next round after a wait.
    auto resp = exchange("POST", path, {}, body, content_type, "application/json", Failover::kNoAnswer,
                         {{"Idempotency-Key", idempotency_key}});
    Error failed;  // why this attempt did not settle it
    if (!resp.ok()) {
      if (resp.error().code != "unreachable") return resp.error();
      failed = resp.error();
    } else if (resp->status == 502 || resp->status == 503 || resp->status == 504) {
      failed = error_from_response(resp->status, resp->body);
    } else if (!is_success(resp->status)) {
      return error_from_response(resp->status, resp->body);
    } else {
      return json_of(*resp);
    }
    if (attempt >= retry.attempts) return failed;
    if (retry.on_retry) retry.on_retry(failed, attempt + 1, wait);
    if (retry.sleep) retry.sleep(wait);
    wait *= 2;
  }
}

Result<json::value> ApiClient::get(std::string_view path, const Query& query) {
  return send_json("GET", path, query, "", "application/json");
}

Result<json::value> ApiClient::post(std::string_view path, const json::value& body) {
  return send_json("POST", path, {}, dump(body), "application/json");
}

Result<json::value> ApiClient::post_text(std::string_view path, std::string_view body,
                                         const std::string& content_type) {
  return send_json("POST", path, {}, body, content_type);
}

Result<json::value> ApiClient::put(std::string_view path, const json::value& body) {
  return send_json("PUT", path, {}, dump(body), "application/json");
}

Result<json::value> ApiClient::patch(std::string_view path, const json::value& body) {
  return send_json("PATCH", path, {}, dump(body), "application/json");
}

Result<json::value> ApiClient::del(std::string_view path) { return send_json("DELETE", path, {}, "", "application/json"); }

Result<json::array> ApiClient::list_all(std::string_view path, Query query) {
  json::array items;
  std::string cursor;
  query.emplace_back("cursor", "");
  for (;;) {
    query.back().second = cursor;
    CP_ASSIGN(json::value page, get(path, query));
    const json::value* page_items = member(page, "items");
    if (page_items != nullptr && page_items->is_array()) {
      for (const auto& item : page_items->get_array()) items.push_back(item);
    }
    std::string next = str_at(page, "next_cursor");
    if (next.empty()) break;
    if (next == cursor) {
      return Error{"malformed_response", 502, "the server repeated the list cursor \"" + next + "\"",
                   "服务器重复返回了列表游标 \"" + next + "\"", {}};
    }
    cursor = std::move(next);
  }
  return items;
}

Result<std::string> ApiClient::get_text(std::string_view path, const Query& query, const std::string& accept) {
  CP_ASSIGN(HttpResponse resp, send("GET", path, query, "", "application/json", accept));
  return std::move(resp.body);
}

Status ApiClient::stream(std::string_view path, const Query& query,
                         const std::function<bool(std::string_view)>& sink) {
  if (!servers_.ok()) return servers_.error();
  for (std::size_t tried = 0;;) {
    // Once a byte reached the sink, another server would repeat it: only a
    // request that printed nothing goes on to the next server.
    bool printed = false;
    StreamGate gate([&](std::string_view chunk) {
      printed = true;
      return sink(chunk);
    });
    HttpRequestOptions o = request_options("text/plain");
    o.timeout_ms = 0;  // follows until the server ends the body
    o.on_data = [&gate](std::string_view chunk) { return gate.feed(chunk); };
    auto resp = http_.request("GET", url(path, query), "", "application/json", o);
    if (!resp.ok()) {
      if (!printed && move_on(resp.error(), tried)) continue;
      return with_hint(resp.error());
    }
    Status settled = gate.finish(resp->status);  // a refusal prints nothing
    if (!printed && is_gateway_failure(resp->status) && move_on(settled.error(), tried)) continue;
    return settled;
  }
}

bool StreamGate::pass_held() {
  passing_ = true;
  std::string held = std::move(held_);
  held_.clear();
  return held.empty() || sink_(held);
}

bool StreamGate::feed(std::string_view chunk) {
  if (passing_) return sink_(chunk);
  held_.append(chunk);
  if (held_.size() > kMaxHeld) return pass_held();
  // An error body is exactly one JSON object. Anything that is not the start
  // of a JSON value, or that goes on after one, is log text.
  json::stream_parser parser;
  boost::system::error_code ec;
  std::size_t used = parser.write_some(held_.data(), held_.size(), ec);
  if (ec) return pass_held();
  if (parser.done() && held_.find_first_not_of(" \t\r\n", used) != std::string::npos) return pass_held();
  return true;
}

Status StreamGate::finish(long status) {
  if (!is_success(status)) {
    std::string body = passing_ ? std::string() : std::move(held_);
    held_.clear();
    return error_from_response(status, body);
  }
  if (!passing_) pass_held();
  return {};
}

}  // namespace cp::cli
