// Hash maps keyed by std::string and found by std::string_view: no string
// is built per lookup (C++20 heterogeneous lookup).
#pragma once

#include <cstddef>
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

// Appends the bytes of `v` (an integer, a pointer, or a struct without
// padding) to a byte key of such a map: fixed-size fields read back one way.
template <class T>
void append_bytes(std::string& key, const T& v) {
  static_assert(std::has_unique_object_representations_v<T>, "no padding: the key is its bytes");
  key.append(reinterpret_cast<const char*>(&v), sizeof v);
}

}  // namespace cp
