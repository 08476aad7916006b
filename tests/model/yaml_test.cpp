// YAML text <-> JSON values: parse_documents, parse_document, to_yaml.
#include <gtest/gtest.h>

#include "model/documents.h"

namespace cp {
namespace {

json::value parse_ok(std::string_view text) {
  auto r = parse_document(text);
  EXPECT_TRUE(r.ok()) << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : json::value();
}

Error parse_err(std::string_view text, const DocumentLimits& limits = {}) {
  auto r = parse_documents(text, limits);
  EXPECT_FALSE(r.ok()) << "parsed: " << text;
  if (r.ok()) return Error{};
  EXPECT_FALSE(r.error().message.empty());
  EXPECT_FALSE(r.error().message_zh.empty());
  return r.error();
}

bool contains(const std::string& s, std::string_view part) { return s.find(part) != std::string::npos; }

TEST(YamlRead, PlainScalarsFollowTheCoreSchema) {
  // Plain scalars become null, bool, int64, double or string as YAML 1.2 core reads them.
  json::value v = parse_ok(R"(
n1: ~
n2: null
n3:
b1: true
b2: False
b3: TRUE
i1: 42
i2: -7
i3: 0x1F
i4: 0o17
f1: 1.5
f2: 1e3
f3: .5
s1: yes
s2: on
s3: 1.2.3
s4: nvidia-a100-80gb
)");
  EXPECT_TRUE(v.at("n1").is_null());
  EXPECT_TRUE(v.at("n2").is_null());
  EXPECT_TRUE(v.at("n3").is_null());
  EXPECT_EQ(v.at("b1"), true);
  EXPECT_EQ(v.at("b2"), false);
  EXPECT_EQ(v.at("b3"), true);
  EXPECT_EQ(v.at("i1").as_int64(), 42);
  EXPECT_EQ(v.at("i2").as_int64(), -7);
  EXPECT_EQ(v.at("i3").as_int64(), 31);
  EXPECT_EQ(v.at("i4").as_int64(), 15);
  EXPECT_EQ(v.at("f1").as_double(), 1.5);
  EXPECT_EQ(v.at("f2").as_double(), 1000.0);
  EXPECT_EQ(v.at("f3").as_double(), 0.5);
  // YAML 1.1's yes/on are plain strings in 1.2.
  EXPECT_EQ(v.at("s1"), "yes");
  EXPECT_EQ(v.at("s2"), "on");
  EXPECT_EQ(v.at("s3"), "1.2.3");
  EXPECT_EQ(v.at("s4"), "nvidia-a100-80gb");
}

TEST(YamlRead, QuotedAndStrTaggedScalarsStayStrings) {
  // Quoted scalars and !!str ones are strings whatever they look like.
  json::value v = parse_ok("a: \"true\"\nb: '123'\nc: \"\"\nd: !!str 7\ne: !!str null\n");
  EXPECT_EQ(v.at("a"), "true");
  EXPECT_EQ(v.at("b"), "123");
  EXPECT_EQ(v.at("c"), "");
  EXPECT_EQ(v.at("d"), "7");
  EXPECT_EQ(v.at("e"), "null");
}

TEST(YamlRead, IntegerTooLargeIsAnError) {
  // An integer past int64 is an error, not a double or a wrapped value.
  Error e = parse_err("a: 99999999999999999999\n");
  EXPECT_EQ(e.code, "malformed_yaml");
  EXPECT_TRUE(contains(e.message, "line 1")) << e.message;
  EXPECT_EQ(parse_ok("a: -9223372036854775808\n").at("a").as_int64(), INT64_MIN);
}

TEST(YamlRead, InfinityIsAnError) {
  // .inf and .nan have no JSON form and are refused.
  EXPECT_EQ(parse_err("a: .inf\n").code, "malformed_yaml");
  EXPECT_EQ(parse_err("a: -.Inf\n").code, "malformed_yaml");
  EXPECT_EQ(parse_err("a: .nan\n").code, "malformed_yaml");
  EXPECT_EQ(parse_err("a: 1e999\n").code, "malformed_yaml");
}

TEST(YamlRead, JsonIsYaml) {
  // A JSON body parses to the same value boost::json reads from it.
  std::string text = R"({"a": [1, 2.5, "x", true, null], "b": {"c": "d"}})";
  EXPECT_EQ(parse_ok(text), json::parse(text));
}

TEST(YamlRead, MalformedYamlNamesLineAndColumn) {
  // Broken YAML is a 400 "malformed_yaml" naming the line and column.
  Error e = parse_err("a: 1\nb: [1, 2\nc: 3\n");
  EXPECT_EQ(e.code, "malformed_yaml");
  EXPECT_EQ(e.status, 400);
  EXPECT_TRUE(contains(e.message, "line ")) << e.message;
  EXPECT_TRUE(contains(e.message, "column ")) << e.message;
  EXPECT_TRUE(e.details.contains("line"));
  EXPECT_TRUE(contains(e.message_zh, "行")) << e.message_zh;
}

TEST(YamlRead, BadIndentationNamesItsLine) {
  // A mapping value in the wrong place is reported at its line (1-based).
  Error e = parse_err("a: 1\nb: 2\n  c: 3\n");
  EXPECT_EQ(e.code, "malformed_yaml");
  EXPECT_EQ(e.details.at("line").as_int64(), 3) << e.message;
}

TEST(YamlRead, DuplicateKeyIsAnError) {
  // A key written twice in one map is refused, with its position.
  Error e = parse_err("a: 1\nb: 2\na: 3\n");
  EXPECT_EQ(e.code, "malformed_yaml");
  EXPECT_TRUE(contains(e.message, "duplicate key \"a\"")) << e.message;
  EXPECT_EQ(e.details.at("line").as_int64(), 3);
  EXPECT_EQ(parse_err("{x: 1, x: 2}").code, "malformed_yaml");
}

TEST(YamlRead, NonStringKeysAreErrors) {
  // Keys that YAML reads as numbers, bools, null or collections are refused.
  EXPECT_TRUE(contains(parse_err("1: a\n").message, "map keys must be strings"));
  EXPECT_TRUE(contains(parse_err("true: a\n").message, "map keys must be strings"));
  EXPECT_TRUE(contains(parse_err("? [1, 2]\n: a\n").message, "map keys must be strings"));
  EXPECT_TRUE(contains(parse_err("{? {a: 1} : b}").message, "map keys must be strings"));
  // Quoted, they are strings.
  EXPECT_EQ(parse_ok("\"1\": a\n").at("1"), "a");
}

TEST(YamlRead, AliasesAreRefused) {
  // An alias (*x) is refused: it is how a small text grows into a huge tree.
  Error e = parse_err("a: &x [1, 2]\nb: *x\n");
  EXPECT_EQ(e.code, "malformed_yaml");
  EXPECT_TRUE(contains(e.message, "anchors and aliases")) << e.message;
}

TEST(YamlRead, AnchorsAloneAreRefused) {
  // An anchor (&x) is refused even when no alias uses it.
  EXPECT_TRUE(contains(parse_err("a: &x 1\n").message, "anchors"));
}

TEST(YamlRead, BillionLaughsStopsEarly) {
  // The classic alias bomb fails fast with an error rather than expanding.
  std::string bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n";
  for (char c = 'b'; c <= 'j'; ++c) {
    std::string prev(1, static_cast<char>(c - 1));
    bomb += std::string(1, c) + ": &" + c + " [*" + prev + ", *" + prev + ", *" + prev + ", *" + prev + "]\n";
  }
  EXPECT_EQ(parse_err(bomb).code, "malformed_yaml");
}

TEST(YamlRead, OverSizeIsPayloadTooLarge) {
  // A text over max_bytes is a 413 "payload_too_large".
  DocumentLimits limits;
  limits.max_bytes = 16;
  Error e = parse_err("a: 0123456789abcdef\n", limits);
  EXPECT_EQ(e.code, "payload_too_large");
  EXPECT_EQ(e.status, 413);
}

TEST(YamlRead, DepthLimitIsTooDeep) {
  // Nesting past max_depth is a 400 "too_deep"; at the limit it parses.
  DocumentLimits limits;
  limits.max_depth = 4;
  EXPECT_TRUE(parse_documents("[[[[1]]]]", limits).ok());
  Error e = parse_err("[[[[[1]]]]]", limits);
  EXPECT_EQ(e.code, "too_deep");
  EXPECT_EQ(e.status, 400);
}

TEST(YamlRead, DeepNestingWithDefaultLimitsFailsCleanly) {
  // 100000 nested lists are refused as too deep, without exhausting the stack.
  std::string deep = std::string(100000, '[') + "1" + std::string(100000, ']');
  EXPECT_EQ(parse_err(deep).code, "too_deep");
  // Unclosed, they are malformed (yaml-cpp reads the run as a key), still without a crash.
  EXPECT_EQ(parse_err(std::string(100000, '[')).code, "malformed_yaml");
}

TEST(YamlRead, NodeLimit) {
  // More values than max_nodes is refused.
  DocumentLimits limits;
  limits.max_nodes = 5;
  EXPECT_TRUE(parse_documents("[1, 2, 3, 4]", limits).ok());
  EXPECT_EQ(parse_err("[1, 2, 3, 4, 5]", limits).code, "payload_too_large");
}

TEST(YamlRead, EmptyDocumentIsAnError) {
  // Empty text, comments only, or a lone "---" is "empty document".
  for (std::string_view text : {"", "# just a comment\n", "---\n", "   \n"}) {
    Error e = parse_err(text);
    EXPECT_EQ(e.code, "empty_document") << text;
    EXPECT_EQ(e.message, "empty document");
  }
}

TEST(YamlRead, SeveralDocuments) {
  // "---" separates documents; empty ones between them are skipped.
  auto r = parse_documents("a: 1\n---\n---\nb: 2\n---\n");
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_EQ(r->size(), 2u);
  EXPECT_EQ((*r)[0].at("a").as_int64(), 1);
  EXPECT_EQ((*r)[1].at("b").as_int64(), 2);
}

TEST(YamlRead, ParseDocumentWantsExactlyOne) {
  // parse_document refuses a stream of two documents.
  auto r = parse_document("a: 1\n---\nb: 2\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "multiple_documents");
}

TEST(YamlRead, UnknownTagIsRefused) {
  // Application tags (!!python/object, !custom) are refused, not guessed at.
  EXPECT_EQ(parse_err("a: !!python/object:os.system x\n").code, "malformed_yaml");
  EXPECT_EQ(parse_err("a: !custom x\n").code, "malformed_yaml");
}

TEST(YamlRead, MultiLineAndUnicodeStrings) {
  // Block scalars and UTF-8 text come through unchanged.
  json::value v = parse_ok("script: |\n  echo 1\n  echo 2\nzh: 训练任务\n");
  EXPECT_EQ(v.at("script"), "echo 1\necho 2\n");
  EXPECT_EQ(v.at("zh"), "训练任务");
}

TEST(YamlRead, InvalidUtf8IsRefusedWithItsPosition) {
  // Text that is not UTF-8 is malformed, reported where the bad byte is.
  Error e = parse_err("a: ok\nb: x\xff\n");
  EXPECT_EQ(e.code, "malformed_yaml");
  EXPECT_EQ(e.details.at("line").as_int64(), 2);
  EXPECT_EQ(e.details.at("column").as_int64(), 5);
  EXPECT_EQ(parse_err("a: \xc0\xaf\n").code, "malformed_yaml");      // overlong '/'
  EXPECT_EQ(parse_err("a: \xed\xa0\x80\n").code, "malformed_yaml");  // a UTF-16 surrogate
  EXPECT_EQ(parse_err("a: \xe4\xb8").code, "malformed_yaml");          // cut short
}

TEST(YamlRead, NulInStringsIsRefused) {
  // A NUL written as an escape is refused: it cannot be passed on as text.
  EXPECT_EQ(parse_err("a: \"x\\0y\"\n").code, "malformed_yaml");
  EXPECT_EQ(parse_err("{\"a\": \"x\\u0000\"}").code, "malformed_yaml");
}

TEST(YamlWrite, BlockStyle) {
  // to_yaml writes block-style maps and lists.
  json::value v = json::parse(R"({"metadata": {"name": "rg-a"}, "spec": {"clusters": ["c1", "c2"]}})");
  EXPECT_EQ(to_yaml(v), "metadata:\n  name: rg-a\nspec:\n  clusters:\n    - c1\n    - c2\n");
}

TEST(YamlWrite, StringsThatLookLikeOtherTypesAreQuoted) {
  // Strings YAML would read as something else are quoted; plain words are not.
  std::string y = to_yaml(json::parse(R"({"a": "true", "b": "123", "c": "", "d": "~", "e": "1.5", "f": "plain"})"));
  EXPECT_TRUE(contains(y, "a: \"true\"")) << y;
  EXPECT_TRUE(contains(y, "b: \"123\"")) << y;
  EXPECT_TRUE(contains(y, "c: \"\"")) << y;
  EXPECT_TRUE(contains(y, "d: \"~\"")) << y;
  EXPECT_TRUE(contains(y, "e: \"1.5\"")) << y;
  EXPECT_TRUE(contains(y, "f: plain")) << y;
}

TEST(YamlWrite, RoundTripsTrickyValues) {
  // Whatever to_yaml writes, parse_document reads back as the same JSON value.
  json::array strings;
  for (const char* s :
       {"", "true", "False", "null", "~", "123", "-7", "0x1F", "0o17", "1.5", "1e3", ".inf", ".nan", "+1", "-", "---",
        "...", "a: b", "a #b", "#x", " lead", "trail ", "x\ny", "x\n", "tab\there", "'q'", "\"dq\"", "@at", "`bt",
        "!bang", "&amp", "*star", "%pct", "{b}", "[s]", ",c", "?", ":", "- a", "中文 训练", "\x01ctl", "back\\slash",
        "99999999999999999999", "yes", "on"}) {
    strings.emplace_back(s);
  }
  json::object obj;
  obj["strings"] = strings;
  obj["ints"] = json::array{0, -1, INT64_MAX, INT64_MIN};
  obj["doubles"] = json::array{0.5, 2.0, -1e-300, 1e300, 3.141592653589793};
  obj["bools"] = json::array{true, false};
  obj["null"] = nullptr;
  obj["empty_map"] = json::object();
  obj["empty_list"] = json::array();
  obj["nested"] = json::array{json::object{{"k", "v"}, {"true", 1}}, json::array{1, json::array{2}}};
  obj["123"] = "numeric key";
  obj[""] = "empty key";
  json::value v = obj;
  std::string y = to_yaml(v);
  auto back = parse_document(y);
  ASSERT_TRUE(back.ok()) << back.error().message << "\n" << y;
  EXPECT_EQ(*back, v) << y;
}

TEST(YamlWrite, ScalarRoot) {
  // A bare scalar is a one-line document.
  EXPECT_EQ(to_yaml(json::value("x")), "x\n");
  EXPECT_EQ(to_yaml(json::value(2.0)), "2.0\n");
}

}  // namespace
}  // namespace cp
