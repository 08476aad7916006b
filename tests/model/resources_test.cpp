#include "model/resources.h"

#include <gtest/gtest.h>

namespace cp {
namespace {

std::int64_t qty(std::string_view resource, std::string_view text) {
  auto r = parse_quantity(resource, text, "field");
  EXPECT_TRUE(r.ok()) << text << ": " << (r.ok() ? "" : r.error().message);
  return r.ok() ? *r : -1;
}

Error qty_error(std::string_view resource, std::string_view text) {
  auto r = parse_quantity(resource, text, "spec.x");
  EXPECT_FALSE(r.ok()) << text << " parsed as " << (r.ok() ? *r : 0);
  return r.ok() ? Error{} : r.error();
}

TEST(Quantity, CpuMillicores) {
  // cpu "500m" is 500 millicores.
  EXPECT_EQ(qty("cpu", "500m"), 500);
}

TEST(Quantity, CpuFractionalCores) {
  // cpu "1.5" is 1500 millicores and "2" is 2000.
  EXPECT_EQ(qty("cpu", "1.5"), 1500);
  EXPECT_EQ(qty("cpu", "2"), 2000);
}

TEST(Quantity, CpuFinerThanAMillicoreIsRefused) {
  // cpu "0.0001" is a tenth of a millicore: refused, not rounded.
  Error e = qty_error("cpu", "0.0001");
  EXPECT_EQ(e.code, "invalid_quantity");
  EXPECT_NE(e.message.find("spec.x"), std::string::npos);
}

TEST(Quantity, MemoryBinarySuffixes) {
  // memory "4Gi" is 4 * 2^30 bytes; "512Mi" is 512 * 2^20.
  EXPECT_EQ(qty("memory", "4Gi"), 4LL << 30);
  EXPECT_EQ(qty("memory", "512Mi"), 512LL << 20);
}

TEST(Quantity, MemoryFractionThatComesOutWhole) {
  // memory "1.5Gi" is 1.5 * 2^30 bytes, a whole number of bytes.
  EXPECT_EQ(qty("memory", "1.5Gi"), 3LL << 29);
}

TEST(Quantity, MemoryDecimalSuffixes) {
  // memory "1G" is 10^9 bytes, not 2^30.
  EXPECT_EQ(qty("memory", "1G"), 1'000'000'000);
}

TEST(Quantity, NegativeIsRefused) {
  // A negative amount is an error for every resource.
  EXPECT_EQ(qty_error("cpu", "-1").code, "invalid_quantity");
  EXPECT_EQ(qty_error("memory", "-4Gi").code, "invalid_quantity");
  EXPECT_EQ(qty_error("gpu/a100", "-2").code, "invalid_quantity");
}

TEST(Quantity, ExponentNotationIsRefused) {
  // "1e3" (Kubernetes' exponent form) is not accepted: one spelling per amount.
  EXPECT_EQ(qty_error("memory", "1e3").code, "invalid_quantity");
  EXPECT_EQ(qty_error("cpu", "1e3").code, "invalid_quantity");
}

TEST(Quantity, NotANumberIsRefused) {
  // "abc", "" and "." are not quantities.
  EXPECT_EQ(qty_error("cpu", "abc").code, "invalid_quantity");
  EXPECT_EQ(qty_error("memory", "").code, "invalid_quantity");
  EXPECT_EQ(qty_error("memory", ".").code, "invalid_quantity");
}

TEST(Quantity, UnknownUnitIsRefused) {
  // A memory unit that is not one of k, M, G, T, P, Ki..Pi is an error.
  EXPECT_EQ(qty_error("memory", "4GB").code, "invalid_quantity");
  EXPECT_EQ(qty_error("cpu", "2Gi").code, "invalid_quantity");
}

TEST(Quantity, OverflowIsRefused) {
  // Amounts that would overflow, or exceed kMaxQuantity, are errors, not wrapped.
  EXPECT_EQ(qty_error("memory", "99999999999999999999Gi").code, "invalid_quantity");
  EXPECT_EQ(qty_error("memory", "9Pi").code, "invalid_quantity");  // 9 * 2^50 > 2^53
  EXPECT_EQ(qty("memory", "8Pi"), kMaxQuantity);
}

TEST(Quantity, ExtendedResourcesAreWholeNumbers) {
  // gpu/<type> counts whole devices: "2" is fine, "1.5" and "500m" are not.
  EXPECT_EQ(qty("gpu/a100", "2"), 2);
  EXPECT_EQ(qty_error("gpu/a100", "1.5").code, "invalid_quantity");
  EXPECT_EQ(qty_error("gpu/a100", "500m").code, "invalid_quantity");
}

TEST(Quantity, ErrorsHaveBothLanguages) {
  // Every quantity error carries an English and a Chinese message.
  Error e = qty_error("memory", "lots");
  EXPECT_FALSE(e.message.empty());
  EXPECT_FALSE(e.message_zh.empty());
}

TEST(Quantity, FormatThenParseRoundTrips) {
  // format_quantity writes text that parse_quantity reads back to the same amount.
  struct Case {
    const char* resource;
    std::int64_t amount;
    const char* text;
  };
  for (const Case& c : {Case{"cpu", 1500, "1500m"}, Case{"cpu", 2000, "2"}, Case{"cpu", 1, "1m"},
                        Case{"memory", 4LL << 30, "4Gi"}, Case{"memory", 1'000'000'000, "1000000000"},
                        Case{"memory", 3LL << 29, "1536Mi"}, Case{"memory", 0, "0"}, Case{"gpu/a100", 16, "16"}}) {
    EXPECT_EQ(format_quantity(c.resource, c.amount), c.text);
    EXPECT_EQ(qty(c.resource, format_quantity(c.resource, c.amount)), c.amount) << c.resource << " " << c.amount;
  }
}

TEST(Resources, ShortFormParses) {
  // "cpu:2,memory:4Gi,gpu/a100:8" reads as three amounts in base units.
  auto r = Resources::parse_or_die("cpu:2,memory:4Gi,gpu/a100:8");
  EXPECT_EQ(r.cpu_milli(), 2000);
  EXPECT_EQ(r.memory_bytes(), 4LL << 30);
  EXPECT_EQ(r.gpus(), 8);
  EXPECT_EQ(r.gpu_type(), "a100");
}

TEST(Resources, JsonRoundTrip) {
  // Resources encode as a map of quantity strings and decode back equal.
  auto r = Resources::parse_or_die("cpu:1500m,memory:1536Mi,gpu/a100:2");
  json::value v = to_json(r);
  EXPECT_EQ(v.at("cpu"), "1500m");
  EXPECT_EQ(v.at("memory"), "1536Mi");
  Resources back;
  ASSERT_TRUE(from_json(v, back).ok());
  EXPECT_EQ(back, r);
}

TEST(Resources, ArithmeticKeepsNameOrderAndDropsZeroes) {
  // Amounts stay in name order whatever order they are set in; an amount
  // that comes to 0 is gone; adding or taking a value from itself reads it
  // whole first (its amounts sit in one array that setting may move).
  Resources r;
  r.set("memory", 4);
  r.set("gpu/l40s", 1);
  r.set("cpu", 2);
  r.set("gpu/a100", 3);
  std::vector<std::string> names;
  for (const auto& [name, amount] : r.amounts()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"cpu", "gpu/a100", "gpu/l40s", "memory"}));
  EXPECT_EQ(r.gpus(), 4);
  EXPECT_EQ(r.gpu_type(), "a100");

  r += r;
  EXPECT_EQ(r.get("cpu"), 4);
  EXPECT_EQ(r.get("memory"), 8);
  EXPECT_EQ(r.get("gpu/a100"), 6);
  EXPECT_EQ(r.get("gpu/l40s"), 2);
  r -= Resources::parse_or_die("gpu/a100:6");
  EXPECT_EQ(r.amounts().size(), 3u);
  EXPECT_EQ(r.gpu_type(), "l40s");
  r -= r;
  EXPECT_TRUE(r.empty());
}

TEST(Resources, JsonDecodeNamesTheBadField) {
  // A bad amount inside a resource map is reported with its field path.
  Resources r;
  auto status = from_json(json::parse(R"({"cpu": "lots"})"), r, DecodeContext{"spec.default_request", true});
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("spec.default_request.cpu"), std::string::npos);
}

}  // namespace
}  // namespace cp
