// The HTTP vocabulary of the REST layer: a parsed request, a response, and the
// two kinds of answers that are not ready at once (a long-poll and a chunked
// stream). No Boost.Beast here: handlers, the router and the REST routes
// compile without it; only server.cpp speaks the wire protocol.
//
// A handler is a synchronous function Request& -> Response run on an I/O
// thread. When it cannot answer yet it returns a Response carrying a
// Deferred (answer later, when `wake` fires or at the deadline) or a Stream
// (answer in chunks until done):
//
//   handler ──> Response{status, body}                 plain answer
//           ──> Response{.deferred = {wait, wake, poll}} server: poll(false) on each wake,
//                                                        poll(true) at the deadline
//           ──> Response{.stream = {wake, next}}        server: next() until done, waiting
//                                                        on wake (or a short timer) between
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/json.h"
#include "common/signal.h"

namespace cp::http {

struct Request {
  std::string method;  // upper case: GET, POST, ...
  std::string target;  // as received: "/api/v1/tasks?state=Queued"
  std::string path;    // percent-decoded path, no query
  std::map<std::string, std::string> query;   // decoded; the first of repeated keys wins
  std::map<std::string, std::string> params;  // path parameters, decoded ("{id}" -> "id")
  std::map<std::string, std::string> headers;  // names lower-cased; repeats joined with ", "
  std::string body;
  std::string remote_addr;  // "127.0.0.1:53412"
  std::string request_id;   // the X-Request-Id answered with
  std::string route;        // the matched route pattern (set by the router), for metrics
  // Set by a handler whose change wrote its own audit row, in the change's
  // transaction: the router's audit hook then writes none for a success.
  bool audited = false;

  // Header value by (any-case) name; "" when absent.
  std::string header(std::string_view name) const;
  std::string accept_language() const { return header("accept-language"); }
  // A query parameter or "" when absent.
  std::string query_param(const std::string& name) const;
  std::string param(const std::string& name) const;
  // Media type of the body without parameters, lower-cased ("application/json").
  std::string media_type() const;
};

struct Deferred;
struct Stream;

struct Response {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra headers
  std::shared_ptr<Deferred> deferred;  // set: a long-poll; status/body unused
  std::shared_ptr<Stream> stream;      // set: a chunked stream with this status/content_type/headers

  Response& with_header(std::string name, std::string value) {
    headers.emplace_back(std::move(name), std::move(value));
    return *this;
  }
};

// A long-poll. The server subscribes to `wake` first, then calls
// poll(false) once (closing the race with a notify that came before the
// subscription), again after every notify, and poll(true) when max_wait_ms
// has passed or the server stops; poll(true) must return a response.
struct Deferred {
  std::int64_t max_wait_ms = 0;
  Signal* wake = nullptr;  // may be null: then only the deadline ends the wait
  std::function<std::optional<Response>(bool final)> poll;
};

// A chunked response (logs -f). The server calls next(done) and writes each
// non-empty piece as a chunk; when next returns nullopt it waits for `wake`
// or poll_interval_ms, whichever first; it ends the stream when done is set,
// after max_total_ms, or when the server stops. Callbacks run on one
// connection's strand, never concurrently.
struct Stream {
  Signal* wake = nullptr;
  std::int64_t max_total_ms = 3'600'000;
  std::int64_t poll_interval_ms = 1000;
  std::function<std::optional<std::string>(bool& done)> next;
};

Response json_response(int status, const json::value& body);
Response text_response(int status, std::string body, std::string content_type = "text/plain; charset=utf-8");
// {"error": {"code", "message", "details"}} with the message in the request's
// language and the status of the error.
Response error_response(const Error& error, const Request& req);
// For the few places without a request (the server's own 413/431/503).
Response error_response(const Error& error, std::string_view accept_language);

// Standard reason phrase ("Not Found"); "" for unknown codes.
std::string_view status_reason(int status);

// Fills req.path and req.query from req.target (origin form, "/a/b?x=1").
// False for a target that is not a valid origin-form URL (answered 400).
bool parse_target(Request& req);

}  // namespace cp::http
