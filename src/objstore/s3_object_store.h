// An ObjectStore on any S3-compatible service (AWS S3, MinIO, Ceph RGW, ...):
//
//   --objects 's3://bucket/optional/prefix?endpoint=http://127.0.0.1:4568&region=us-east-1&style=path'
//
// Key "logs/t1/..." is the S3 object "<prefix>/logs/t1/..." in the bucket.
// Requests are signed with AWS Signature Version 4 (sigv4.h) using
// AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN), and go
// over libcurl (common/http_client.h).
//
//   put   PUT object; above multipart_threshold: CreateMultipartUpload,
//         UploadPart..., CompleteMultipartUpload (AbortMultipartUpload on failure)
//   get   GET object (NoSuchKey -> nullopt)
//   list  ListObjectsV2, following continuation tokens up to `limit`
//   remove DELETE object (S3 answers 204 whether or not it existed)
//
// Unreachable endpoints, 5xx and 429 answers are retried with exponential
// backoff for requests that may be repeated (everything but the two POSTs of
// a multipart upload), then reported as `unavailable` (503, details.retryable).
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/http_client.h"
#include "objstore/object_store.h"
#include "objstore/sigv4.h"

namespace cp {

enum class S3AddressingStyle {
  kPath,     // http://endpoint/bucket/key   (the default with a custom endpoint)
  kVirtual,  // http://bucket.endpoint/key   (the default on AWS)
};

struct S3Options {
  std::string bucket;
  std::string prefix;    // keys live under "<prefix>/"; "" for the whole bucket
  std::string endpoint;  // "http://127.0.0.1:4568"; "" = AWS, https://s3.<region>.amazonaws.com
  std::string region = "us-east-1";
  S3AddressingStyle style = S3AddressingStyle::kPath;
  // Objects larger than this go up in parts of max(threshold, 5 MiB) bytes
  // (5 MiB is S3's smallest part but the last).
  std::int64_t multipart_threshold = 8 * 1024 * 1024;
  sigv4::Credentials credentials;
  int list_page_keys = 1000;  // max-keys per ListObjectsV2 call (S3 caps it at 1000)
  int max_attempts = 4;     // per request that may be repeated; 1 = no retries
  int retry_base_ms = 200;  // waits base, 2 base, 4 base, ... at most 5 s
  long timeout_ms = 120'000;
  const Clock* clock = nullptr;  // signing time; nullptr = the system clock (S3 refuses skews over 15 min)
};

// s3://bucket[/prefix][?endpoint=URL&region=R&style=path|virtual&multipart_threshold=BYTES].
// Credentials are not part of the URL.
Result<S3Options> parse_s3_url(const std::string& url);

// AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (both needed), AWS_SESSION_TOKEN (optional).
Result<sigv4::Credentials> s3_credentials_from_env();

// Where one request goes.
struct S3Target {
  std::string url;            // what curl is given, query included
  std::string host;           // the Host header (signed)
  std::string canonical_uri;  // the encoded path, as signed
};

class S3ObjectStore : public ObjectStore {
 public:
  static Result<std::unique_ptr<S3ObjectStore>> open(S3Options options);

  Result<ObjectInfo> put(const std::string& key, std::string_view data) override;
  Result<std::optional<std::string>> get(const std::string& key) override;
  Result<std::vector<ObjectInfo>> list(const std::string& prefix, const std::string& start_after = "",
                                       int limit = 1000) override;
  Status remove(const std::string& key) override;
  std::string url() const override;
  // A presigned GET (SigV4 query authentication, X-Amz-Expires = min(ttl_s, 7 days)).
  Result<std::string> read_url(const std::string& key, std::int64_t ttl_s) override;

  // The target of a request on `object` (the full S3 key, prefix included;
  // "" for the bucket itself) with the given query parameters.
  S3Target target(std::string_view object,
                  const std::vector<std::pair<std::string, std::string>>& query = {}) const;

  const S3Options& options() const { return options_; }

 private:
  struct Call;
  explicit S3ObjectStore(S3Options options, std::string scheme, std::string host);

  Result<HttpResponse> execute(const Call& call);
  Result<ObjectInfo> put_multipart(const std::string& key, const std::string& object, std::string_view data);
  std::string object_name(const std::string& key) const;  // prefix + "/" + key
  std::unique_ptr<HttpClient> lease_client();
  void return_client(std::unique_ptr<HttpClient> client);

  S3Options options_;
  std::string scheme_;  // "http" or "https"
  std::string host_;    // endpoint host[:port]
  std::mutex clients_mu_;
  std::vector<std::unique_ptr<HttpClient>> idle_clients_;  // one per concurrent request, kept for keep-alive
};

// x-amz-version-id of a PUT or CompleteMultipartUpload answer; "" when the
// bucket has no versioning (no header) or it is suspended ("null").
std::string s3_version_id(const HttpResponse& response);

}  // namespace cp
