#include "objstore/sigv4.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <cctype>
#include <ctime>

#include "common/ids.h"
#include "common/result.h"

namespace cp::sigv4 {
namespace {

constexpr char kHex[] = "0123456789ABCDEF";

bool unreserved(unsigned char ch) {
  // Spelled out: isalnum() depends on the locale.
  return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
         ch == '.' || ch == '_' || ch == '~';
}

std::string encode(std::string_view s, bool keep_slash) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char ch : s) {
    if (unreserved(ch) || (keep_slash && ch == '/')) {
      out += static_cast<char>(ch);
    } else {
      out += '%';
      out += kHex[ch >> 4];
      out += kHex[ch & 15];
    }
  }
  return out;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& ch : out) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return out;
}

// Canonical header values: no leading or trailing blanks, inner runs of
// spaces as one.
std::string trim_value(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  std::string out;
  out.reserve(v.size());
  for (char ch : v) {
    if (ch == '\t') ch = ' ';
    if (ch == ' ' && !out.empty() && out.back() == ' ') continue;
    out += ch;
  }
  return out;
}

// Lower-case names with their trimmed values, sorted by name; a header given
// twice is one line with the values joined by ','.
std::vector<std::pair<std::string, std::string>> canonical_headers(const Request& req) {
  std::vector<std::pair<std::string, std::string>> hs;
  for (const auto& [name, value] : req.headers) hs.emplace_back(lower(name), trim_value(value));
  std::stable_sort(hs.begin(), hs.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::pair<std::string, std::string>> merged;
  for (auto& h : hs) {
    if (!merged.empty() && merged.back().first == h.first) {
      merged.back().second += "," + h.second;
    } else {
      merged.push_back(std::move(h));
    }
  }
  return merged;
}

}  // namespace

std::string uri_encode(std::string_view s) { return encode(s, false); }
std::string uri_encode_path(std::string_view s) { return encode(s, true); }

std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) encoded.emplace_back(uri_encode(name), uri_encode(value));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out += '&';
    out += name + "=" + value;
  }
  return out;
}

std::string signed_header_names(const Request& req) {
  std::string out;
  for (const auto& h : canonical_headers(req)) {
    if (!out.empty()) out += ';';
    out += h.first;
  }
  return out;
}

std::string canonical_request(const Request& req) {
  std::string out = req.method + "\n" + req.canonical_uri + "\n" + canonical_query(req.query) + "\n";
  for (const auto& [name, value] : canonical_headers(req)) out += name + ":" + value + "\n";
  out += "\n" + signed_header_names(req) + "\n" + req.payload_sha256;
  return out;
}

std::string string_to_sign(std::string_view amz_date, std::string_view scope, std::string_view canonical_request) {
  return "AWS4-HMAC-SHA256\n" + std::string(amz_date) + "\n" + std::string(scope) + "\n" +
         sha256_hex(canonical_request);
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  const unsigned char* ok = HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                                 reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, &len);
  CP_CHECK(ok != nullptr, "HMAC-SHA256 failed");
  return std::string(reinterpret_cast<const char*>(out), len);
}

std::string hex(std::string_view bytes) {
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char ch : bytes) {
    out += digits[ch >> 4];
    out += digits[ch & 15];
  }
  return out;
}

std::string signing_key(std::string_view secret, std::string_view date, std::string_view region,
                        std::string_view service) {
  std::string k = hmac_sha256("AWS4" + std::string(secret), date);
  k = hmac_sha256(k, region);
  k = hmac_sha256(k, service);
  return hmac_sha256(k, "aws4_request");
}

std::string amz_date(Millis t) {
  std::time_t secs = static_cast<std::time_t>(t / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%dT%H%M%SZ", &tm);
  return buf;
}

std::string scope(std::string_view amz_date, std::string_view region, std::string_view service) {
  return std::string(amz_date.substr(0, 8)) + "/" + std::string(region) + "/" + std::string(service) +
         "/aws4_request";
}

std::string authorization(const Credentials& creds, const Request& req, std::string_view amz_date,
                          std::string_view region, std::string_view service) {
  const std::string sc = scope(amz_date, region, service);
  const std::string to_sign = string_to_sign(amz_date, sc, canonical_request(req));
  const std::string key = signing_key(creds.secret_access_key, amz_date.substr(0, 8), region, service);
  return "AWS4-HMAC-SHA256 Credential=" + creds.access_key_id + "/" + sc +
         ",SignedHeaders=" + signed_header_names(req) + ",Signature=" + hex(hmac_sha256(key, to_sign));
}

std::vector<std::pair<std::string, std::string>> presign_params(const Credentials& creds, std::string_view amz_date,
                                                                std::string_view region, std::string_view service,
                                                                std::int64_t expires_s) {
  std::vector<std::pair<std::string, std::string>> params{
      {"X-Amz-Algorithm", "AWS4-HMAC-SHA256"},
      {"X-Amz-Credential", creds.access_key_id + "/" + scope(amz_date, region, service)},
      {"X-Amz-Date", std::string(amz_date)},
      {"X-Amz-Expires", std::to_string(expires_s)},
      {"X-Amz-SignedHeaders", "host"},
  };
  // Signed like the rest: S3 checks the token against the signature too.
  if (!creds.session_token.empty()) params.emplace_back("X-Amz-Security-Token", creds.session_token);
  return params;
}

std::string presign_query(const Credentials& creds, std::string_view method, std::string_view canonical_uri,
                          std::string_view host, std::string_view amz_date, std::string_view region,
                          std::string_view service, std::int64_t expires_s) {
  // The body is not known when the URL is made: the payload is unsigned.
  const Request req{std::string(method), std::string(canonical_uri),
                    presign_params(creds, amz_date, region, service, expires_s),
                    {{"host", std::string(host)}}, "UNSIGNED-PAYLOAD"};
  const std::string to_sign = string_to_sign(amz_date, scope(amz_date, region, service), canonical_request(req));
  const std::string key = signing_key(creds.secret_access_key, amz_date.substr(0, 8), region, service);
  return canonical_query(req.query) + "&X-Amz-Signature=" + hex(hmac_sha256(key, to_sign));
}

}  // namespace cp::sigv4
