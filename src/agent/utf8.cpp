#include "agent/utf8.h"

namespace cp {
namespace {

// Length of the sequence that starts with lead byte `b`, 0 when b cannot start one.
std::size_t sequence_length(unsigned char b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Whether `c` may follow lead byte `lead` as the byte at position `pos` (1..3).
bool continuation_ok(unsigned char lead, std::size_t pos, unsigned char c) {
  if (pos == 1) {
    // Second byte ranges exclude overlong forms, surrogates and > U+10FFFF.
    if (lead == 0xE0) return c >= 0xA0 && c <= 0xBF;
    if (lead == 0xED) return c >= 0x80 && c <= 0x9F;
    if (lead == 0xF0) return c >= 0x90 && c <= 0xBF;
    if (lead == 0xF4) return c >= 0x80 && c <= 0x8F;
  }
  return c >= 0x80 && c <= 0xBF;
}

}  // namespace

std::size_t sanitize_utf8(std::string_view in, bool final, std::string& out) {
  std::size_t i = 0;
  while (i < in.size()) {
    auto lead = static_cast<unsigned char>(in[i]);
    std::size_t len = sequence_length(lead);
    if (len == 0) {
      out += '?';
      ++i;
      continue;
    }
    std::size_t have = 1;
    while (have < len && i + have < in.size() &&
           continuation_ok(lead, have, static_cast<unsigned char>(in[i + have]))) {
      ++have;
    }
    if (have == len) {
      out.append(in.substr(i, len));
      i += len;
    } else if (i + have == in.size() && !final) {
      break;  // cut in the middle of a character: the rest comes with the next read
    } else {
      out += '?';  // a broken sequence: replace its lead byte and look again at the next one
      ++i;
    }
  }
  return i;
}

}  // namespace cp
