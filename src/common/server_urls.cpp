#include "common/server_urls.h"

#include <algorithm>
#include <cctype>
#include <utility>

namespace cp {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string_view trim_entry(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  // Trailing '/' of the path only: "http://" stays itself (and is refused).
  const auto scheme_end = s.find("://");
  const std::size_t keep = scheme_end == std::string_view::npos ? 0 : scheme_end + 3;
  while (s.size() > keep && s.back() == '/') s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view list) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto comma = list.find(',');
    out.push_back(trim_entry(list.substr(0, comma)));
    if (comma == std::string_view::npos) return out;
    list.remove_prefix(comma + 1);
  }
}

// Why `url` is no server URL (English, Chinese), or two empty strings when it is one.
std::pair<std::string, std::string> what_is_wrong(std::string_view url) {
  const std::string scheme_low = lower(url.substr(0, std::min<std::size_t>(url.size(), 8)));
  std::size_t after = 0;
  if (scheme_low.rfind("http://", 0) == 0) {
    after = 7;
  } else if (scheme_low.rfind("https://", 0) == 0) {
    after = 8;
  } else {
    return {"it must start with http:// or https://", "必须以 http:// 或 https:// 开头"};
  }
  if (url.find_first_of(" \t\r\n") != std::string_view::npos) return {"it contains a space", "其中含有空白字符"};
  std::string_view authority = url.substr(after, url.find_first_of("/?#", after) - after);
  if (auto at = authority.rfind('@'); at != std::string_view::npos) authority.remove_prefix(at + 1);
  std::string_view host = authority, port;
  if (!authority.empty() && authority.front() == '[') {  // [IPv6]:port
    const auto close = authority.find(']');
    if (close == std::string_view::npos) return {"its IPv6 address lacks the closing ']'", "其 IPv6 地址缺少 ']'"};
    host = authority.substr(0, close + 1);
    if (close + 1 < authority.size()) {
      if (authority[close + 1] != ':') return {"it has text after its IPv6 address", "其 IPv6 地址后有多余内容"};
      port = authority.substr(close + 2);
      if (port.empty()) return {"its port is empty", "端口为空"};
    }
  } else if (auto colon = authority.find(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
    if (port.empty()) return {"its port is empty", "端口为空"};
  }
  if (host.empty() || host == "[]") return {"it names no host", "缺少主机名"};
  if (!std::all_of(port.begin(), port.end(), [](unsigned char c) { return std::isdigit(c); }) || port.size() > 5) {
    return {"its port is not a number", "端口不是数字"};
  }
  return {};
}

}  // namespace

std::string normalize_server_urls(std::string_view list) {
  std::string out;
  bool first = true;
  for (auto entry : split(list)) {
    if (!first) out += ',';
    out += entry;
    first = false;
  }
  return out;
}

Result<std::vector<std::string>> parse_server_urls(std::string_view list, const std::string& field) {
  const auto entries = split(list);
  if (entries.size() == 1 && entries[0].empty()) {
    return errors::invalid(field, "the server URL is required", "必须指定服务器地址");
  }
  const std::string quoted_list = "\"" + std::string(list) + "\"";
  std::vector<std::string> urls;
  std::vector<std::string> seen;  // lower case: http://A:1 and http://a:1 are one server
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const std::string n = std::to_string(i + 1);
    if (entries[i].empty()) {
      return errors::invalid(field, "entry " + n + " of the server list " + quoted_list + " is empty",
                             "服务器列表 " + quoted_list + " 的第 " + n + " 项为空");
    }
    const std::string entry(entries[i]);
    if (auto [en, zh] = what_is_wrong(entry); !en.empty()) {
      return errors::invalid(field, "\"" + entry + "\" is not a server URL: " + en,
                             "\"" + entry + "\" 不是有效的服务器地址：" + zh);
    }
    std::string key = lower(entry);
    if (std::find(seen.begin(), seen.end(), key) != seen.end()) {
      return errors::invalid(field, "\"" + entry + "\" is listed twice in the server list " + quoted_list,
                             "\"" + entry + "\" 在服务器列表 " + quoted_list + " 中重复出现");
    }
    seen.push_back(std::move(key));
    urls.push_back(entry);
  }
  return urls;
}

}  // namespace cp
