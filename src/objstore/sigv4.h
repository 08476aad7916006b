// AWS Signature Version 4 for S3 requests: the canonical request, the string
// to sign, the signing key and the Authorization header, step by step so
// that each step can be checked against AWS's published examples.
//
//   canonical request  = method \n uri \n query \n headers \n signed names \n payload hash
//   string to sign     = "AWS4-HMAC-SHA256" \n amz date \n scope \n hex(sha256(canonical request))
//   signing key        = HMAC(HMAC(HMAC(HMAC("AWS4" + secret, yyyymmdd), region), service), "aws4_request")
//   signature          = hex(HMAC(signing key, string to sign))
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/clock.h"

namespace cp::sigv4 {

struct Credentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // "" unless temporary credentials; sent as x-amz-security-token
};

// One request as the signer sees it.
struct Request {
  std::string method;
  std::string canonical_uri;  // the path as sent, already encoded with uri_encode_path ("/bucket/a%20b")
  std::vector<std::pair<std::string, std::string>> query;    // names and values as they are, not encoded
  std::vector<std::pair<std::string, std::string>> headers;  // every header to sign, "host" included
  std::string payload_sha256;  // hex SHA-256 of the body, or "UNSIGNED-PAYLOAD"
};

// RFC 3986 percent-encoding as SigV4 wants it: A-Z a-z 0-9 - . _ ~ stay,
// every other byte is %XX in upper-case hex ("+" -> %2B, " " -> %20).
std::string uri_encode(std::string_view s);
// The same, keeping '/' so that a key's segments stay a path.
std::string uri_encode_path(std::string_view s);

// name=value pairs, both encoded, sorted by name then value, joined with '&'.
// Also what the request URL carries, so that signed and sent are the same bytes.
std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query);

// "host;x-amz-content-sha256;x-amz-date": lower-case names, sorted.
std::string signed_header_names(const Request& req);
std::string canonical_request(const Request& req);
std::string string_to_sign(std::string_view amz_date, std::string_view scope, std::string_view canonical_request);
// Raw bytes (32); hex() them to compare with published values.
std::string signing_key(std::string_view secret, std::string_view date, std::string_view region,
                        std::string_view service);

// "20130524T000000Z" for a time in ms since the epoch (UTC).
std::string amz_date(Millis t);
// "20130524/us-east-1/s3/aws4_request".
std::string scope(std::string_view amz_date, std::string_view region, std::string_view service);

// The Authorization header value:
// "AWS4-HMAC-SHA256 Credential=<key id>/<scope>,SignedHeaders=<names>,Signature=<hex>".
std::string authorization(const Credentials& creds, const Request& req, std::string_view amz_date,
                          std::string_view region, std::string_view service);

// Query-string authentication (a presigned URL), for a request that carries
// no credential of its own: the signature goes in the query, over the
// X-Amz-* parameters, the host header alone and "UNSIGNED-PAYLOAD".
//
// The parameters to sign: X-Amz-Algorithm, X-Amz-Credential, X-Amz-Date,
// X-Amz-Expires (seconds from amz_date; S3 takes 1 to 604800),
// X-Amz-SignedHeaders=host, and X-Amz-Security-Token with a session token.
std::vector<std::pair<std::string, std::string>> presign_params(const Credentials& creds, std::string_view amz_date,
                                                                std::string_view region, std::string_view service,
                                                                std::int64_t expires_s);
// What goes after '?' in the URL: the canonical query of presign_params,
// then "&X-Amz-Signature=<hex>".
std::string presign_query(const Credentials& creds, std::string_view method, std::string_view canonical_uri,
                          std::string_view host, std::string_view amz_date, std::string_view region,
                          std::string_view service, std::int64_t expires_s);

std::string hmac_sha256(std::string_view key, std::string_view data);  // raw bytes
std::string hex(std::string_view bytes);                               // lower case

}  // namespace cp::sigv4
