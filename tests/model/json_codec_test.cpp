// The Boost.Describe JSON codec (common/json.h) as the model uses it.
#include <boost/describe.hpp>
#include <gtest/gtest.h>

#include "common/json.h"
#include "model/types.h"

namespace cp {
namespace {

struct Inner {
  int replicas = 1;
  std::optional<std::string> image;
};
BOOST_DESCRIBE_STRUCT(Inner, (), (replicas, image))

struct Outer {
  std::string name;
  std::vector<Inner> steps;
  PlacementPolicy placement = PlacementPolicy::binpack;
  std::int8_t small = 0;
};
BOOST_DESCRIBE_STRUCT(Outer, (), (name, steps, placement, small))

Status decode(std::string_view text, Outer& out, bool strict) {
  return from_json(json::parse(text), out, DecodeContext{"spec", strict});
}

TEST(JsonCodec, StrictRejectsUnknownFieldWithItsPath) {
  // Strict decoding refuses an unknown field and names it by its full path.
  Outer o;
  Status s = decode(R"({"name": "a", "steps": [{"replicas": 2}, {"replica": 3}]})", o, true);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "unknown_field");
  EXPECT_EQ(s.error().details.at("field"), "spec.steps[1].replica");
  EXPECT_FALSE(s.error().message_zh.empty());
}

TEST(JsonCodec, LenientIgnoresUnknownFields) {
  // Lenient decoding (stored rows, agent messages) skips fields it does not know.
  Outer o;
  ASSERT_TRUE(decode(R"({"name": "a", "added_later": true, "steps": [{"replicas": 2, "x": 1}]})", o, false).ok());
  EXPECT_EQ(o.name, "a");
  ASSERT_EQ(o.steps.size(), 1u);
  EXPECT_EQ(o.steps[0].replicas, 2);
}

TEST(JsonCodec, MissingFieldsKeepDefaults) {
  // A field left out keeps the struct's default.
  Outer o;
  ASSERT_TRUE(decode(R"({"name": "a", "steps": [{}]})", o, true).ok());
  EXPECT_EQ(o.steps[0].replicas, 1);
  EXPECT_EQ(o.placement, PlacementPolicy::binpack);
}

TEST(JsonCodec, OptionalAbsentOrNullIsUnset) {
  // An optional is unset when absent or null, set when present, and left out when encoding unset.
  Inner a, b, c;
  ASSERT_TRUE(from_json(json::parse(R"({})"), a).ok());
  ASSERT_TRUE(from_json(json::parse(R"({"image": null})"), b).ok());
  ASSERT_TRUE(from_json(json::parse(R"({"image": "pytorch"})"), c).ok());
  EXPECT_FALSE(a.image.has_value());
  EXPECT_FALSE(b.image.has_value());
  EXPECT_EQ(c.image, "pytorch");
  EXPECT_FALSE(to_json(a).as_object().contains("image"));
  EXPECT_EQ(to_json(c).at("image"), "pytorch");
}

TEST(JsonCodec, EnumsAreStringsAndUnknownValuesListTheAllowedOnes) {
  // Enums encode by name; an unknown name is an error listing the allowed ones.
  Outer o;
  ASSERT_TRUE(decode(R"({"placement": "spread"})", o, true).ok());
  EXPECT_EQ(o.placement, PlacementPolicy::spread);
  EXPECT_EQ(to_json(o).at("placement"), "spread");
  Status s = decode(R"({"placement": "scatter"})", o, true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("spec.placement"), std::string::npos);
  EXPECT_NE(s.error().message.find("binpack, spread"), std::string::npos);
}

TEST(JsonCodec, IntegerOutOfRangeIsAnError) {
  // An integer that does not fit the member's type is refused, not truncated.
  Outer o;
  Status s = decode(R"({"small": 300})", o, true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("spec.small"), std::string::npos);
  EXPECT_FALSE(decode(R"({"steps": [{"replicas": 99999999999}]})", o, true).ok());
}

TEST(JsonCodec, FractionalNumberForIntegerIsAnError) {
  // 1.5 for an integer member is refused; 2.0 is the integer 2.
  Outer o;
  EXPECT_FALSE(decode(R"({"steps": [{"replicas": 1.5}]})", o, true).ok());
  ASSERT_TRUE(decode(R"({"steps": [{"replicas": 2.0}]})", o, true).ok());
  EXPECT_EQ(o.steps[0].replicas, 2);
}

TEST(JsonCodec, WrongTypeNamesPathAndExpectedType) {
  // A string where a list belongs is an error naming the path and the expected type.
  Outer o;
  Status s = decode(R"({"steps": "train"})", o, true);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("spec.steps"), std::string::npos);
  EXPECT_NE(s.error().message.find("list"), std::string::npos);
}

TEST(JsonCodec, ModelTypesRoundTrip) {
  // A model struct encodes and decodes back to an equal value.
  Step step;
  step.name = "train";
  step.command = {"python", "train.py"};
  step.resources = Resources::parse_or_die("cpu:8,memory:32Gi,gpu/nvidia-a100-80gb:1");
  step.replicas = 2;
  step.env = {{"EPOCHS", "3"}};
  Step back;
  ASSERT_TRUE(from_json(to_json(step), back, DecodeContext{"", true}).ok());
  EXPECT_EQ(back.name, step.name);
  EXPECT_EQ(back.command, step.command);
  EXPECT_EQ(back.resources, step.resources);
  EXPECT_EQ(back.replicas, 2);
  EXPECT_EQ(back.env, step.env);
}

}  // namespace
}  // namespace cp
