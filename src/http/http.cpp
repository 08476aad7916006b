#include "http/http.h"

#include <boost/url/parse.hpp>
#include <boost/url/url_view.hpp>

#include <algorithm>
#include <cctype>

namespace cp::http {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

}  // namespace

std::string Request::header(std::string_view name) const {
  auto it = headers.find(lower(name));
  return it == headers.end() ? std::string() : it->second;
}

std::string Request::query_param(const std::string& name) const {
  auto it = query.find(name);
  return it == query.end() ? std::string() : it->second;
}

std::string Request::param(const std::string& name) const {
  auto it = params.find(name);
  return it == params.end() ? std::string() : it->second;
}

std::string Request::media_type() const {
  std::string ct = header("content-type");
  auto semi = ct.find(';');
  if (semi != std::string::npos) ct.resize(semi);
  while (!ct.empty() && (ct.back() == ' ' || ct.back() == '\t')) ct.pop_back();
  while (!ct.empty() && (ct.front() == ' ' || ct.front() == '\t')) ct.erase(ct.begin());
  return lower(ct);
}

Response json_response(int status, const json::value& body) {
  Response r;
  r.status = status;
  r.content_type = "application/json";
  r.body = json::serialize(body);
  return r;
}

Response text_response(int status, std::string body, std::string content_type) {
  Response r;
  r.status = status;
  r.content_type = std::move(content_type);
  r.body = std::move(body);
  return r;
}

Response error_response(const Error& error, std::string_view accept_language) {
  json::object inner;
  inner["code"] = error.code;
  inner["message"] = error.message_for(accept_language);
  inner["details"] = error.details;
  json::object outer;
  outer["error"] = std::move(inner);
  int status = error.status >= 400 && error.status <= 599 ? error.status : 500;
  return json_response(status, outer);
}

Response error_response(const Error& error, const Request& req) {
  return error_response(error, req.accept_language());
}

std::string_view status_reason(int status) {
  switch (status) {
    case 200: return "OK";
    case 201: return "Created";
    case 202: return "Accepted";
    case 204: return "No Content";
    case 301: return "Moved Permanently";
    case 302: return "Found";
    case 304: return "Not Modified";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 406: return "Not Acceptable";
    case 408: return "Request Timeout";
    case 409: return "Conflict";
    case 410: return "Gone";
    case 412: return "Precondition Failed";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Entity";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "";
  }
}

bool parse_target(Request& req) {
  auto parsed = boost::urls::parse_origin_form(req.target);
  if (!parsed) return false;
  const boost::urls::url_view& u = *parsed;
  // Decoded path: "/a/b" -> {"a","b"}, "/a/" -> {"a",""}, "/" -> {}. An
  // encoded NUL could smuggle a terminator into file names (static files),
  // so it is refused outright.
  std::string path;
  for (auto seg : u.segments()) {
    path += '/';
    path += seg;
  }
  if (path.empty()) path = "/";
  if (path.find('\0') != std::string::npos) return false;
  req.path = std::move(path);
  req.query.clear();
  for (auto param : u.params()) {
    req.query.emplace(std::string(param.key), param.has_value ? std::string(param.value) : std::string());
  }
  return true;
}

}  // namespace cp::http
