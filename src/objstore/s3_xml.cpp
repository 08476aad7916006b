#include "objstore/s3_xml.h"

#include <cstdint>

namespace cp::s3xml {
namespace {

bool name_ends(char ch) { return ch == '>' || ch == '/' || ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; }

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// A numeric reference body ("39", "x27") as a code point XML allows.
std::optional<std::uint32_t> numeric_reference(std::string_view body) {
  int base = 10;
  if (!body.empty() && (body.front() == 'x' || body.front() == 'X')) {
    base = 16;
    body.remove_prefix(1);
  }
  if (body.empty() || body.size() > 8) return std::nullopt;
  std::uint32_t v = 0;
  for (char ch : body) {
    int d = -1;
    if (ch >= '0' && ch <= '9') d = ch - '0';
    else if (base == 16 && ch >= 'a' && ch <= 'f') d = ch - 'a' + 10;
    else if (base == 16 && ch >= 'A' && ch <= 'F') d = ch - 'A' + 10;
    if (d < 0) return std::nullopt;
    v = v * static_cast<std::uint32_t>(base) + static_cast<std::uint32_t>(d);
  }
  if (v == 0 || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return std::nullopt;
  return v;
}

}  // namespace

std::vector<std::string_view> elements(std::string_view xml, std::string_view name) {
  std::vector<std::string_view> out;
  const std::string open = "<" + std::string(name);
  const std::string close = "</" + std::string(name) + ">";
  std::size_t pos = 0;
  while ((pos = xml.find(open, pos)) != std::string_view::npos) {
    std::size_t after = pos + open.size();
    if (after >= xml.size() || !name_ends(xml[after])) {
      pos = after;
      continue;
    }
    std::size_t gt = xml.find('>', after);
    if (gt == std::string_view::npos) break;
    if (xml[gt - 1] == '/') {  // <name/>
      out.emplace_back();
      pos = gt + 1;
      continue;
    }
    std::size_t end = xml.find(close, gt + 1);
    if (end == std::string_view::npos) break;
    out.push_back(xml.substr(gt + 1, end - gt - 1));
    pos = end + close.size();
  }
  return out;
}

std::optional<std::string> text(std::string_view xml, std::string_view name) {
  auto found = elements(xml, name);
  if (found.empty()) return std::nullopt;
  return decode(found.front());
}

std::string decode(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  std::size_t i = 0;
  while (i < raw.size()) {
    if (raw.substr(i).starts_with("<![CDATA[")) {
      std::size_t end = raw.find("]]>", i + 9);
      std::size_t stop = end == std::string_view::npos ? raw.size() : end;
      out.append(raw.substr(i + 9, stop - i - 9));
      i = end == std::string_view::npos ? raw.size() : end + 3;
      continue;
    }
    char ch = raw[i];
    if (ch != '&') {
      out += ch;
      ++i;
      continue;
    }
    std::size_t semi = raw.find(';', i + 1);
    if (semi == std::string_view::npos || semi - i > 12) {
      out += ch;
      ++i;
      continue;
    }
    std::string_view ref = raw.substr(i + 1, semi - i - 1);
    std::optional<std::uint32_t> code_point;
    if (ref == "amp") {
      code_point = '&';
    } else if (ref == "lt") {
      code_point = '<';
    } else if (ref == "gt") {
      code_point = '>';
    } else if (ref == "quot") {
      code_point = '"';
    } else if (ref == "apos") {
      code_point = '\'';
    } else if (ref.starts_with('#')) {
      code_point = numeric_reference(ref.substr(1));
    }
    if (!code_point) {
      out += ch;  // not a reference we know: keep the text as it was
      ++i;
      continue;
    }
    append_utf8(out, *code_point);
    i = semi + 1;
  }
  return out;
}

std::string escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string root_name(std::string_view xml) {
  std::size_t pos = 0;
  while ((pos = xml.find('<', pos)) != std::string_view::npos) {
    if (pos + 1 < xml.size() && (xml[pos + 1] == '?' || xml[pos + 1] == '!')) {  // declaration, comment
      pos = xml.find('>', pos);
      if (pos == std::string_view::npos) return "";
      continue;
    }
    std::size_t end = pos + 1;
    while (end < xml.size() && !name_ends(xml[end])) ++end;
    return std::string(xml.substr(pos + 1, end - pos - 1));
  }
  return "";
}

}  // namespace cp::s3xml
