#include "objstore/s3_object_store.h"

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <ctime>
#include <thread>

#include "common/ids.h"
#include "objstore/s3_xml.h"

namespace cp {
namespace {

constexpr std::int64_t kMinPartBytes = 5 * 1024 * 1024;  // S3's smallest part (but the last)
constexpr std::int64_t kMaxParts = 10'000;                // S3's most parts per upload
constexpr int kMaxBackoffMs = 5000;

Error bad_url(const std::string& url, const std::string& en, const std::string& zh) {
  Error e{"unsupported_objects_url", 400, "objects URL \"" + url + "\": " + en,
          "对象存储地址 \"" + url + "\"：" + zh, {}};
  e.details["url"] = url;
  return e;
}

std::string percent_decode(std::string_view s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size()) {
      unsigned v = 0;
      auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
      if (ec == std::errc() && p == s.data() + i + 3) {
        out += static_cast<char>(v);
        i += 2;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

// S3's bucket naming rule: 3-63 of a-z 0-9 . -, starting and ending with a
// letter or digit. It is also what makes "bucket.endpoint" a valid host.
bool valid_bucket(std::string_view b) {
  if (b.size() < 3 || b.size() > 63) return false;
  for (char ch : b) {
    if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '.' || ch == '-')) return false;
  }
  auto alnum = [](char ch) { return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9'); };
  return alnum(b.front()) && alnum(b.back()) && b.find("..") == std::string_view::npos;
}

bool is_ip_literal(std::string_view host) {
  std::string_view name = host;
  if (name.starts_with('[')) return true;  // IPv6
  name = name.substr(0, name.find(':'));
  return !name.empty() && name.find_first_not_of("0123456789.") == std::string_view::npos;
}

// "http://host:port[/]" -> ("http", "host:port").
bool split_endpoint(std::string_view endpoint, std::string& scheme, std::string& host) {
  for (std::string_view s : {"http", "https"}) {
    std::string prefix = std::string(s) + "://";
    if (endpoint.starts_with(prefix)) {
      std::string_view rest = endpoint.substr(prefix.size());
      if (rest.ends_with('/')) rest.remove_suffix(1);
      if (rest.empty() || rest.find_first_of("/?#@ ") != std::string_view::npos) return false;
      scheme = std::string(s);
      host = std::string(rest);
      return true;
    }
  }
  return false;
}

// "Fri, 24 May 2013 00:00:00 GMT" -> ms, or 0.
Millis parse_http_date(const std::string& s) {
  std::tm tm{};
  const char* end = ::strptime(s.c_str(), "%a, %d %b %Y %H:%M:%S", &tm);
  if (end == nullptr) return 0;
  return static_cast<Millis>(::timegm(&tm)) * 1000;
}

bool is_retryable_status(long status, std::string_view body) {
  if (status >= 500 || status == 429) return true;
  // S3's "your socket was idle too long" is a 400 that a retry cures.
  return status == 400 && s3xml::text(body, "Code").value_or("") == "RequestTimeout";
}

}  // namespace

// --------------------------------------------------------------------- URL

Result<S3Options> parse_s3_url(const std::string& url) {
  constexpr std::string_view kScheme = "s3://";
  if (!url.starts_with(kScheme)) return bad_url(url, "must start with s3://", "必须以 s3:// 开头");
  std::string_view rest = std::string_view(url).substr(kScheme.size());
  std::string_view path = rest.substr(0, rest.find('?'));
  std::string_view query = path.size() < rest.size() ? rest.substr(path.size() + 1) : std::string_view();

  S3Options o;
  std::size_t slash = path.find('/');
  o.bucket = std::string(path.substr(0, slash));
  if (!valid_bucket(o.bucket)) {
    return bad_url(url,
                   "bucket \"" + o.bucket + "\" is not a valid S3 bucket name (3-63 of a-z 0-9 . -, starting and "
                   "ending with a letter or digit)",
                   "存储桶名称 \"" + o.bucket + "\" 无效（3 到 63 个 a-z 0-9 . - 字符，以字母或数字开头和结尾）");
  }
  if (slash != std::string_view::npos) {
    std::string prefix(path.substr(slash + 1));
    while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
    if (!prefix.empty()) {
      Status ok = validate_object_key(prefix);
      if (!ok.ok()) {
        return bad_url(url, "invalid prefix \"" + prefix + "\": " + ok.error().message,
                       "无效的前缀 \"" + prefix + "\"：" + ok.error().message_zh);
      }
    }
    o.prefix = std::move(prefix);
  }

  bool style_given = false;
  while (!query.empty()) {
    std::string_view pair = query.substr(0, query.find('&'));
    query.remove_prefix(std::min(query.size(), pair.size() + 1));
    if (pair.empty()) continue;
    std::size_t eq = pair.find('=');
    std::string name(pair.substr(0, eq));
    std::string value = eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1));
    if (name == "endpoint") {
      std::string scheme, host;
      if (!split_endpoint(value, scheme, host)) {
        return bad_url(url, "endpoint \"" + value + "\" must be http://host[:port] or https://host[:port]",
                       "endpoint \"" + value + "\" 必须是 http://host[:port] 或 https://host[:port]");
      }
      o.endpoint = scheme + "://" + host;
    } else if (name == "region") {
      if (value.empty() || value.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789-") != std::string::npos) {
        return bad_url(url, "region \"" + value + "\" is not a region name (like us-east-1)",
                       "region \"" + value + "\" 不是有效的区域名（例如 us-east-1）");
      }
      o.region = value;
    } else if (name == "style") {
      if (value == "path") {
        o.style = S3AddressingStyle::kPath;
      } else if (value == "virtual") {
        o.style = S3AddressingStyle::kVirtual;
      } else {
        return bad_url(url, "style must be path or virtual, not \"" + value + "\"",
                       "style 必须是 path 或 virtual，而不是 \"" + value + "\"");
      }
      style_given = true;
    } else if (name == "multipart_threshold") {
      std::int64_t v = 0;
      auto [p, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
      if (ec != std::errc() || p != value.data() + value.size() || v < 1) {
        return bad_url(url, "multipart_threshold must be a positive number of bytes, not \"" + value + "\"",
                       "multipart_threshold 必须是正整数字节数，而不是 \"" + value + "\"");
      }
      o.multipart_threshold = v;
    } else {
      return bad_url(url,
                     "unknown parameter \"" + name + "\" (known: endpoint, region, style, multipart_threshold)",
                     "未知参数 \"" + name + "\"（可用：endpoint、region、style、multipart_threshold）");
    }
  }
  // AWS itself prefers virtual hosts; other services are reached by address,
  // where "bucket.<ip>" cannot work, so path style.
  if (!style_given) o.style = o.endpoint.empty() ? S3AddressingStyle::kVirtual : S3AddressingStyle::kPath;
  return o;
}

Result<sigv4::Credentials> s3_credentials_from_env() {
  const char* id = std::getenv("AWS_ACCESS_KEY_ID");
  const char* secret = std::getenv("AWS_SECRET_ACCESS_KEY");
  const char* token = std::getenv("AWS_SESSION_TOKEN");
  if (id == nullptr || *id == '\0' || secret == nullptr || *secret == '\0') {
    return Error{"object_store_credentials_missing", 400,
                 "S3 object store needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                 "S3 对象存储需要凭据：请设置 AWS_ACCESS_KEY_ID 和 AWS_SECRET_ACCESS_KEY", {}};
  }
  return sigv4::Credentials{id, secret, token ? token : ""};
}

std::string s3_version_id(const HttpResponse& response) {
  auto it = response.headers.find("x-amz-version-id");
  if (it == response.headers.end() || it->second == "null") return "";
  return it->second;
}

// ------------------------------------------------------------------- store

// One S3 request, as the store describes it before signing.
struct S3ObjectStore::Call {
  const char* op;      // S3's name for it, for messages: "PutObject"
  std::string method;  // GET, PUT, POST, DELETE
  std::string object;  // full S3 key; "" for the bucket
  std::vector<std::pair<std::string, std::string>> query;
  std::string body;
  bool repeatable = true;  // may be sent again when the answer was lost or a 5xx
};

S3ObjectStore::S3ObjectStore(S3Options options, std::string scheme, std::string host)
    : options_(std::move(options)), scheme_(std::move(scheme)), host_(std::move(host)) {}

Result<std::unique_ptr<S3ObjectStore>> S3ObjectStore::open(S3Options options) {
  const std::string shown = "s3://" + options.bucket;
  if (!valid_bucket(options.bucket)) {
    return bad_url(shown, "bucket \"" + options.bucket + "\" is not a valid S3 bucket name",
                   "存储桶名称 \"" + options.bucket + "\" 无效");
  }
  std::string scheme = "https";
  std::string host = "s3." + options.region + ".amazonaws.com";
  if (!options.endpoint.empty() && !split_endpoint(options.endpoint, scheme, host)) {
    return bad_url(shown, "endpoint \"" + options.endpoint + "\" must be http://host[:port] or https://host[:port]",
                   "endpoint \"" + options.endpoint + "\" 必须是 http://host[:port] 或 https://host[:port]");
  }
  if (options.style == S3AddressingStyle::kVirtual && is_ip_literal(host)) {
    return bad_url(shown, "virtual-host style needs a host name, not the address " + host + ": use style=path",
                   "虚拟主机方式需要主机名而不是地址 " + host + "：请使用 style=path");
  }
  if (options.credentials.access_key_id.empty() || options.credentials.secret_access_key.empty()) {
    return Error{"object_store_credentials_missing", 400,
                 "S3 object store needs credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY",
                 "S3 对象存储需要凭据：请设置 AWS_ACCESS_KEY_ID 和 AWS_SECRET_ACCESS_KEY", {}};
  }
  options.max_attempts = std::max(1, options.max_attempts);
  options.list_page_keys = std::clamp(options.list_page_keys, 1, 1000);
  options.multipart_threshold = std::max<std::int64_t>(1, options.multipart_threshold);
  if (options.clock == nullptr) options.clock = &SystemClock::instance();
  return std::unique_ptr<S3ObjectStore>(new S3ObjectStore(std::move(options), std::move(scheme), std::move(host)));
}

std::string S3ObjectStore::url() const {
  std::string u = "s3://" + options_.bucket;
  if (!options_.prefix.empty()) u += "/" + options_.prefix;
  u += "?endpoint=" + scheme_ + "://" + host_ + "&region=" + options_.region +
       "&style=" + (options_.style == S3AddressingStyle::kPath ? "path" : "virtual");
  if (options_.multipart_threshold != S3Options{}.multipart_threshold) {
    u += "&multipart_threshold=" + std::to_string(options_.multipart_threshold);
  }
  return u;
}

S3Target S3ObjectStore::target(std::string_view object,
                               const std::vector<std::pair<std::string, std::string>>& query) const {
  S3Target t;
  if (options_.style == S3AddressingStyle::kVirtual) {
    t.host = options_.bucket + "." + host_;
    t.canonical_uri = "/" + sigv4::uri_encode_path(object);
  } else {
    t.host = host_;
    t.canonical_uri = "/" + options_.bucket;
    if (!object.empty()) t.canonical_uri += "/" + sigv4::uri_encode_path(object);
  }
  t.url = scheme_ + "://" + t.host + t.canonical_uri;
  std::string q = sigv4::canonical_query(query);
  if (!q.empty()) t.url += "?" + q;
  return t;
}

std::string S3ObjectStore::object_name(const std::string& key) const {
  return options_.prefix.empty() ? key : options_.prefix + "/" + key;
}

std::unique_ptr<HttpClient> S3ObjectStore::lease_client() {
  {
    std::lock_guard<std::mutex> lock(clients_mu_);
    if (!idle_clients_.empty()) {
      auto c = std::move(idle_clients_.back());
      idle_clients_.pop_back();
      return c;
    }
  }
  return std::make_unique<HttpClient>();
}

void S3ObjectStore::return_client(std::unique_ptr<HttpClient> client) {
  std::lock_guard<std::mutex> lock(clients_mu_);
  idle_clients_.push_back(std::move(client));
}

namespace {

std::string describe(const char* op, const std::string& bucket, const std::string& object) {
  return std::string("S3 ") + op + " s3://" + bucket + (object.empty() ? "" : "/" + object);
}

// S3 refused the request: its <Error> (Code, Message) goes into the message.
Error s3_refusal(const char* op, const std::string& bucket, const std::string& object, const HttpResponse& r) {
  std::string code = s3xml::text(r.body, "Code").value_or("");
  std::string message = s3xml::text(r.body, "Message").value_or("");
  std::string request_id = s3xml::text(r.body, "RequestId").value_or("");
  std::string what = std::to_string(r.status) + (code.empty() ? "" : " " + code) +
                     (message.empty() ? "" : ": " + message);
  std::string hint_en, hint_zh;
  if (code == "SignatureDoesNotMatch") {
    hint_en = " (check AWS_SECRET_ACCESS_KEY and the region)";
    hint_zh = "（请检查 AWS_SECRET_ACCESS_KEY 和区域）";
  } else if (code == "InvalidAccessKeyId") {
    hint_en = " (check AWS_ACCESS_KEY_ID)";
    hint_zh = "（请检查 AWS_ACCESS_KEY_ID）";
  } else if (code == "NoSuchBucket") {
    hint_en = " (create the bucket first)";
    hint_zh = "（请先创建存储桶）";
  }
  bool denied = r.status == 401 || r.status == 403;
  int status = r.status >= 400 && r.status < 500 ? static_cast<int>(r.status) : 502;
  Error e{denied ? "object_store_forbidden" : "object_store_rejected", status,
          describe(op, bucket, object) + " failed: " + what + hint_en,
          describe(op, bucket, object) + " 失败：" + what + hint_zh, {}};
  e.details["s3_status"] = r.status;
  if (!code.empty()) e.details["s3_code"] = code;
  if (!request_id.empty()) e.details["s3_request_id"] = request_id;
  e.details["retryable"] = false;
  return e;
}

Error bad_answer(const char* op, const std::string& bucket, const std::string& object, const std::string& what) {
  Error e{"object_store_bad_response", 502, describe(op, bucket, object) + ": unexpected answer: " + what,
          describe(op, bucket, object) + "：无法理解的响应：" + what, {}};
  return e;
}

}  // namespace

// Signs and sends one call, again after a backoff while the answer is a
// transport failure, a 5xx or a 429 and the call may be repeated. Returns
// the first other answer, 4xx included, for the caller to read.
Result<HttpResponse> S3ObjectStore::execute(const Call& call) {
  const S3Target t = target(call.object, call.query);
  const std::string payload_hash = sha256_hex(call.body);
  const int attempts = call.repeatable ? options_.max_attempts : 1;
  std::string last_failure;
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1) {
      int wait = options_.retry_base_ms;
      for (int i = 2; i < attempt && wait < kMaxBackoffMs; ++i) wait *= 2;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(wait, kMaxBackoffMs)));
    }
    const std::string date = sigv4::amz_date(options_.clock->now_ms());
    sigv4::Request req{call.method, t.canonical_uri, call.query,
                       {{"host", t.host}, {"x-amz-content-sha256", payload_hash}, {"x-amz-date", date}},
                       payload_hash};
    if (!options_.credentials.session_token.empty()) {
      req.headers.emplace_back("x-amz-security-token", options_.credentials.session_token);
    }
    HttpRequestOptions opts;
    opts.timeout_ms = options_.timeout_ms;
    for (const auto& [name, value] : req.headers) opts.headers[name == "host" ? "Host" : name] = value;
    opts.headers["Authorization"] =
        sigv4::authorization(options_.credentials, req, date, options_.region, "s3");

    auto client = lease_client();
    auto r = client->request(call.method, t.url, call.body, "application/octet-stream", opts);
    return_client(std::move(client));
    if (!r.ok()) {
      last_failure = r.error().message;
      continue;
    }
    if (is_retryable_status(r->status, r->body)) {
      std::string code = s3xml::text(r->body, "Code").value_or("");
      last_failure = "answered " + std::to_string(r->status) + (code.empty() ? "" : " " + code);
      continue;
    }
    return std::move(r).value();
  }
  std::string tries = attempts == 1 ? "" : " after " + std::to_string(attempts) + " attempts";
  Error e{"unavailable", 503,
          describe(call.op, options_.bucket, call.object) + " failed" + tries + ": " + last_failure,
          describe(call.op, options_.bucket, call.object) + " 失败" +
              (attempts == 1 ? "" : "（已尝试 " + std::to_string(attempts) + " 次）") + "：" + last_failure,
          {}};
  e.details["retryable"] = true;
  e.details["attempts"] = attempts;
  e.details["endpoint"] = scheme_ + "://" + host_;
  return e;
}

