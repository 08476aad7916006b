#include "common/http_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

namespace cp {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct BodySink {
  std::string* body;
  const std::function<bool(std::string_view)>* on_data;
};

size_t write_cb(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* sink = static_cast<BodySink*>(userdata);
  std::string_view chunk(ptr, size * nmemb);
  if (sink->on_data && *sink->on_data) {
    if (!(*sink->on_data)(chunk)) return 0;  // aborts the transfer
  } else {
    sink->body->append(chunk);
  }
  return size * nmemb;
}

// Called once per header line, status lines included; a new status line
// (after "100 Continue") starts the headers over.
size_t header_cb(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* headers = static_cast<std::map<std::string, std::string>*>(userdata);
  std::string_view line(ptr, size * nmemb);
  if (line.starts_with("HTTP/")) {
    headers->clear();
    return size * nmemb;
  }
  auto colon = line.find(':');
  if (colon == std::string_view::npos) return size * nmemb;
  std::string name(line.substr(0, colon));
  for (char& ch : name) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' ')) value.remove_suffix(1);
  (*headers)[std::move(name)] = std::string(value);
  return size * nmemb;
}

// After a transport failure: false only when the request cannot have left
// this machine (no name, no connection, no TLS session: libcurl never
// reached the transfer), so that a caller may send a non-idempotent request
// elsewhere. A timeout waiting for the answer, or a connection dropped
// mid-way, is true: the server may have acted on it.
bool request_may_have_been_sent(CURL* c, CURLcode rc) {
  if (rc == CURLE_COULDNT_RESOLVE_HOST || rc == CURLE_COULDNT_RESOLVE_PROXY || rc == CURLE_COULDNT_CONNECT) {
    return false;
  }
  curl_off_t pretransfer_us = 0;
  long request_bytes = 0;
  curl_easy_getinfo(c, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
  curl_easy_getinfo(c, CURLINFO_REQUEST_SIZE, &request_bytes);
  return pretransfer_us > 0 || request_bytes > 0;
}

}  // namespace

HttpClient::HttpClient() : multi_(nullptr) {
  global_init();
  curl_ = curl_easy_init();
  CP_CHECK(curl_ != nullptr, "curl_easy_init failed");
}

HttpClient::~HttpClient() {
  curl_easy_cleanup(static_cast<CURL*>(curl_));
  if (multi_) curl_multi_cleanup(static_cast<CURLM*>(multi_));
}

// The same transfer as curl_easy_perform, driven through a multi handle so
// that should_abort can be asked every abort_check_ms.
int HttpClient::perform_abortable(const HttpRequestOptions& opts) {
  CURL* c = static_cast<CURL*>(curl_);
  if (!multi_) {
    multi_ = curl_multi_init();
    CP_CHECK(multi_ != nullptr, "curl_multi_init failed");
  }
  CURLM* m = static_cast<CURLM*>(multi_);
  if (curl_multi_add_handle(m, c) != CURLM_OK) return CURLE_FAILED_INIT;
  std::vector<curl_waitfd> wake;
  for (int fd : opts.wake_fds) {
    if (fd >= 0) wake.push_back(curl_waitfd{fd, CURL_WAIT_POLLIN, 0});
  }
  int rc = CURLE_OK;
  for (;;) {
    int running = 0;
    if (curl_multi_perform(m, &running) != CURLM_OK) {
      rc = CURLE_RECV_ERROR;
      break;
    }
    if (running == 0) {
      int left = 0;
      rc = CURLE_RECV_ERROR;
      while (CURLMsg* msg = curl_multi_info_read(m, &left)) {
        if (msg->msg == CURLMSG_DONE && msg->easy_handle == c) rc = msg->data.result;
      }
      break;
    }
    if (opts.should_abort()) {
      rc = -1;
      break;
    }
    for (auto& w : wake) w.revents = 0;
    curl_multi_poll(m, wake.empty() ? nullptr : wake.data(), static_cast<unsigned>(wake.size()),
                    static_cast<int>(std::max(1L, opts.abort_check_ms)), nullptr);
    // A descriptor that fired stays ready (an exited process's pidfd): it
    // has had its say for this request.
    std::erase_if(wake, [](const curl_waitfd& w) { return w.revents != 0; });
  }
  curl_multi_remove_handle(m, c);
  return rc;
}

Result<HttpResponse> HttpClient::request(const std::string& method, const std::string& url, const std::string& body,
                                         const std::string& content_type, const HttpRequestOptions& opts) {
  CURL* c = static_cast<CURL*>(curl_);
  curl_easy_reset(c);
  HttpResponse resp;
  BodySink sink{&resp.body, &opts.on_data};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method.c_str());
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, opts.timeout_ms);
  // A stream (timeout 0) still gives up on a connection that does not open
  // within 10 s, not libcurl's 300 s.
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, opts.timeout_ms > 0 ? std::min(opts.timeout_ms, 10000L) : 10000L);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_cb);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &sink);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_cb);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &resp.headers);
  if (method == "HEAD") curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  if (!opts.ca_file.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, opts.ca_file.c_str());
  if (!opts.client_cert_file.empty()) curl_easy_setopt(c, CURLOPT_SSLCERT, opts.client_cert_file.c_str());
  if (!opts.client_key_file.empty()) curl_easy_setopt(c, CURLOPT_SSLKEY, opts.client_key_file.c_str());
  if (opts.insecure_skip_verify) {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  if (!body.empty() || method == "POST" || method == "PUT" || method == "PATCH") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
  }
  curl_slist* headers = nullptr;
  if (!body.empty()) headers = curl_slist_append(headers, ("Content-Type: " + content_type).c_str());
  headers = curl_slist_append(headers, "Expect:");
  for (const auto& [k, v] : opts.headers) headers = curl_slist_append(headers, (k + ": " + v).c_str());
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  CURLcode rc = CURLE_OK;
  if (opts.should_abort) {
    int prc = perform_abortable(opts);
    if (prc < 0) {
      curl_slist_free_all(headers);
      return Error{"aborted", 503, "request to " + url + " aborted", "对 " + url + " 的请求已中止", {}};
    }
    rc = static_cast<CURLcode>(prc);
  } else {
    rc = curl_easy_perform(c);
  }
  curl_slist_free_all(headers);
  if (rc != CURLE_OK && !(rc == CURLE_WRITE_ERROR && opts.on_data)) {
    Error e{"unreachable", 503, "cannot reach " + url + ": " + curl_easy_strerror(rc),
            "无法连接 " + url + "：" + curl_easy_strerror(rc), {}};
    e.details["request_sent"] = request_may_have_been_sent(c, rc);
    return e;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp.status);
  char* ct = nullptr;
  curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
  if (ct) resp.content_type = ct;
  return resp;
}

std::string url_encode(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char ch : s) {
    if (std::isalnum(ch) || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += hex[ch >> 4];
      out += hex[ch & 15];
    }
  }
  return out;
}

}  // namespace cp
