#include "common/string_hash.h"

#include <gtest/gtest.h>

#include <string>
#include <string_view>

namespace cp {
namespace {

TEST(StringMapTest, AViewFindsTheEntryItsStringMadeAndNothingElse) {
  StringMap<int> m;
  m.emplace("rg-a", 1);
  m.emplace(std::string("rg-a") + '\0' + "u1", 2);  // keys may hold NUL
  const std::string text = "rg-a/rg-b";
  auto a = m.find(std::string_view(text).substr(0, 4));
  ASSERT_NE(a, m.end());
  EXPECT_EQ(a->second, 1);
  EXPECT_EQ(m.find(std::string_view("rg-a\0u1", 7))->second, 2);
  EXPECT_EQ(m.find(std::string_view(text).substr(5)), m.end());
  EXPECT_EQ(m.find(std::string_view("rg-a\0u2", 7)), m.end());
  EXPECT_EQ(StringHash{}(std::string("rg-a")), StringHash{}(std::string_view("rg-a")));
}

}  // namespace
}  // namespace cp