// A presigned GET: the URL is the credential, so no request is made here and
// nothing says whether the key exists (a missing one is S3's 404 on use).
// Signed now, by the injected clock: S3 counts X-Amz-Expires from X-Amz-Date.
Result<std::string> S3ObjectStore::read_url(const std::string& key, std::int64_t ttl_s) {
  CP_TRY(validate_object_key(key));
  const S3Target t = target(object_name(key));
  const std::int64_t expires = std::clamp<std::int64_t>(ttl_s, 1, kMaxReadUrlTtlS);  // S3 refuses more than 7 days
  const std::string date = sigv4::amz_date(options_.clock->now_ms());
  return t.url + "?" +
         sigv4::presign_query(options_.credentials, "GET", t.canonical_uri, t.host, date, options_.region, "s3",
                              expires);
}

Result<ObjectInfo> S3ObjectStore::put(const std::string& key, std::string_view data) {
  CP_TRY(validate_object_key(key));
  const std::string object = object_name(key);
  if (static_cast<std::int64_t>(data.size()) > options_.multipart_threshold) return put_multipart(key, object, data);
  CP_ASSIGN(HttpResponse r, execute(Call{"PutObject", "PUT", object, {}, std::string(data)}));
  if (r.status != 200) return s3_refusal("PutObject", options_.bucket, object, r);
  Millis when = parse_http_date(r.headers["date"]);
  return ObjectInfo{key, static_cast<std::int64_t>(data.size()), when ? when : options_.clock->now_ms(),
                    s3_version_id(r)};
}

