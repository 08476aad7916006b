// KubeClient: the few calls the Kubernetes executor makes to a real
// kube-apiserver (REST + JSON over libcurl), with the credentials of a
// kubeconfig or of the pod's service account.
//
// Errors keep the API's own words: a `Status` object in the answer
// (kind: Status, reason, message, code, details) becomes an Error whose code
// names the reason and whose message is the API's message, e.g.
//   403 -> kube_forbidden: jobs.batch is forbidden: User "system:serviceaccount:x:y"
//          cannot create resource "jobs" in API group "batch" in the namespace "z"
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

#include "common/http_client.h"
#include "common/json.h"
#include "common/result.h"

namespace cp {

inline constexpr std::string_view kServiceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount";

struct KubeConfig {
  std::string server;  // "https://10.0.0.1:6443"
  std::string ca_file;
  bool insecure_skip_verify = false;
  std::string token;       // a static bearer token
  std::string token_file;  // read before each request when it changed: projected tokens rotate
  std::string client_cert_file;
  std::string client_key_file;
  std::string kube_namespace;  // the context's or the service account's; "" when neither says
};

// Reads a kubeconfig: current-context (or `context` when given) -> cluster
// (server, certificate-authority[-data], insecure-skip-tls-verify) and user
// (token, tokenFile, client-certificate[-data], client-key[-data]). Relative
// paths are relative to the kubeconfig's folder. The *-data fields are base64;
// they are written to files under `files_dir` (mode 0600), which libcurl reads.
Result<KubeConfig> load_kubeconfig(const std::string& path, const std::string& files_dir,
                                   const std::string& context = "");

// The pod's own credentials: https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT,
// <sa_dir>/token (re-read when it rotates), <sa_dir>/ca.crt, <sa_dir>/namespace.
Result<KubeConfig> in_cluster_config(const std::string& sa_dir = std::string(kServiceAccountDir));

// An Error from an answer that is not 2xx. `what` says what was asked, e.g.
// "create jobs"; the message is the Status object's message when there is one.
//   401 kube_unauthorized  "credential rejected by the Kubernetes API (...)"
//   403 kube_forbidden     the API's message (it names verb, resource, namespace)
//   404 kube_not_found, 409 kube_already_exists | kube_conflict, 410 kube_gone
//   (an expired resourceVersion), 422 kube_invalid, others kube_error.
// details: reason, kind, name, code.
Error kube_status_error(long http_status, std::string_view body, const std::string& what);

class KubeClient {
 public:
  explicit KubeClient(KubeConfig config);
  KubeClient(const KubeClient&) = delete;
  KubeClient& operator=(const KubeClient&) = delete;

  const KubeConfig& config() const { return config_; }

  // JSON calls; an answer that is not 2xx is an Error (kube_status_error).
  // `path` starts with "/api" or "/apis" and carries its query.
  Result<json::value> get(const std::string& path, const std::string& what);
  Result<json::value> post(const std::string& path, const json::value& body, const std::string& what);
  Result<json::value> del(const std::string& path, const json::value& body, const std::string& what);

  // The raw answer whatever its status (pod logs are text, not JSON).
  Result<HttpResponse> raw(const std::string& method, const std::string& path, const std::string& body = "",
                           long timeout_ms = 30000);

  // A streaming GET (watch): `on_line` gets each complete line of the body,
  // returning false to end it; `should_abort` is asked every ~50 ms. Returns
  // the HTTP status (a non-2xx answer's body also goes through on_line).
  Result<long> stream(const std::string& path, const std::function<bool(std::string_view)>& on_line,
                      const std::function<bool()>& should_abort, long timeout_ms);

 private:
  HttpRequestOptions options(long timeout_ms);
  Result<json::value> json_call(const std::string& method, const std::string& path, const std::string& body,
                                const std::string& what);

  KubeConfig config_;
  std::mutex mu_;  // one request at a time on the one connection
  HttpClient http_;
  std::string file_token_;
  std::int64_t token_mtime_ns_ = -1;
  std::int64_t token_size_ = -1;
};

// "jobs" in "/apis/batch/v1/namespaces/x/jobs/y?z" style helpers.
std::string kube_namespaced(std::string_view group_version, const std::string& ns, std::string_view resource);

}  // namespace cp
