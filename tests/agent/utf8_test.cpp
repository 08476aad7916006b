#include "agent/utf8.h"

#include <gtest/gtest.h>

namespace cp {
namespace {

std::pair<std::size_t, std::string> run(std::string_view in, bool final) {
  std::string out;
  std::size_t used = sanitize_utf8(in, final, out);
  return {used, out};
}

// Valid text passes unchanged.
TEST(SanitizeUtf8, ValidTextUnchanged) {
  std::string text = "plain, 中文, emoji \xF0\x9F\x98\x80\n";
  EXPECT_EQ(run(text, false), std::make_pair(text.size(), text));
}

// Invalid bytes become '?' one for one, so offsets stay byte-exact.
TEST(SanitizeUtf8, InvalidBytesReplacedOneForOne) {
  EXPECT_EQ(run("a\xFF"
                "b\xC0\xAF"
                "c",
                false),
            std::make_pair(std::size_t{6}, std::string("a?b??c")));
  EXPECT_EQ(run("\xED\xA0\x80", false), std::make_pair(std::size_t{3}, std::string("???")));  // a surrogate
}

// A character cut at the end of a read waits for the next read, unless nothing follows.
TEST(SanitizeUtf8, IncompleteTailHeldBackUnlessFinal) {
  EXPECT_EQ(run("ab\xE4\xB8", false), std::make_pair(std::size_t{2}, std::string("ab")));
  EXPECT_EQ(run("ab\xE4\xB8", true), std::make_pair(std::size_t{4}, std::string("ab??")));
  EXPECT_EQ(run("\xE4", false), std::make_pair(std::size_t{0}, std::string()));
}

}  // namespace
}  // namespace cp