// Parts of max(threshold, 5 MiB), more if 10,000 would not hold the object.
// Any failure after the upload began aborts it, so that S3 does not keep
// (and bill) the parts; the abort itself is best effort.
Result<ObjectInfo> S3ObjectStore::put_multipart(const std::string& key, const std::string& object,
                                                std::string_view data) {
  const auto size = static_cast<std::int64_t>(data.size());
  std::int64_t part_size = std::max(options_.multipart_threshold, kMinPartBytes);
  part_size = std::max(part_size, (size + kMaxParts - 1) / kMaxParts);

  // Not repeatable: a lost answer would leave an upload nobody knows to abort.
  CP_ASSIGN(HttpResponse created, execute(Call{"CreateMultipartUpload", "POST", object, {{"uploads", ""}}, "", false}));
  if (created.status != 200) return s3_refusal("CreateMultipartUpload", options_.bucket, object, created);
  std::string upload_id = s3xml::text(created.body, "UploadId").value_or("");
  if (upload_id.empty()) return bad_answer("CreateMultipartUpload", options_.bucket, object, "no UploadId");

  auto abort = [&](Error e) -> Error {
    (void)execute(Call{"AbortMultipartUpload", "DELETE", object, {{"uploadId", upload_id}}, "", true});
    e.details["upload_id"] = upload_id;
    return e;
  };

  std::string complete = "<CompleteMultipartUpload>";
  int part = 0;
  for (std::int64_t offset = 0; offset < size; offset += part_size) {
    ++part;
    std::string_view piece = data.substr(static_cast<std::size_t>(offset), static_cast<std::size_t>(part_size));
    auto r = execute(Call{"UploadPart", "PUT", object,
                          {{"partNumber", std::to_string(part)}, {"uploadId", upload_id}}, std::string(piece)});
    if (!r.ok()) return abort(r.error());
    if (r->status != 200) return abort(s3_refusal("UploadPart", options_.bucket, object, *r));
    auto etag = r->headers.find("etag");
    if (etag == r->headers.end() || etag->second.empty()) {
      return abort(bad_answer("UploadPart", options_.bucket, object, "no ETag for part " + std::to_string(part)));
    }
    complete += "<Part><PartNumber>" + std::to_string(part) + "</PartNumber><ETag>" + s3xml::escape(etag->second) +
                "</ETag></Part>";
  }
  complete += "</CompleteMultipartUpload>";

  auto done = execute(Call{"CompleteMultipartUpload", "POST", object, {{"uploadId", upload_id}}, complete, false});
  if (!done.ok()) return abort(done.error());
  // S3 may answer 200 and still fail: the error is then the body.
  if (done->status != 200 || s3xml::root_name(done->body) == "Error") {
    HttpResponse refused = *done;
    if (refused.status == 200) refused.status = 500;
    return abort(s3_refusal("CompleteMultipartUpload", options_.bucket, object, refused));
  }
  Millis when = parse_http_date(done->headers["date"]);
  return ObjectInfo{key, size, when ? when : options_.clock->now_ms(), s3_version_id(*done)};
}

