// Log bytes travel inside JSON strings, which must be valid UTF-8 (the
// server's parser rejects anything else). Offsets must stay byte-exact, so
// invalid bytes are replaced one-for-one by '?', never by the 3-byte U+FFFD.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace cp {

// Appends to `out` the longest prefix of `in` that can be sent now, with each
// invalid byte replaced by '?', and returns how many bytes of `in` it covers
// (always == the bytes appended). An incomplete sequence at the end is held
// back for the next read unless `final` (nothing will follow), in which case
// its bytes become '?' too.
std::size_t sanitize_utf8(std::string_view in, bool final, std::string& out);

}  // namespace cp
