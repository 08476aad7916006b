// The REST calls of the CLI (docs/rest-shapes.md) over common/http_client.h.
// Every answer is a Result: a 2xx body as JSON, anything else as the Error
// the server described in {"error": {code, message, details}} (its message
// already in the language of Accept-Language), or "unreachable".
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/http_client.h"
#include "common/json.h"
#include "common/result.h"

namespace cp::cli {

// Query parameters in order; pairs with an empty value are left out.
using Query = std::vector<std::pair<std::string, std::string>>;

// Sending a request again after it got no answer that settles it.
struct RetryPolicy {
  int attempts = 4;                   // in all, the first one included
  Millis first_wait_ms = 1000;        // before the second; doubled before each later one
  std::function<void(Millis)> sleep;  // waits that long (tests record instead)
  // Told before each wait: why the last attempt failed, the attempt that
  // follows (2, 3, ...) and the wait.
  std::function<void(const Error& why, int next_attempt, Millis wait_ms)> on_retry;
};

struct ApiClientOptions {
  // "http://127.0.0.1:8080", or the servers of one control plane separated
  // by commas (common/server_urls.h), tried in order: see ApiClient.
  std::string server;
  std::string token;  // sent as "Authorization: Bearer ..." when not empty
  std::string accept_language = "en";
  long timeout_ms = 30000;
  // Told when a request moves on to the next server of the list: the one
  // that failed it, why, and the one tried next.
  std::function<void(const std::string& from, const Error& why, const std::string& to)> on_failover;
};

// The Error for a refused request: the server's own error object when the
// body holds one, else "http_<status>" quoting the start of the body. The
// server's message is used for both languages: it was localized already.
Error error_from_response(long status, std::string_view body);

// With several servers, a request goes to the current one (at first the
// first listed) and, when that one fails it, to the next ones in order, each
// at most once; the one that settles it stays current for the next request.
// How a server may fail a request depends on whether sending it twice is
// safe:
//
//   GET, PUT, DELETE (idempotent), post_idempotent   no HTTP answer, or a 502, 503 or 504
//   POST, PATCH                                      no connection: the request never left
//
// A POST that timed out may have been done: sending it elsewhere could do it
// twice, so its error is the answer. Any other answer settles the request.
// A malformed list is the Error of every request.
class ApiClient {
 public:
  explicit ApiClient(ApiClientOptions opts);

  Result<json::value> get(std::string_view path, const Query& query = {});
  Result<json::value> post(std::string_view path, const json::value& body);
  // A body that is not JSON, e.g. a pipeline as YAML ("application/yaml").
  Result<json::value> post_text(std::string_view path, std::string_view body, const std::string& content_type);
  // post_text under an Idempotency-Key: the server does what the first of
  // several requests with the key asked, once, and answers every one of
  // them alike. So a request that got no HTTP answer (the server may or may
  // not have done it) or a 502, 503 or 504 (a gateway, a server starting or
  // failing over) goes to the next server of the list at once, and once
  // every server failed it, to all of them again, the same bytes under the
  // same key, as `retry` says; any other answer is final.
  Result<json::value> post_idempotent(std::string_view path, std::string_view body, const std::string& content_type,
                                      const std::string& idempotency_key, const RetryPolicy& retry);
  Result<json::value> put(std::string_view path, const json::value& body);
  Result<json::value> patch(std::string_view path, const json::value& body);
  Result<json::value> del(std::string_view path);

  // Every item of a list, following next_cursor until it is "".
  Result<json::array> list_all(std::string_view path, Query query);

  // A body that is text, e.g. CSV with accept "text/csv" or logs.
  Result<std::string> get_text(std::string_view path, const Query& query, const std::string& accept);

  // Streams a text body to `sink` as it arrives (logs -f), with no overall
  // timeout. A refused request ends as its Error and nothing of the error
  // body reaches the sink.
  Status stream(std::string_view path, const Query& query, const std::function<bool(std::string_view)>& sink);

  // The URL of `path` on the current server.
  std::string url(std::string_view path, const Query& query = {}) const;
  const ApiClientOptions& options() const { return opts_; }

 private:
  // When a request may go on to the next server (see the class comment).
  enum class Failover {
    kNoAnswer,  // safe to send twice: no answer or a 502/503/504
    kNotSent,   // not safe: only when it never left
  };
  static Failover failover_for(const std::string& method);

  // One request, to the servers as `failover` allows; an Error only when
  // no HTTP answer came back.
  Result<HttpResponse> exchange(const std::string& method, std::string_view path, const Query& query,
                                std::string_view body, const std::string& content_type, const std::string& accept,
                                Failover failover, const std::map<std::string, std::string>& headers = {});
  // After the current server failed a request: makes the next one current;
  // true (and on_failover told) when the request goes on to it, false when
  // every server had its turn.
  bool move_on(const Error& why, std::size_t& tried);
  // exchange(), an answer other than 2xx as its Error.
  Result<HttpResponse> send(const std::string& method, std::string_view path, const Query& query,
                            std::string_view body, const std::string& content_type, const std::string& accept);
  Result<json::value> send_json(const std::string& method, std::string_view path, const Query& query,
                                std::string_view body, const std::string& content_type);
  HttpRequestOptions request_options(const std::string& accept) const;

  ApiClientOptions opts_;
  Result<std::vector<std::string>> servers_;  // opts_.server read once
  std::size_t current_ = 0;                   // index into servers_
  HttpClient http_;
};

// Holds back the start of a streamed body while it may still be the JSON
// error object of a refusal, because HttpClient tells the status only after
// the body ended. Text that cannot be one JSON value (the usual log line) is
// passed on at once; a first line that is JSON waits for the next bytes.
//
//   feed("{\"error\":{...}}")  -> held      finish(404) -> the server's Error
//   feed("epoch 1 loss 0.3\n") -> to sink   finish(200) -> ok
class StreamGate {
 public:
  explicit StreamGate(std::function<bool(std::string_view)> sink) : sink_(std::move(sink)) {}
  // Returns false when the sink asked to stop.
  bool feed(std::string_view chunk);
  // After the body ended: the error for a refusal, else flushes what was held.
  Status finish(long status);

  static constexpr std::size_t kMaxHeld = 64 * 1024;

 private:
  bool pass_held();

  std::function<bool(std::string_view)> sink_;
  std::string held_;
  bool passing_ = false;
};

}  // namespace cp::cli