Result<std::optional<std::string>> S3ObjectStore::get(const std::string& key) {
  CP_TRY(validate_object_key(key));
  const std::string object = object_name(key);
  CP_ASSIGN(HttpResponse r, execute(Call{"GetObject", "GET", object, {}, ""}));
  if (r.status == 200) return std::optional<std::string>(std::move(r.body));
  if (r.status == 404) {
    // A missing key is nullopt; a missing bucket is a configuration error.
    std::string code = s3xml::text(r.body, "Code").value_or("");
    if (code.empty() || code == "NoSuchKey") return std::optional<std::string>();
  }
  return s3_refusal("GetObject", options_.bucket, object, r);
}

Result<std::vector<ObjectInfo>> S3ObjectStore::list(const std::string& prefix, const std::string& start_after,
                                                    int limit) {
  CP_TRY(validate_list_request(prefix, limit));
  std::vector<ObjectInfo> out;
  if (limit == 0) return out;
  const std::string root = options_.prefix.empty() ? "" : options_.prefix + "/";
  const std::string full_prefix = root + prefix;
  std::string token;
  while (static_cast<int>(out.size()) < limit) {
    const int page = std::min(options_.list_page_keys, limit - static_cast<int>(out.size()));
    std::vector<std::pair<std::string, std::string>> query{{"list-type", "2"}, {"max-keys", std::to_string(page)}};
    if (!full_prefix.empty()) query.emplace_back("prefix", full_prefix);
    if (!token.empty()) {
      query.emplace_back("continuation-token", token);
    } else if (!start_after.empty()) {
      query.emplace_back("start-after", root + start_after);
    }
    CP_ASSIGN(HttpResponse r, execute(Call{"ListObjectsV2", "GET", "", std::move(query), ""}));
    if (r.status != 200) return s3_refusal("ListObjectsV2", options_.bucket, full_prefix, r);
    if (s3xml::root_name(r.body) != "ListBucketResult") {
      return bad_answer("ListObjectsV2", options_.bucket, full_prefix, "no ListBucketResult");
    }
    for (std::string_view contents : s3xml::elements(r.body, "Contents")) {
      auto name = s3xml::text(contents, "Key");
      if (!name || !name->starts_with(root)) continue;  // not ours: cannot happen with a prefix query
      ObjectInfo info{name->substr(root.size()), 0, 0, ""};
      std::string size = s3xml::text(contents, "Size").value_or("0");
      std::from_chars(size.data(), size.data() + size.size(), info.size);
      (void)parse_time(s3xml::text(contents, "LastModified").value_or(""), info.modified_ms);
      if (static_cast<int>(out.size()) < limit) out.push_back(std::move(info));
    }
    if (s3xml::text(r.body, "IsTruncated").value_or("false") != "true") break;
    std::string next = s3xml::text(r.body, "NextContinuationToken").value_or("");
    if (next.empty() || next == token) {
      return bad_answer("ListObjectsV2", options_.bucket, full_prefix, "truncated without a new continuation token");
    }
    token = std::move(next);
  }
  return out;
}

Status S3ObjectStore::remove(const std::string& key) {
  CP_TRY(validate_object_key(key));
  const std::string object = object_name(key);
  CP_ASSIGN(HttpResponse r, execute(Call{"DeleteObject", "DELETE", object, {}, ""}));
  if (r.status == 204 || r.status == 200) return {};
  if (r.status == 404 && s3xml::text(r.body, "Code").value_or("NoSuchKey") == "NoSuchKey") return {};
  return s3_refusal("DeleteObject", options_.bucket, object, r);
}

}  // namespace cp
