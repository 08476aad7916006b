#include "http/static_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace cp::http {
namespace {

namespace fs = std::filesystem;

constexpr std::uintmax_t kMaxFileBytes = 64u << 20;

const char* kNotBuiltPage = R"(<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>Cubeplane</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:4rem auto;color:#222}code{background:#f3f3f3;padding:0 .3em}</style>
</head>
<body>
<h1>Cubeplane</h1>
<p>The control plane is running, but the web UI is not built (no <code>index.html</code> in the web root).</p>
<p>The REST API is described by <a href="/api/v1/openapi.json">/api/v1/openapi.json</a>;
health at <a href="/healthz">/healthz</a>, metrics at <a href="/metrics">/metrics</a>.</p>
<p lang="zh-CN">控制面已运行，但网页界面尚未构建。API 说明见 <a href="/api/v1/openapi.json">/api/v1/openapi.json</a>。</p>
</body>
</html>
)";

bool read_file(const fs::path& p, std::string& out) {
  std::error_code ec;
  auto size = fs::file_size(p, ec);
  if (ec || size > kMaxFileBytes) return false;
  std::ifstream in(p, std::ios::binary);
  if (!in) return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = std::move(ss).str();
  return true;
}

// The path is `root` or inside it (after resolving symlinks and "..").
bool inside(const fs::path& root, const fs::path& p) {
  auto r = root.begin();
  auto q = p.begin();
  for (; r != root.end(); ++r, ++q) {
    if (q == p.end() || *r != *q) return false;
  }
  return true;
}

std::optional<Response> serve(const fs::path& file, const std::string& url_path) {
  std::string body;
  if (!read_file(file, body)) return std::nullopt;
  Response r = text_response(200, std::move(body), content_type_for(file.string()));
  if (file.extension() == ".html") {
    r.headers.emplace_back("Cache-Control", "no-cache");
  } else if (url_path.starts_with("/assets/")) {
    // Bundlers put content-hashed names under /assets/: safe to keep forever.
    r.headers.emplace_back("Cache-Control", "public, max-age=31536000, immutable");
  } else {
    r.headers.emplace_back("Cache-Control", "public, max-age=300");
  }
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  return r;
}

}  // namespace

std::string content_type_for(const std::string& path) {
  auto dot = path.rfind('.');
  std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char c) { return std::tolower(c); });
  static const std::map<std::string, std::string> types = {
      {"html", "text/html; charset=utf-8"},
      {"htm", "text/html; charset=utf-8"},
      {"js", "text/javascript; charset=utf-8"},
      {"mjs", "text/javascript; charset=utf-8"},
      {"css", "text/css; charset=utf-8"},
      {"json", "application/json"},
      {"map", "application/json"},
      {"svg", "image/svg+xml"},
      {"png", "image/png"},
      {"jpg", "image/jpeg"},
      {"jpeg", "image/jpeg"},
      {"gif", "image/gif"},
      {"webp", "image/webp"},
      {"ico", "image/x-icon"},
      {"woff", "font/woff"},
      {"woff2", "font/woff2"},
      {"ttf", "font/ttf"},
      {"txt", "text/plain; charset=utf-8"},
      {"wasm", "application/wasm"},
      {"webmanifest", "application/manifest+json"},
  };
  auto it = types.find(ext);
  return it == types.end() ? "application/octet-stream" : it->second;
}

Fallback static_files(const std::string& web_root) {
  std::optional<fs::path> root;
  if (!web_root.empty()) {
    std::error_code ec;
    auto canonical = fs::canonical(web_root, ec);
    if (!ec && fs::is_directory(canonical, ec)) root = canonical;
  }
  return [root](Request& req) -> std::optional<Response> {
    if (req.method != "GET" && req.method != "HEAD") return std::nullopt;
    if (req.path == "/api" || req.path.starts_with("/api/")) return std::nullopt;

    // Refuse anything that could step outside the root before touching the
    // file system; the canonical-path check below also catches symlinks.
    std::vector<std::string> segs;
    std::string_view rest(req.path);
    while (!rest.empty()) {
      auto slash = rest.find('/');
      auto seg = rest.substr(0, slash);
      rest = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
      if (seg.empty() || seg == ".") continue;
      if (seg == ".." || seg.find('\\') != std::string_view::npos || seg.find('\0') != std::string_view::npos) {
        return std::nullopt;
      }
      segs.emplace_back(seg);
    }
    const bool looks_like_file = !segs.empty() && segs.back().find('.') != std::string::npos;

    std::error_code ec;
    if (!root || !fs::is_regular_file(*root / "index.html", ec)) {
      if (looks_like_file) return std::nullopt;
      auto r = text_response(200, kNotBuiltPage, "text/html; charset=utf-8");
      r.headers.emplace_back("Cache-Control", "no-cache");
      return r;
    }

    fs::path p = *root;
    for (const auto& s : segs) p /= s;
    auto resolved = fs::weakly_canonical(p, ec);
    if (ec || !inside(*root, resolved)) return std::nullopt;
    if (fs::is_directory(resolved, ec)) resolved /= "index.html";
    if (fs::is_regular_file(resolved, ec)) {
      auto real = fs::canonical(resolved, ec);
      if (ec || !inside(*root, real)) return std::nullopt;
      return serve(real, req.path);
    }
    // A missing asset is a 404; any other path is a client-side route of
    // the single-page app, answered with index.html.
    if (looks_like_file) return std::nullopt;
    return serve(*root / "index.html", "/index.html");
  };
}

}  // namespace cp::http
