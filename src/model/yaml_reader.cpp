// YAML text -> JSON values.
//
// Built on yaml-cpp's event parser rather than YAML::Load: the events arrive
// while the text is being read, so the limits (depth, node count) stop a
// hostile document before any tree is built; anchors and aliases are seen as
// such (a loaded YAML::Node has already resolved them, which is how an alias
// "billion laughs" multiplies a small text into a huge tree); and every error
// can name the line and column where it happened.
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cstdint>
#include <sstream>

#include "model/documents.h"
#include "model/documents_internal.h"

namespace cp {
namespace {

constexpr std::string_view kTagStr = "tag:yaml.org,2002:str";
constexpr std::string_view kTagInt = "tag:yaml.org,2002:int";
constexpr std::string_view kTagFloat = "tag:yaml.org,2002:float";
constexpr std::string_view kTagBool = "tag:yaml.org,2002:bool";
constexpr std::string_view kTagNull = "tag:yaml.org,2002:null";
constexpr std::string_view kTagMap = "tag:yaml.org,2002:map";
constexpr std::string_view kTagSeq = "tag:yaml.org,2002:seq";

// Error at a position in the text; yaml-cpp counts from 0, people from 1.
Error yaml_error(std::string code, int status, const YAML::Mark& mark, const std::string& en, const std::string& zh) {
  std::string where_en, where_zh;
  if (!mark.is_null()) {
    where_en = " at line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1);
    where_zh = "（第 " + std::to_string(mark.line + 1) + " 行第 " + std::to_string(mark.column + 1) + " 列）";
  }
  Error e{std::move(code), status, en + where_en, zh + where_zh, {}};
  if (!mark.is_null()) {
    e.details["line"] = mark.line + 1;
    e.details["column"] = mark.column + 1;
  }
  return e;
}

Error malformed(const YAML::Mark& mark, const std::string& en, const std::string& zh) {
  return yaml_error("malformed_yaml", 400, mark, "malformed YAML" + (en.empty() ? "" : ": " + en),
                    "YAML 格式错误" + (zh.empty() ? "" : "：" + zh));
}

// Where the text stops being UTF-8 (overlong forms and surrogates included),
// or npos. The JSON parser refuses such text too, and the stores downstream
// (PostgreSQL text) would.
std::size_t first_invalid_utf8(std::string_view s) {
  std::size_t i = 0;
  while (i < s.size()) {
    auto c = static_cast<unsigned char>(s[i]);
    std::size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0 || i + len > s.size()) return i;
    std::uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (std::size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc >> 6) != 0x2) return i;
      cp = (cp << 6) | (cc & 0x3F);
    }
    static constexpr std::uint32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return i;
    i += len;
  }
  return std::string_view::npos;
}

YAML::Mark mark_at(std::string_view text, std::size_t pos) {
  YAML::Mark m;
  m.pos = static_cast<int>(pos);
  std::size_t line_start = 0;
  if (std::size_t nl = pos == 0 ? std::string_view::npos : text.rfind('\n', pos - 1); nl != std::string_view::npos) {
    line_start = nl + 1;
  }
  m.line = static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(pos), '\n'));
  m.column = static_cast<int>(pos - line_start);
  return m;
}

// Thrown out of the event handler to stop the parser; carries the error.
struct Refused {
  Error error;
};

// Builds one JSON value per document from the parser's events. Containers
// being filled sit on a stack; a finished value goes into the container on
// top (as a key, as the value of the pending key, or as an array element).
class JsonBuilder : public YAML::EventHandler {
 public:
  explicit JsonBuilder(const DocumentLimits& limits) : limits_(limits) {}

  json::value take_document() { return std::move(document_); }

  void OnDocumentStart(const YAML::Mark&) override {
    document_ = nullptr;
    stack_.clear();
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    count_node(mark, anchor);
    add(json::value(nullptr), mark);
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override { refuse_anchor(mark); }
  void OnAnchor(const YAML::Mark& mark, const std::string&) override { refuse_anchor(mark); }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    count_node(mark, anchor);
    add(scalar(mark, tag, value), mark);
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    start_collection(mark, tag, anchor, kTagSeq, json::value(json::array()));
  }
  void OnSequenceEnd() override { end_collection(); }

  void OnMapStart(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    start_collection(mark, tag, anchor, kTagMap, json::value(json::object()));
  }
  void OnMapEnd() override { end_collection(); }

 private:
  struct Frame {
    json::value container;  // array or object
    bool has_key = false;   // object: a key was read, its value comes next
    std::string key;
    YAML::Mark mark;
  };

  [[noreturn]] void refuse(Error e) { throw Refused{std::move(e)}; }

  void refuse_anchor(const YAML::Mark& mark) {
    refuse(yaml_error("malformed_yaml", 400, mark, "YAML anchors and aliases (& and *) are not accepted",
                      "不接受 YAML 锚点和别名（& 与 *）"));
  }

