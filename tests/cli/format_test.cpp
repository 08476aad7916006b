#include "cli/format.h"

#include <gtest/gtest.h>

namespace cp::cli {
namespace {

constexpr Millis kNow = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

json::value parse(std::string_view text) { return parse_json(text).value(); }

TEST(FormatAge, PicksTheLargestWholeUnit) {
  // Ages read in one unit: seconds under a minute, then minutes, hours, days.
  EXPECT_EQ(format_age(kNow, kNow - 5'000), "5s");
  EXPECT_EQ(format_age(kNow, kNow - 59'999), "59s");
  EXPECT_EQ(format_age(kNow, kNow - 60'000), "1m");
  EXPECT_EQ(format_age(kNow, kNow - 3 * 60'000 - 59'000), "3m");
  EXPECT_EQ(format_age(kNow, kNow - 2 * 3'600'000), "2h");
  EXPECT_EQ(format_age(kNow, kNow - 24 * 3'600'000 + 1), "23h");
  EXPECT_EQ(format_age(kNow, kNow - 4 * 86'400'000), "4d");
  EXPECT_EQ(format_age(kNow, kNow - 400LL * 86'400'000), "400d");
}

TEST(FormatAge, NeverAndFutureTimes) {
  // 0 means "not yet"; a time after now (clock skew) is no negative age.
  EXPECT_EQ(format_age(kNow, 0), "-");
  EXPECT_EQ(format_age(kNow, kNow + 10'000), "0s");
  EXPECT_EQ(format_age(kNow, kNow), "0s");
}

TEST(FormatTimeShort, SecondsPrecisionRfc3339) {
  EXPECT_EQ(format_time_short(kNow + 1'234), "2026-01-01T00:00:01Z");
  EXPECT_EQ(format_time_short(0), "-");
}

TEST(DisplayWidth, WideCharactersCountTwo) {
  EXPECT_EQ(display_width("abc"), 3u);
  EXPECT_EQ(display_width("配额"), 4u);   // two CJK ideographs
  EXPECT_EQ(display_width("é"), 1u);      // two bytes, one column
  EXPECT_EQ(display_width("\xff"), 1u);   // a malformed byte still takes a column
}

TEST(Truncate, ShortTextIsKept) { EXPECT_EQ(truncate("quota exceeded", 20), "quota exceeded"); }

TEST(Truncate, LongTextEndsInEllipsisWithinTheWidth) {
  std::string cut = truncate("resource group rg-a has 4 of 16 GPUs free", 20);
  EXPECT_EQ(cut, "resource group rg...");
  EXPECT_EQ(display_width(cut), 20u);
}

TEST(Truncate, NeverSplitsAUtf8Sequence) {
  // Each ideograph is 3 bytes and 2 columns; a cut lands between characters.
  std::string cut = truncate("资源组配额已用尽无法调度", 10);
  EXPECT_EQ(cut, "资源组...");
  EXPECT_LE(display_width(cut), 10u);
}

TEST(Truncate, LineBreaksBecomeSpaces) { EXPECT_EQ(truncate("a\nb\tc", 10), "a b c"); }

TEST(Table, AlignsColumnsAndLeavesTheLastUnpadded) {
  Table t({"ID", "STATE", "REASON"});
  t.add_row({"t-1", "Queued", "quota"});
  t.add_row({"t-22222", "Running", ""});
  EXPECT_EQ(t.render(),
            "ID        STATE     REASON\n"
            "t-1       Queued    quota\n"
            "t-22222   Running\n");
}

TEST(Table, AlignsByDisplayWidthNotBytes) {
  Table t({"NAME", "X"});
  t.add_row({"组", "1"});
  t.add_row({"ab", "2"});
  // "组" takes two columns like "ab", so both pad to the header's four.
  EXPECT_EQ(t.render(), "NAME   X\n组     1\nab     2\n");
}

TEST(Table, ShortRowsAreFilledWithEmptyCells) {
  Table t({"A", "B", "C"});
  t.add_row({"x"});
  EXPECT_EQ(t.render(), "A   B   C\nx\n");
}

TEST(Details, AlignsValues) {
  Details d;
  d.add("ID", "t-1");
  d.add("Resource group", "rg-a");
  EXPECT_EQ(d.render(), "ID:              t-1\nResource group:  rg-a\n");
}

TEST(PrettyJson, IndentsTwoSpaces) {
  EXPECT_EQ(pretty_json(parse(R"({"a":[1,{"b":"x"}],"c":{},"d":[]})")),
            "{\n  \"a\": [\n    1,\n    {\n      \"b\": \"x\"\n    }\n  ],\n  \"c\": {},\n  \"d\": []\n}\n");
  EXPECT_EQ(pretty_json(parse("\"q\\\"uote\"")), "\"q\\\"uote\"\n");
}

TEST(ExitCode, RefusalsExitOne) {
  EXPECT_EQ(exit_code_for_http_status(200), 0);
  EXPECT_EQ(exit_code_for_http_status(201), 0);
  EXPECT_EQ(exit_code_for_http_status(204), 0);
  EXPECT_EQ(exit_code_for_http_status(302), 1);  // redirects are not followed
  EXPECT_EQ(exit_code_for_http_status(400), 1);
  EXPECT_EQ(exit_code_for_http_status(401), 1);
  EXPECT_EQ(exit_code_for_http_status(404), 1);
  EXPECT_EQ(exit_code_for_http_status(409), 1);
  EXPECT_EQ(exit_code_for_http_status(500), 1);
  EXPECT_EQ(exit_code_for_http_status(503), 1);
  EXPECT_EQ(exit_code_for_http_status(0), 1);  // no answer at all
}

TEST(LooseJson, MissingOrOddMembersReadEmpty) {
  auto v = parse(R"({"metadata":{"name":"rg-a","created_at":1000},"n":3,"b":true,"z":null})");
  EXPECT_EQ(str_at(v, "metadata.name"), "rg-a");
  EXPECT_EQ(millis_at(v, "metadata.created_at"), 1000);
  EXPECT_EQ(str_at(v, "n"), "3");
  EXPECT_EQ(str_at(v, "b"), "true");
  EXPECT_EQ(str_at(v, "z"), "");
  EXPECT_EQ(str_at(v, "metadata.name.deeper"), "");
  EXPECT_EQ(millis_at(v, "metadata.name"), 0);
  EXPECT_EQ(str_at(json::value(3), "x"), "");
}

TEST(Labels, JoinedAsKeyEqualsValue) {
  EXPECT_EQ(join_labels(member_path(parse(R"({"l":{"a":"1","b":"2"}})"), "l")), "a=1,b=2");
  EXPECT_EQ(join_labels(nullptr), "");
  EXPECT_EQ(join_strings(member_path(parse(R"({"l":["x","y"]})"), "l")), "x,y");
}

TEST(GpuSummary, CountAndTypeFromCapacity) {
  auto node = parse(R"({"capacity":{"cpu":"64","gpu/nvidia-a100-80gb":"4","memory":"512Gi"}})");
  EXPECT_EQ(gpu_summary(member(node, "capacity")), "4x nvidia-a100-80gb");
  auto mixed = parse(R"({"capacity":{"gpu/a100":"2","gpu/mig-1g.10gb":7,"gpu/h100":"0"}})");
  EXPECT_EQ(gpu_summary(member(mixed, "capacity")), "2x a100, 7x mig-1g.10gb");
  EXPECT_EQ(gpu_summary(member(parse(R"({"capacity":{"cpu":"8"}})"), "capacity")), "-");
}

TEST(QuotaSummary, UsedOverGuaranteedWhenTheDocumentHasAStatus) {
  auto doc = parse(R"({"spec":{"quota":{"gpu/a100":{"guaranteed":16,"max":24},"cpu":{"guaranteed":"128"}}},
                       "status":{"used":{"gpu/a100":"4"}}})");
  // Keys come in the server's order; a resource without usage reads 0.
  EXPECT_EQ(quota_summary(doc), "gpu/a100 4/16 (max 24), cpu 0/128");
}

TEST(QuotaSummary, GuaranteedAloneWithoutStatus) {
  auto doc = parse(R"({"spec":{"quota":{"memory":{"guaranteed":"512Gi"}}}})");
  EXPECT_EQ(quota_summary(doc), "memory 512Gi");
  EXPECT_EQ(quota_summary(parse(R"({"spec":{}})")), "");
}

TEST(Language, ChineseIsAnyZhTag) {
  EXPECT_TRUE(is_chinese("zh-CN"));
  EXPECT_TRUE(is_chinese("zh"));
  EXPECT_TRUE(is_chinese("ZH-tw"));
  EXPECT_FALSE(is_chinese("en"));
  EXPECT_FALSE(is_chinese(""));
}

TEST(LocalizedMessage, FallsBackToTheOtherLanguage) {
  auto both = parse(R"({"message":"no GPU","message_zh":"没有 GPU"})");
  EXPECT_EQ(localized_message(both, "zh-CN"), "没有 GPU");
  EXPECT_EQ(localized_message(both, "en"), "no GPU");
  EXPECT_EQ(localized_message(parse(R"({"message":"no GPU"})"), "zh-CN"), "no GPU");
  EXPECT_EQ(localized_message(parse(R"({"message_zh":"没有 GPU"})"), "en"), "没有 GPU");
}

TEST(SecondsAsHours, OneDecimalRoundedHalfUp) {
  EXPECT_EQ(seconds_as_hours(0), "0.0");
  EXPECT_EQ(seconds_as_hours(5400), "1.5");
  EXPECT_EQ(seconds_as_hours(180), "0.1");   // 0.05 h rounds up
  EXPECT_EQ(seconds_as_hours(179), "0.0");
  EXPECT_EQ(seconds_as_hours(36'000'000), "10000.0");
}

TEST(LabelArgs, SetAndRemove) {
  auto set = parse_label_args({"team=proj-b", "gpu-node-group=g1"}, false);
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(dump(*set), R"({"team":"proj-b","gpu-node-group":"g1"})");

  auto removal = parse_label_args({"zone-", "rack=", "a=b=c"}, true);
  ASSERT_TRUE(removal.ok());
  EXPECT_EQ(dump(*removal), R"({"zone":"","rack":"","a":"b=c"})");
}

TEST(LabelArgs, MalformedArgumentsAreErrors) {
  EXPECT_FALSE(parse_label_args({"novalue"}, false).ok());
  EXPECT_FALSE(parse_label_args({"k="}, false).ok());  // removal only where allowed
  EXPECT_FALSE(parse_label_args({"=v"}, true).ok());
  EXPECT_FALSE(parse_label_args({"-"}, true).ok());
  auto e = parse_label_args({"oops"}, true);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.error().message.find("\"oops\""), std::string::npos);
}

TEST(PathSegment, EncodesSeparators) {
  EXPECT_EQ(path_segment("t-01hx"), "t-01hx");
  EXPECT_EQ(path_segment("a/b c"), "a%2Fb%20c");
}

TEST(TimeArg, DatesTimesAndMillis) {
  EXPECT_TRUE(is_valid_time_arg("2026-01-31"));
  EXPECT_TRUE(is_valid_time_arg("2026-01-31T10:00:00Z"));
  EXPECT_TRUE(is_valid_time_arg("1767225600000"));
  EXPECT_FALSE(is_valid_time_arg("yesterday"));
  EXPECT_FALSE(is_valid_time_arg("2026-13-01"));
  EXPECT_FALSE(is_valid_time_arg(""));
}

}  // namespace
}  // namespace cp::cli
