#include "common/json.h"

namespace cp {

std::string json_kind_name(const json::value& v) {
  switch (v.kind()) {
    case json::kind::null: return "null";
    case json::kind::bool_: return "boolean";
    case json::kind::int64:
    case json::kind::uint64: return "integer";
    case json::kind::double_: return "number";
    case json::kind::string: return "string";
    case json::kind::array: return "list";
    case json::kind::object: return "object";
  }
  return "value";
}

std::string DecodeContext::path() const {
  if (!parent_) return root_;
  std::string out = parent_->path();
  if (index_ != kNoIndex) {
    out += '[';
    out += std::to_string(index_);
    out += ']';
  } else {
    if (!out.empty()) out += '.';
    out += key_;
  }
  return out;
}

Error type_error(const DecodeContext& ctx, std::string_view expected) {
  return errors::invalid(ctx.path(), "expected " + std::string(expected), "类型错误，应为 " + std::string(expected));
}

namespace detail {

void append_json_string(std::string& out, std::string_view s) {
  // As Boost.JSON's serializer: the two-character escapes where JSON has
  // them, \u00xx (lower-case hex) for the other control characters, every
  // other byte as it is.
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  std::size_t plain = 0;  // start of the run of bytes copied as they are
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c != '"' && c != '\\') continue;
    out.append(s.data() + plain, i - plain);
    plain = i + 1;
    out += '\\';
    switch (c) {
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '\b': out += 'b'; break;
      case '\f': out += 'f'; break;
      case '\n': out += 'n'; break;
      case '\r': out += 'r'; break;
      case '\t': out += 't'; break;
      default:
        out += "u00";
        out += kHex[c >> 4];
        out += kHex[c & 0xf];
    }
  }
  out.append(s.data() + plain, s.size() - plain);
  out += '"';
}

}  // namespace detail

Result<json::value> parse_json(std::string_view text, std::size_t max_depth, json::storage_ptr storage) {
  json::parse_options opts;
  opts.max_depth = max_depth;
  boost::system::error_code ec;
  json::value v = json::parse(text, ec, std::move(storage), opts);
  if (ec) {
    Error e{"malformed_json", 400, "malformed JSON: " + ec.message(), "JSON 格式错误：" + ec.message(), {}};
    return e;
  }
  return v;
}

}  // namespace cp
