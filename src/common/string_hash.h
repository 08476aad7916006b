// Hash maps keyed by std::string and found by std::string_view: no string
// is built per lookup (C++20 heterogeneous lookup).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>

#include <boost/unordered/unordered_flat_map.hpp>

namespace cp {

struct StringHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>{}(s); }
};

template <class T>
using StringMap = std::unordered_map<std::string, T, StringHash, std::equal_to<>>;

// The same in one open-addressed array (Boost's unordered_flat_map): a
// lookup reads one slot group and the key, not a bucket, a node and the key
// apart in memory. An insert may move every entry: no reference to an entry
// is kept across one.
template <class T>
using FlatStringMap = boost::unordered_flat_map<std::string, T, StringHash, std::equal_to<>>;

// A hash for byte keys (append_bytes below, with names between): eight
// bytes at a time, where std::hash reads a long key byte by byte. For
// FlatBytesMap, whose table mixes the hash again: not a hash to be used
// on its own.
struct BytesHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const noexcept {
    std::uint64_t h = 0x9E3779B97F4A7C15ULL ^ s.size();
    auto mix = [&h](std::uint64_t w) {
      h = (h ^ w) * 0xBF58476D1CE4E5B9ULL;
      h ^= h >> 31;
    };
    const char* p = s.data();
    const std::size_t n = s.size();
    std::size_t i = 0;
    for (; i + 8 <= n; i += 8) mix(load<std::uint64_t>(p + i));
    // The rest in fixed-size reads (a copy of a run-time length is a call):
    // the last eight bytes, some mixed already, or for a key shorter than
    // that, two reads that meet or overlap. Equal keys read the same.
    if (i == n) return static_cast<std::size_t>(h);
    if (n >= 8) {
      mix(load<std::uint64_t>(p + n - 8));
    } else if (n >= 4) {
      mix(load<std::uint32_t>(p) | (std::uint64_t{load<std::uint32_t>(p + n - 4)} << 32));
    } else {
      // 1 to 3 bytes: the first, the middle and the last (some the same).
      mix(static_cast<unsigned char>(p[0]) | (std::uint64_t{static_cast<unsigned char>(p[n / 2])} << 8) |
          (std::uint64_t{static_cast<unsigned char>(p[n - 1])} << 16));
    }
    return static_cast<std::size_t>(h);
  }

 private:
  template <class W>
  static W load(const char* p) noexcept {
    W w;
    std::memcpy(&w, p, sizeof w);
    return w;
  }
};

// FlatStringMap for byte keys.
template <class T>
using FlatBytesMap = boost::unordered_flat_map<std::string, T, BytesHash, std::equal_to<>>;

// Appends the bytes of `v` (an integer, a pointer, or a struct without
// padding) to a byte key of such a map: fixed-size fields read back one way.
template <class T>
void append_bytes(std::string& key, const T& v) {
  static_assert(std::has_unique_object_representations_v<T>, "no padding: the key is its bytes");
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace cp
