// A small blocking HTTP client (libcurl) for the CLI and the agent. Servers
// use Boost.Beast (src/http); clients stay on libcurl so that Beast is
// compiled in one place only.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace cp {

struct HttpResponse {
  long status = 0;
  std::string body;
  std::string content_type;
  // Response headers by lower-case name (the last value of a repeated one);
  // those of a final answer only, not of an interim "100 Continue".
  std::map<std::string, std::string> headers;
};

struct HttpRequestOptions {
  std::map<std::string, std::string> headers;  // e.g. {"Authorization", "Bearer ..."}
  long timeout_ms = 30000;
  // Called with each piece of the body as it arrives (streams); when set,
  // HttpResponse::body stays empty. Return false to stop reading.
  std::function<bool(std::string_view)> on_data;
  // Asked about every `abort_check_ms` while the request is in flight (on the
  // calling thread); returning true ends it with an Error coded "aborted".
  // The agent uses it to cut a long-poll short when it has news to report.
  // (libcurl's own progress callback fires only about once a second when the
  // line is idle, hence a poll loop of our own.)
  std::function<bool()> should_abort;
  long abort_check_ms = 50;
  // With should_abort: descriptors whose readiness (readable, hung up) asks
  // it at once instead of at the next abort_check_ms (the agent passes
  // pidfds of its running processes, so that an exit is reported at once).
  // Each wakes the wait once per request; they must stay open throughout.
  std::vector<int> wake_fds;
  // TLS for https URLs (the Kubernetes API): a CA bundle in place of the
  // system's, a client certificate and key (PEM files), or no verification
  // at all. Empty: libcurl's defaults.
  std::string ca_file;
  std::string client_cert_file;
  std::string client_key_file;
  bool insecure_skip_verify = false;
};

class HttpClient {
 public:
  HttpClient();
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // method: GET, POST, PUT, PATCH, DELETE. A transport failure (refused,
  // timeout, DNS) is an Error with code "unreachable" (status 503) and
  // details {"request_sent": bool}: false only when the request cannot have
  // left (no name, no connection), so that even a POST may go elsewhere.
  // Any HTTP answer, 4xx and 5xx included, is a response.
  Result<HttpResponse> request(const std::string& method, const std::string& url, const std::string& body = "",
                               const std::string& content_type = "application/json",
                               const HttpRequestOptions& opts = {});

 private:
  // curl_easy_perform through a multi handle; returns the CURLcode, or -1 when should_abort ended it.
  int perform_abortable(const HttpRequestOptions& opts);

  void* curl_;   // CURL*, reused for keep-alive
  void* multi_;  // CURLM*, created on the first abortable request; holds its connections
};

// Percent-encodes a query parameter value.
std::string url_encode(std::string_view s);

}  // namespace cp
