// How model structs become rows, for every backend: each table keeps the
// whole struct as a JSON document (encoded with common/json.h, so that no
// field can be forgotten) and copies a few fields into plain columns only so
// that they can be filtered, sorted and indexed. The document is the truth.
//
// Documents are decoded leniently: a row written by a newer version, with
// fields this one does not know, still reads.
#pragma once

#include <boost/describe/enum_from_string.hpp>
#include <boost/describe/enum_to_string.hpp>

#include <string>
#include <string_view>

#include "common/json.h"
#include "store/store_error.h"

namespace cp {

template <class T>
std::string encode_row(const T& value) {
  return to_json_text(value);
}

template <class T>
Result<T> decode_row(std::string_view text, std::string_view table) {
  auto parsed = parse_json(text);
  if (!parsed.ok()) return corrupt_row(table, parsed.error());
  T out{};
  auto status = from_json(parsed.value(), out, DecodeContext{"", /*strict=*/false});
  if (!status.ok()) return corrupt_row(table, status.error());
  return out;
}

// Enum columns hold the enumerator's name ("Queued"), as in the documents.
template <class E>
std::string enum_name(E value) {
  return boost::describe::enum_to_string(value, "unknown");
}

template <class E>
Result<E> enum_from_name(const std::string& name, std::string_view table) {
  E out{};
  if (!boost::describe::enum_from_string(name.c_str(), out)) {
    return corrupt_row(table, Error{"invalid_field", 500, "unknown enum value \"" + name + "\"", "", {}});
  }
  return out;
}

}  // namespace cp
