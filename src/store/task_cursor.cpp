#include "store/task_cursor.h"

#include <charconv>

#include "store/store_error.h"

namespace cp {
namespace {

constexpr std::string_view kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

std::string base64url_encode(std::string_view in) {
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out += kAlphabet[(acc >> bits) & 63];
    }
  }
  if (bits > 0) out += kAlphabet[(acc << (6 - bits)) & 63];
  return out;
}

// Strict: only the unpadded alphabet, and no stray bits left over, so that
// each cursor has exactly one spelling.
bool base64url_decode(std::string_view in, std::string& out) {
  std::uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    auto pos = kAlphabet.find(c);
    if (pos == std::string_view::npos) return false;
    acc = (acc << 6) | static_cast<std::uint32_t>(pos);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xFF);
    }
  }
  return bits < 6 && (acc & ((1u << bits) - 1)) == 0;
}

}  // namespace

std::string encode_task_cursor(const TaskCursor& cursor) {
  return base64url_encode(std::to_string(cursor.created_at) + ":" + cursor.id);
}

Result<TaskCursor> decode_task_cursor(std::string_view text) {
  std::string plain;
  if (text.empty() || text.size() > 1024 || !base64url_decode(text, plain)) return invalid_cursor();
  auto colon = plain.find(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == plain.size()) return invalid_cursor();
  TaskCursor cursor;
  const char* first = plain.data();
  const char* last = plain.data() + colon;
  auto [end, ec] = std::from_chars(first, last, cursor.created_at);
  if (ec != std::errc() || end != last) return invalid_cursor();
  cursor.id = plain.substr(colon + 1);
  return cursor;
}

}  // namespace cp