  void count_node(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor) refuse_anchor(mark);
    if (++nodes_ > limits_.max_nodes) {
      refuse(yaml_error("payload_too_large", 413, mark,
                        "document has more than " + std::to_string(limits_.max_nodes) + " values",
                        "文档包含的值超过 " + std::to_string(limits_.max_nodes) + " 个"));
    }
  }

  bool in_key_position() const {
    return !stack_.empty() && stack_.back().container.is_object() && !stack_.back().has_key;
  }

  json::value scalar(const YAML::Mark& mark, const std::string& tag, const std::string& text) {
    // "!" marks a quoted (or block) scalar: always a string.
    // A NUL cannot travel further: not in argv, environment, or a text column.
    if (text.find('\0') != std::string::npos) {
      refuse(malformed(mark, "strings may not contain NUL characters", "字符串不能包含 NUL 字符"));
    }
    if (tag == "!" || tag == kTagStr) return json::value(json::string(text));
    if (tag == "?") {
      auto v = docs::resolve_plain_scalar(text);
      if (!v.ok()) refuse(yaml_error(v.error().code, v.error().status, mark, v.error().message, v.error().message_zh));
      return std::move(v).value();
    }
    // An explicit core tag asks for that type; the text must be of it.
    std::string_view want;
    if (tag == kTagInt) {
      want = "integer";
    } else if (tag == kTagFloat) {
      want = "number";
    } else if (tag == kTagBool) {
      want = "bool";
    } else if (tag == kTagNull) {
      want = "null";
    } else {
      refuse(malformed(mark, "unsupported tag \"" + tag + "\"", "不支持的标签 \"" + tag + "\""));
    }
    auto v = docs::resolve_plain_scalar(text);
    bool fits = v.ok() && ((want == "integer" && v->is_int64()) || (want == "number" && v->is_number()) ||
                           (want == "bool" && v->is_bool()) || (want == "null" && v->is_null()));
    if (!fits) {
      refuse(malformed(mark, "\"" + text + "\" is not a valid " + std::string(want),
                       "\"" + text + "\" 不是有效的 " + std::string(want)));
    }
    if (want == "number" && v->is_int64()) return json::value(static_cast<double>(v->get_int64()));
    return std::move(v).value();
  }

  void start_collection(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                        std::string_view core_tag, json::value empty) {
    count_node(mark, anchor);
    if (tag != "?" && tag != "!" && tag != core_tag) {
      refuse(malformed(mark, "unsupported tag \"" + tag + "\"", "不支持的标签 \"" + tag + "\""));
    }
    if (in_key_position()) refuse(non_string_key(mark, core_tag == kTagMap ? "map" : "list"));
    if (stack_.size() + 1 > limits_.max_depth) {
      refuse(yaml_error("too_deep", 400, mark,
                        "document is nested more than " + std::to_string(limits_.max_depth) + " levels deep",
                        "文档嵌套超过 " + std::to_string(limits_.max_depth) + " 层"));
    }
    stack_.push_back(Frame{std::move(empty), false, {}, mark});
  }

  void end_collection() {
    Frame done = std::move(stack_.back());
    stack_.pop_back();
    add(std::move(done.container), done.mark);
  }

  Error non_string_key(const YAML::Mark& mark, const std::string& kind) {
    return malformed(mark, "map keys must be strings, found a key of type " + kind + " (quote it if it is text)",
                     "映射的键必须是字符串，实际类型为 " + kind + "（如为文本，请加引号）");
  }

  void add(json::value v, const YAML::Mark& mark) {
    if (stack_.empty()) {
      document_ = std::move(v);
      return;
    }
    Frame& top = stack_.back();
    if (top.container.is_array()) {
      top.container.get_array().push_back(std::move(v));
      return;
    }
    json::object& obj = top.container.get_object();
    if (!top.has_key) {
      if (!v.is_string()) refuse(non_string_key(mark, json_kind_name(v)));
      std::string key(v.get_string());
      if (obj.contains(key)) {
        refuse(malformed(mark, "duplicate key \"" + key + "\"", "重复的键 \"" + key + "\""));
      }
      top.key = std::move(key);
      top.has_key = true;
      return;
    }
    obj.emplace(top.key, std::move(v));
    top.has_key = false;
  }

  const DocumentLimits& limits_;
  std::size_t nodes_ = 0;  // over the whole stream: the limit bounds the work per request
  std::vector<Frame> stack_;
  json::value document_;
};

}  // namespace

Result<std::vector<json::value>> parse_documents(std::string_view text, const DocumentLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return errors::too_large("document is " + std::to_string(text.size()) + " bytes, more than the limit of " +
                                 std::to_string(limits.max_bytes),
                             "文档大小为 " + std::to_string(text.size()) + " 字节，超过上限 " +
                                 std::to_string(limits.max_bytes) + " 字节");
  }
  if (std::size_t bad = first_invalid_utf8(text); bad != std::string_view::npos) {
    return malformed(mark_at(text, bad), "the text is not valid UTF-8", "文本不是有效的 UTF-8");
  }
  std::istringstream in{std::string(text)};
  std::vector<json::value> docs;
  try {
    YAML::Parser parser(in);
    JsonBuilder builder(limits);
    while (parser.HandleNextDocument(builder)) {
      json::value doc = builder.take_document();
      // An empty document ("---" with nothing after it, a trailing "---") is
      // skipped, as kubectl does; a stream of nothing but those is an error.
      if (!doc.is_null()) docs.push_back(std::move(doc));
    }
  } catch (const Refused& r) {
    return r.error;
  } catch (const YAML::Exception& e) {
    return malformed(e.mark, e.msg, e.msg);
  }
  if (docs.empty()) {
    return Error{"empty_document", 400, "empty document", "文档为空", {}};
  }
  return docs;
}

Result<json::value> parse_document(std::string_view text, const DocumentLimits& limits) {
  CP_ASSIGN(auto docs, parse_documents(text, limits));
  if (docs.size() != 1) {
    return Error{"multiple_documents", 400,
                 "expected one document, found " + std::to_string(docs.size()) + " (separated by ---)",
                 "应为一个文档，实际为 " + std::to_string(docs.size()) + " 个（以 --- 分隔）", {}};
  }
  return std::move(docs.front());
}

}  // namespace cp
