// The price table document and the cost arithmetic, on hand-computed cases.
#include <gtest/gtest.h>

#include "model/documents.h"
#include "model/prices.h"

namespace cp {
namespace {

constexpr Millis kJan1 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z
constexpr Millis kDay = 86'400'000;
constexpr Millis kHour = 3'600'000;

Result<PriceTable> table(const std::string& prices, const std::string& extra = "") {
  auto doc = parse_document("apiVersion: cubeplane/v1\nkind: PriceTable\nmetadata: {name: default}\nspec:\n" + extra +
                            "  prices:\n" + prices);
  if (!doc.ok()) return doc.error();
  return price_table_from_document(*doc);
}

TEST(Prices, ParseExactAmountsAndRoundTrip) {
  EXPECT_EQ(parse_price("2.50", "p").value(), 2'500'000);
  EXPECT_EQ(parse_price("0.000001", "p").value(), 1);
  EXPECT_EQ(parse_price("1000000", "p").value(), 1'000'000'000'000);
  for (const char* bad : {"-1", "1.0000001", "1e3", "", ".5", "5.", "1000000.01", "1,5", "abc"}) {
    EXPECT_FALSE(parse_price(bad, "p").ok()) << bad;
  }
  EXPECT_EQ(format_micros(2'500'000), "2.5");
  EXPECT_EQ(format_micros(40'000), "0.04");
  EXPECT_EQ(format_micros(3'000'000), "3");
  auto t = table("    - {resource: cpu, per_hour: 0.04, from: 2026-01-01}\n"
                 "    - {resource: gpu/a100, per_hour: \"2.50\", from: 2026-02-01}\n",
                 "  currency: CNY\n");
  ASSERT_TRUE(t.ok()) << t.error().message;
  EXPECT_EQ(t->currency, "CNY");
  auto again = price_table_from_document(price_table_to_document(*t));
  ASSERT_TRUE(again.ok()) << again.error().message;
  EXPECT_EQ(to_json(again->prices), to_json(t->prices));
}

TEST(Prices, BadTablesAreRefusedNamingTheField) {
  auto message = [](const Result<PriceTable>& r) { return r.ok() ? std::string("ok") : r.error().message; };
  EXPECT_NE(message(table("    - {resource: gpu/a100, per_hour: \"-2\", from: 2026-01-01}\n")).find("spec.prices[0].per_hour"),
            std::string::npos);
  EXPECT_NE(message(table("    - {resource: gpu/a100, per_hour: 2, from: 2026-02-30}\n")).find("spec.prices[0].from"),
            std::string::npos);
  EXPECT_NE(message(table("    - {resource: disk, per_hour: 2, from: 2026-01-01}\n")).find("spec.prices[0].resource"),
            std::string::npos);
  EXPECT_NE(message(table("    - {resource: cpu, per_hour: 1, from: 2026-01-01}\n"
                          "    - {resource: cpu, per_hour: 2, from: 2026-01-01}\n"))
                .find("spec.prices[1]"),
            std::string::npos);
  EXPECT_NE(message(table("    - {resource: cpu, per_hour: 1, from: 2026-01-01, colour: red}\n")).find("colour"),
            std::string::npos);
  EXPECT_NE(message(table("    - {resource: cpu, per_hour: 1, from: 2026-01-01}\n", "  currency: dollars\n"))
                .find("spec.currency"),
            std::string::npos);
}

TEST(Prices, ThePriceOfADayIsTheLatestStartedOneAndGpuTypesFallBackToGpu) {
  auto t = table("    - {resource: gpu/a100, per_hour: 2, from: 2026-01-01}\n"
                 "    - {resource: gpu/a100, per_hour: 3, from: 2026-01-10}\n"
                 "    - {resource: gpu, per_hour: 1, from: 2026-01-05}\n")
               .value();
  EXPECT_FALSE(t.price_at("gpu/a100", kJan1 - kDay));
  EXPECT_EQ(t.price_at("gpu/a100", kJan1 + 8 * kDay), 2'000'000);
  EXPECT_EQ(t.price_at("gpu/a100", kJan1 + 9 * kDay), 3'000'000);
  EXPECT_FALSE(t.price_at("gpu/l40s", kJan1));
  EXPECT_EQ(t.price_at("gpu/l40s", kJan1 + 4 * kDay), 1'000'000);
  EXPECT_FALSE(t.price_at("cpu", kJan1 + 4 * kDay));
  EXPECT_TRUE(t.changes_within(kJan1, kJan1 + 31 * kDay));
  EXPECT_FALSE(t.changes_within(kJan1 + 9 * kDay, kJan1 + 31 * kDay));  // a start on the first day is not a change
}

TEST(Prices, CostIsExactToTheCentAndRoundedOnce) {
  auto t = table("    - {resource: gpu/a100, per_hour: \"2.50\", from: 2026-01-01}\n"
                 "    - {resource: cpu, per_hour: \"0.04\", from: 2026-01-01}\n"
                 "    - {resource: memory, per_hour: \"0.005\", from: 2026-01-01}\n")
               .value();
  // 2 GPUs, 4 cores, 16 GiB for 1.5 h: 7.50 + 0.24 + 0.12.
  Cost c;
  c.add(t, kJan1, "a100", 2 * 3 * kHour / 2, 4 * 3 * kHour / 2, 16 * 1024 * 5400);
  EXPECT_EQ(c.cents(), 786);
  // One GPU-second costs 0.0694 cents: 3,600 of them, each alone rounding
  // to 0, add up to 2.50 exactly because the sum is rounded once.
  Cost many;
  for (int i = 0; i < 3600; ++i) {
    Cost one;
    one.add(t, kJan1, "a100", 1000, 0, 0);
    EXPECT_EQ(one.cents(), 0);
    many.add(one);
  }
  EXPECT_EQ(many.cents(), 250);
  // Half a cent rounds up: 0.005 is 7.2 GPU-seconds at 2.50.
  Cost half;
  half.add(t, kJan1, "a100", 7200, 0, 0);
  EXPECT_EQ(half.cents(), 1);
  Cost unpriced;
  unpriced.add(t, kJan1, "l40s", 3 * kHour, 0, 0);
  EXPECT_EQ(unpriced.cents(), 0);
}

}  // namespace
}  // namespace cp
