#include "agent/executors/kube_client.h"

#include <openssl/evp.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <cstdlib>
#include <filesystem>

#include "agent/files.h"

namespace cp {
namespace fs = std::filesystem;

namespace {

Error config_error(const std::string& en, const std::string& zh) {
  return Error{"kube_config", 400, en, zh, {}};
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n')) ++i;
  return s.substr(i);
}

std::optional<std::string> base64_decode(std::string_view in) {
  std::string clean;
  for (char c : in) {
    if (c != '\n' && c != '\r' && c != ' ' && c != '\t') clean += c;
  }
  if (clean.size() % 4 != 0) return std::nullopt;
  std::string out(clean.size() / 4 * 3, '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(clean.data()), static_cast<int>(clean.size()));
  if (n < 0) return std::nullopt;
  // EVP_DecodeBlock counts the padding as zero bytes.
  std::size_t pad = 0;
  if (!clean.empty() && clean.back() == '=') ++pad;
  if (clean.size() > 1 && clean[clean.size() - 2] == '=') ++pad;
  out.resize(static_cast<std::size_t>(n) - pad);
  return out;
}

// The named entry of a kubeconfig list (clusters, users, contexts): its inner map.
YAML::Node named(const YAML::Node& list, const std::string& name, const char* inner) {
  if (!list || !list.IsSequence()) return YAML::Node();
  for (const auto& e : list) {
    if (e["name"] && e["name"].as<std::string>() == name) return e[inner];
  }
  return YAML::Node();
}

std::string str(const YAML::Node& map, const char* key) {
  if (!map || !map.IsMap() || !map[key] || !map[key].IsScalar()) return "";
  return map[key].as<std::string>();
}

// A file named in the kubeconfig (relative to its folder), or the *-data
// twin written under files_dir with mode 0600.
Result<std::string> file_or_data(const YAML::Node& map, const char* file_key, const char* data_key,
                                 const fs::path& base, const std::string& files_dir, const std::string& out_name) {
  std::string data = str(map, data_key);
  if (!data.empty()) {
    auto bytes = base64_decode(data);
    if (!bytes) {
      return config_error(std::string("kubeconfig: ") + data_key + " is not valid base64",
                          std::string("kubeconfig：") + data_key + " 不是有效的 base64");
    }
    CP_TRY(agent_files::make_dirs(files_dir));
    const std::string path = files_dir + "/" + out_name;
    CP_TRY(agent_files::write_atomic(path, *bytes, 0600));
    return path;
  }
  std::string file = str(map, file_key);
  if (file.empty()) return std::string();
  fs::path p(file);
  if (p.is_relative()) p = base / p;
  return p.lexically_normal().string();
}

std::int64_t mtime_ns(const struct stat& st) {
  return static_cast<std::int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
}

}  // namespace

Result<KubeConfig> load_kubeconfig(const std::string& path, const std::string& files_dir, const std::string& context) {
  YAML::Node root;
  try {
    root = YAML::LoadFile(path);
  } catch (const std::exception& e) {
    return config_error("cannot read kubeconfig " + path + ": " + e.what(),
                        "无法读取 kubeconfig " + path + "：" + e.what());
  }
  if (!root.IsMap()) return config_error("kubeconfig " + path + " is not a map", "kubeconfig " + path + " 不是映射");
  std::string ctx_name = context.empty() ? str(root, "current-context") : context;
  if (ctx_name.empty()) {
    return config_error("kubeconfig " + path + " has no current-context", "kubeconfig " + path + " 没有 current-context");
  }
  YAML::Node ctx = named(root["contexts"], ctx_name, "context");
  if (!ctx || !ctx.IsMap()) {
    return config_error("kubeconfig " + path + ": context \"" + ctx_name + "\" not found",
                        "kubeconfig " + path + "：找不到上下文 \"" + ctx_name + "\"");
  }
  const std::string cluster_name = str(ctx, "cluster");
  const std::string user_name = str(ctx, "user");
  YAML::Node cluster = named(root["clusters"], cluster_name, "cluster");
  if (!cluster || !cluster.IsMap() || str(cluster, "server").empty()) {
    return config_error("kubeconfig " + path + ": cluster \"" + cluster_name + "\" not found or has no server",
                        "kubeconfig " + path + "：集群 \"" + cluster_name + "\" 不存在或没有 server");
  }
  const fs::path base = fs::absolute(fs::path(path)).parent_path();
  KubeConfig cfg;
  cfg.server = str(cluster, "server");
  while (!cfg.server.empty() && cfg.server.back() == '/') cfg.server.pop_back();
  cfg.kube_namespace = str(ctx, "namespace");
  cfg.insecure_skip_verify = str(cluster, "insecure-skip-tls-verify") == "true";
  CP_ASSIGN(cfg.ca_file, file_or_data(cluster, "certificate-authority", "certificate-authority-data", base, files_dir,
                                      "ca.crt"));
  YAML::Node user = named(root["users"], user_name, "user");
  if (user && user.IsMap()) {
    if (user["exec"] || user["auth-provider"]) {
      return config_error("kubeconfig " + path + ": user \"" + user_name +
                              "\" uses an exec or auth-provider plugin, which the agent does not run; "
                              "use a token, a tokenFile or a client certificate",
                          "kubeconfig " + path + "：用户 \"" + user_name +
                              "\" 使用 exec 或 auth-provider 插件，agent 不支持；请使用 token、tokenFile 或客户端证书");
    }
    cfg.token = str(user, "token");
    std::string tf = str(user, "tokenFile");
    if (!tf.empty()) {
      fs::path p(tf);
      if (p.is_relative()) p = base / p;
      cfg.token_file = p.lexically_normal().string();
    }
    CP_ASSIGN(cfg.client_cert_file, file_or_data(user, "client-certificate", "client-certificate-data", base,
                                                 files_dir, "client.crt"));
    CP_ASSIGN(cfg.client_key_file,
              file_or_data(user, "client-key", "client-key-data", base, files_dir, "client.key"));
  }
  return cfg;
}

Result<KubeConfig> in_cluster_config(const std::string& sa_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    return config_error("not running in a Kubernetes pod (KUBERNETES_SERVICE_HOST/PORT unset); give --kubeconfig",
                        "未在 Kubernetes Pod 中运行（KUBERNETES_SERVICE_HOST/PORT 未设置）；请指定 --kubeconfig");
  }
  KubeConfig cfg;
  std::string h = host;
  if (h.find(':') != std::string::npos) h = "[" + h + "]";  // IPv6
  cfg.server = "https://" + h + ":" + port;
  cfg.token_file = sa_dir + "/token";
  if (!agent_files::read_all(cfg.token_file)) {
    return config_error("cannot read the service account token " + cfg.token_file,
                        "无法读取服务账号令牌 " + cfg.token_file);
  }
  if (fs::exists(sa_dir + "/ca.crt")) cfg.ca_file = sa_dir + "/ca.crt";
  if (auto ns = agent_files::read_all(sa_dir + "/namespace")) cfg.kube_namespace = trim(*ns);
  return cfg;
}

Error kube_status_error(long http_status, std::string_view body, const std::string& what) {
  std::string reason, message, kind, name;
  long code = http_status;
  boost::system::error_code ec;
  json::value v = json::parse(body, ec);
  const json::value* k = !ec && v.is_object() ? v.as_object().if_contains("kind") : nullptr;
  if (k && k->is_string() && k->as_string() == "Status") {
    const auto& o = v.as_object();
    if (auto* r = o.if_contains("reason"); r && r->is_string()) reason = r->as_string();
    if (auto* m = o.if_contains("message"); m && m->is_string()) message = m->as_string();
    if (auto* c = o.if_contains("code"); c && c->is_int64()) code = static_cast<long>(c->as_int64());
    if (auto* d = o.if_contains("details"); d && d->is_object()) {
      if (auto* k = d->as_object().if_contains("kind"); k && k->is_string()) kind = k->as_string();
      if (auto* n = d->as_object().if_contains("name"); n && n->is_string()) name = n->as_string();
    }
  }
  if (message.empty()) {
    std::string_view b = body.substr(0, 200);
    message = "HTTP " + std::to_string(http_status) + (b.empty() ? "" : ": " + std::string(b));
  }
  Error e;
  e.status = static_cast<int>(code > 0 ? code : http_status);
  switch (code) {
    case 401:
      e.code = "kube_unauthorized";
      e.message = "credential rejected by the Kubernetes API (" + what + "): " + message;
      e.message_zh = "Kubernetes API 拒绝了凭据（" + what + "）：" + message;
      break;
    case 403:
      e.code = "kube_forbidden";
      e.message = "forbidden by the Kubernetes API: " + message;
      e.message_zh = "Kubernetes API 禁止该操作：" + message;
      break;
    case 404:
      e.code = "kube_not_found";
      e.message = "not found in the Kubernetes API (" + what + "): " + message;
      e.message_zh = "Kubernetes API 中不存在（" + what + "）：" + message;
      break;
    case 409:
      e.code = reason == "AlreadyExists" ? "kube_already_exists" : "kube_conflict";
      e.message = "conflict in the Kubernetes API (" + what + "): " + message;
      e.message_zh = "Kubernetes API 冲突（" + what + "）：" + message;
      break;
    case 410:
      e.code = "kube_gone";
      e.message = "resource version expired (" + what + "): " + message;
      e.message_zh = "资源版本已过期（" + what + "）：" + message;
      break;
    case 422:
      e.code = "kube_invalid";
      e.message = "rejected as invalid by the Kubernetes API (" + what + "): " + message;
      e.message_zh = "Kubernetes API 认为请求无效（" + what + "）：" + message;
      break;
    default:
      e.code = "kube_error";
      e.message = "Kubernetes API error (" + what + "): " + message;
      e.message_zh = "Kubernetes API 出错（" + what + "）：" + message;
      break;
  }
  e.details["reason"] = reason;
  e.details["kind"] = kind;
  e.details["name"] = name;
  e.details["code"] = static_cast<std::int64_t>(code);
  return e;
}

std::string kube_namespaced(std::string_view group_version, const std::string& ns, std::string_view resource) {
  std::string p = group_version == "v1" ? "/api/v1" : "/apis/" + std::string(group_version);
  return p + "/namespaces/" + url_encode(ns) + "/" + std::string(resource);
}

KubeClient::KubeClient(KubeConfig config) : config_(std::move(config)) {}

HttpRequestOptions KubeClient::options(long timeout_ms) {
  HttpRequestOptions o;
  o.timeout_ms = timeout_ms;
  o.ca_file = config_.ca_file;
  o.client_cert_file = config_.client_cert_file;
  o.client_key_file = config_.client_key_file;
  o.insecure_skip_verify = config_.insecure_skip_verify;
  o.headers["Accept"] = "application/json";
  std::string token = config_.token;
  if (!config_.token_file.empty()) {
    // Projected service-account tokens are replaced about hourly: read the
    // file again whenever it changed rather than once at start.
    struct stat st {};
    if (::stat(config_.token_file.c_str(), &st) == 0 &&
        (mtime_ns(st) != token_mtime_ns_ || static_cast<std::int64_t>(st.st_size) != token_size_)) {
      if (auto t = agent_files::read_all(config_.token_file)) {
        file_token_ = trim(*t);
        token_mtime_ns_ = mtime_ns(st);
        token_size_ = static_cast<std::int64_t>(st.st_size);
      }
    }
    if (!file_token_.empty()) token = file_token_;
  }
  if (!token.empty()) o.headers["Authorization"] = "Bearer " + token;
  return o;
}

Result<HttpResponse> KubeClient::raw(const std::string& method, const std::string& path, const std::string& body,
                                     long timeout_ms) {
  std::lock_guard lock(mu_);
  return http_.request(method, config_.server + path, body, "application/json", options(timeout_ms));
}

Result<json::value> KubeClient::json_call(const std::string& method, const std::string& path, const std::string& body,
                                          const std::string& what) {
  CP_ASSIGN(auto resp, raw(method, path, body));
  if (resp.status < 200 || resp.status >= 300) return kube_status_error(resp.status, resp.body, what);
  boost::system::error_code ec;
  json::value v = json::parse(resp.body, ec);
  if (ec) {
    return Error{"kube_error", 502, "Kubernetes API (" + what + ") answered with something that is not JSON",
                 "Kubernetes API（" + what + "）的回答不是 JSON", {}};
  }
  return v;
}

Result<json::value> KubeClient::get(const std::string& path, const std::string& what) {
  return json_call("GET", path, "", what);
}
Result<json::value> KubeClient::post(const std::string& path, const json::value& body, const std::string& what) {
  return json_call("POST", path, json::serialize(body), what);
}
Result<json::value> KubeClient::del(const std::string& path, const json::value& body, const std::string& what) {
  return json_call("DELETE", path, json::serialize(body), what);
}

Result<long> KubeClient::stream(const std::string& path, const std::function<bool(std::string_view)>& on_line,
                                const std::function<bool()>& should_abort, long timeout_ms) {
  std::lock_guard lock(mu_);
  auto opts = options(timeout_ms);
  std::string pending;
  bool stopped = false;
  opts.on_data = [&](std::string_view chunk) {
    pending.append(chunk);
    std::size_t nl;
    while ((nl = pending.find('\n')) != std::string::npos) {
      std::string line = pending.substr(0, nl);
      pending.erase(0, nl + 1);
      if (!line.empty() && !on_line(line)) {
        stopped = true;
        return false;
      }
    }
    return true;
  };
  opts.should_abort = should_abort;
  auto resp = http_.request("GET", config_.server + path, "", "application/json", opts);
  if (!resp.ok()) return resp.error();
  // A body without a final newline (an error Status) is a line too.
  if (!stopped && !trim(pending).empty()) on_line(pending);
  return resp->status;
}

}  // namespace cp
