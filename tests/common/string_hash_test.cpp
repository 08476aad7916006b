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

TEST(StringMapTest, TheFlatMapFindsByViewsToo) {
  // FlatStringMap: the same lookups by view, and every entry still found
  // after inserts have moved them all (a thousand keys, many rehashes).
  FlatStringMap<int> m;
  for (int i = 0; i < 1000; ++i) m.emplace("class-" + std::to_string(i), i);
  const std::string text = "class-417/class-9";
  auto a = m.find(std::string_view(text).substr(0, 9));
  ASSERT_NE(a, m.end());
  EXPECT_EQ(a->second, 417);
  EXPECT_EQ(m.find(std::string_view(text).substr(10))->second, 9);
  EXPECT_EQ(m.find(std::string_view("class-1000")), m.end());
  for (int i = 0; i < 1000; i += 111) EXPECT_EQ(m.find("class-" + std::to_string(i))->second, i);
}

TEST(StringMapTest, TheBytesMapTellsKeysApartByEveryByteAndTheLength) {
  // FlatBytesMap: byte keys (append_bytes) of every length around a word,
  // keys that differ in one byte only, or only by trailing NULs.
  FlatBytesMap<int> m;
  std::string key;
  for (int i = 0; i < 300; ++i) {
    key.clear();
    append_bytes(key, static_cast<std::int64_t>(i / 20));
    key.append(static_cast<std::size_t>(i % 20), '\0');
    ASSERT_TRUE(m.emplace(key, i).second) << i;
  }
  for (int i = 0; i < 300; i += 7) {
    key.clear();
    append_bytes(key, static_cast<std::int64_t>(i / 20));
    key.append(static_cast<std::size_t>(i % 20), '\0');
    auto it = m.find(std::string_view(key));
    ASSERT_NE(it, m.end());
    EXPECT_EQ(it->second, i);
  }
  EXPECT_EQ(m.find(std::string_view("")), m.end());
  EXPECT_EQ(BytesHash{}(std::string("class\x1f")), BytesHash{}(std::string_view("class\x1f")));
  EXPECT_NE(BytesHash{}(std::string_view("a")), BytesHash{}(std::string_view("a\0", 2)));
  // Keys of one length that differ in any one byte hash apart: each step
  // mixes a word into the hash one to one, and every byte is in some word
  // (keys shorter than a word, and the tail after whole words, included).
  for (std::size_t n = 1; n <= 20; ++n) {
    const std::string base(n, 'a');
    for (std::size_t at = 0; at < n; ++at) {
      std::string other = base;
      other[at] = 'b';
      EXPECT_NE(BytesHash{}(base), BytesHash{}(other)) << "length " << n << ", byte " << at;
    }
  }
}

}  // namespace
}  // namespace cp
