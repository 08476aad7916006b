// JSON codecs driven by Boost.Describe: a struct described with
// BOOST_DESCRIBE_STRUCT encodes to an object of its members and decodes back,
// with the field path of the first problem ("spec.steps[1].replicas").
//
// Unlike boost::json::value_to, decoding tolerates missing members (they keep
// their defaults) and, in strict mode, rejects unknown ones: user documents
// are decoded strictly, stored rows and agent messages leniently so that a
// newer peer may add fields.
//
// A type with its own format provides, found by ADL:
//   void cp_to_json(boost::json::value& out, const T&);
//   Status cp_from_json(const boost::json::value& in, T& out, const DecodeContext& ctx);
#pragma once

#include <boost/describe.hpp>
#include <boost/json.hpp>
#include <boost/mp11/algorithm.hpp>

#include <charconv>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "common/result.h"

namespace cp {
namespace json = boost::json;

// Where in a document a value is being decoded ("spec.steps[2].resources"),
// for error messages. A child context refers to its parent and keeps only
// its own key or index: the path is built only when an error names it
// (building it for every array element was a fifth of an agent sync's
// decoding). So a child must not outlive its parent, nor the key it was
// given: pass them down the call stack, as from_json does.
class DecodeContext {
 public:
  DecodeContext() = default;
  DecodeContext(std::string root, bool strict_keys = false) : strict(strict_keys), root_(std::move(root)) {}
  bool strict = false;  // reject unknown object keys
  DecodeContext at(std::string_view key) const {
    DecodeContext c = child();
    c.key_ = key;
    return c;
  }
  DecodeContext index(std::size_t i) const {
    DecodeContext c = child();
    c.index_ = i;
    return c;
  }
  std::string path() const;  // field path of the value being decoded

 private:
  DecodeContext child() const {
    DecodeContext c;
    c.strict = strict;
    c.parent_ = this;
    return c;
  }
  static constexpr std::size_t kNoIndex = static_cast<std::size_t>(-1);
  const DecodeContext* parent_ = nullptr;
  std::string root_;      // the root's path; "" when none
  std::string_view key_;  // a child's field name
  std::size_t index_ = kNoIndex;  // or its array index
};

Error type_error(const DecodeContext& ctx, std::string_view expected);
std::string json_kind_name(const json::value& v);

namespace detail {
template <class T>
struct is_vector : std::false_type {};
template <class T, class A>
struct is_vector<std::vector<T, A>> : std::true_type {};
template <class T>
struct is_string_map : std::false_type {};
template <class T, class C, class A>
struct is_string_map<std::map<std::string, T, C, A>> : std::true_type {};
template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

template <class T>
concept HasCustomToJson = requires(json::value& v, const T& t) { cp_to_json(v, t); };
template <class T>
concept HasCustomFromJson = requires(const json::value& v, T& t, const DecodeContext& c) {
  { cp_from_json(v, t, c) } -> std::same_as<Status>;
};
}  // namespace detail

template <class T>
json::value to_json(const T& v);

template <class T>
void to_json_into(json::value& out, const T& v) {
  if constexpr (detail::HasCustomToJson<T>) {
    cp_to_json(out, v);
  } else if constexpr (std::is_same_v<T, json::value>) {
    out = v;
  } else if constexpr (std::is_same_v<T, json::object>) {
    out = v;
  } else if constexpr (std::is_same_v<T, bool>) {
    out = v;
  } else if constexpr (std::is_integral_v<T>) {
    out = static_cast<std::int64_t>(v);
  } else if constexpr (std::is_floating_point_v<T>) {
    out = static_cast<double>(v);
  } else if constexpr (std::is_same_v<T, std::string>) {
    out = json::string(v);
  } else if constexpr (boost::describe::has_describe_enumerators<T>::value) {
    const char* name = boost::describe::enum_to_string(v, "unknown");
    out = json::string(name);
  } else if constexpr (detail::is_optional<T>::value) {
    if (v) {
      to_json_into(out, *v);
    } else {
      out = nullptr;
    }
  } else if constexpr (detail::is_vector<T>::value) {
    json::array arr;
    arr.reserve(v.size());
    for (const auto& e : v) arr.push_back(to_json(e));
    out = std::move(arr);
  } else if constexpr (detail::is_string_map<T>::value) {
    json::object obj;
    for (const auto& [k, e] : v) obj[k] = to_json(e);
    out = std::move(obj);
  } else if constexpr (boost::describe::has_describe_members<T>::value) {
    json::object obj;
    using Ds = boost::describe::describe_members<T, boost::describe::mod_public>;
    boost::mp11::mp_for_each<Ds>([&](auto d) {
      const auto& member = v.*d.pointer;
      // Unset optionals are left out rather than written as null.
      if constexpr (detail::is_optional<std::decay_t<decltype(member)>>::value) {
        if (!member) return;
      }
      obj[d.name] = to_json(member);
    });
    out = std::move(obj);
  } else {
    static_assert(sizeof(T) == 0, "no JSON encoding for this type");
  }
}

template <class T>
json::value to_json(const T& v) {
  json::value out;
  to_json_into(out, v);
  return out;
}

template <class T>
Status from_json(const json::value& in, T& out, const DecodeContext& ctx = {});

namespace detail {
template <class T>
Status integer_from_json(const json::value& in, T& out, const DecodeContext& ctx) {
  std::int64_t n = 0;
  if (in.is_int64()) {
    n = in.get_int64();
  } else if (in.is_uint64()) {
    if (in.get_uint64() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      return errors::invalid(ctx.path(), "number is too large", "数值过大");
    }
    n = static_cast<std::int64_t>(in.get_uint64());
  } else if (in.is_double()) {
    double d = in.get_double();
    if (d != static_cast<double>(static_cast<std::int64_t>(d)) || d > 9.2e18 || d < -9.2e18) {
      return errors::invalid(ctx.path(), "expected a whole number", "应为整数");
    }
    n = static_cast<std::int64_t>(d);
  } else {
    return type_error(ctx, "integer");
  }
  if (n < static_cast<std::int64_t>(std::numeric_limits<T>::min()) ||
      (n > 0 && static_cast<std::uint64_t>(n) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))) {
    if (n < 0 && std::is_unsigned_v<T>) return errors::invalid(ctx.path(), "must not be negative", "不能为负数");
    return errors::invalid(ctx.path(), "number is out of range", "数值超出范围");
  }
  out = static_cast<T>(n);
  return {};
}
}  // namespace detail

template <class T>
Status from_json(const json::value& in, T& out, const DecodeContext& ctx) {
  if constexpr (detail::HasCustomFromJson<T>) {
    return cp_from_json(in, out, ctx);
  } else if constexpr (std::is_same_v<T, json::value>) {
    out = in;
    return {};
  } else if constexpr (std::is_same_v<T, json::object>) {
    if (!in.is_object()) return type_error(ctx, "object");
    out = in.get_object();
    return {};
  } else if constexpr (std::is_same_v<T, bool>) {
    if (!in.is_bool()) return type_error(ctx, "boolean");
    out = in.get_bool();
    return {};
  } else if constexpr (std::is_integral_v<T>) {
    return detail::integer_from_json(in, out, ctx);
  } else if constexpr (std::is_floating_point_v<T>) {
    if (!in.is_number()) return type_error(ctx, "number");
    out = static_cast<T>(in.to_number<double>());
    return {};
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!in.is_string()) return type_error(ctx, "string");
    out = std::string(in.get_string());
    return {};
  } else if constexpr (boost::describe::has_describe_enumerators<T>::value) {
    if (!in.is_string()) return type_error(ctx, "string");
    std::string s(in.get_string());
    if (!boost::describe::enum_from_string(s.c_str(), out)) {
      std::string allowed;
      boost::mp11::mp_for_each<boost::describe::describe_enumerators<T>>([&](auto d) {
        if (!allowed.empty()) allowed += ", ";
        allowed += d.name;
      });
      return errors::invalid(ctx.path(), "unknown value \"" + s + "\" (one of: " + allowed + ")",
                             "未知取值 \"" + s + "\"（可选：" + allowed + "）");
    }
    return {};
  } else if constexpr (detail::is_optional<T>::value) {
    if (in.is_null()) {
      out.reset();
      return {};
    }
    typename T::value_type v{};
    CP_TRY(from_json(in, v, ctx));
    out = std::move(v);
    return {};
  } else if constexpr (detail::is_vector<T>::value) {
    if (in.is_null()) {
      out.clear();
      return {};
    }
    if (!in.is_array()) return type_error(ctx, "list");
    const auto& arr = in.get_array();
    T result;
    result.reserve(arr.size());
    for (std::size_t i = 0; i < arr.size(); ++i) {
      typename T::value_type v{};
      CP_TRY(from_json(arr[i], v, ctx.index(i)));
      result.push_back(std::move(v));
    }
    out = std::move(result);
    return {};
  } else if constexpr (detail::is_string_map<T>::value) {
    if (in.is_null()) {
      out.clear();
      return {};
    }
    if (!in.is_object()) return type_error(ctx, "map");
    T result;
    for (const auto& kv : in.get_object()) {
      typename T::mapped_type v{};
      CP_TRY(from_json(kv.value(), v, ctx.at(kv.key())));
      result.emplace(std::string(kv.key()), std::move(v));
    }
    out = std::move(result);
    return {};
  } else if constexpr (boost::describe::has_describe_members<T>::value) {
    if (!in.is_object()) return type_error(ctx, "object");
    const auto& obj = in.get_object();
    using Ds = boost::describe::describe_members<T, boost::describe::mod_public>;
    Status status;
    if (ctx.strict) {
      for (const auto& kv : obj) {
        bool known = false;
        boost::mp11::mp_for_each<Ds>([&](auto d) { known = known || kv.key() == d.name; });
        if (!known) {
          auto c = ctx.at(kv.key());
          const std::string field = c.path();
          Error e{"unknown_field", 400, field + ": unknown field", field + "：未知字段", {}};
          e.details["field"] = field;
          return e;
        }
      }
    }
    boost::mp11::mp_for_each<Ds>([&](auto d) {
      if (!status.ok()) return;
      auto it = obj.find(d.name);
      if (it == obj.end()) return;
      status = from_json(it->value(), out.*d.pointer, ctx.at(d.name));
    });
    return status;
  } else {
    static_assert(sizeof(T) == 0, "no JSON decoding for this type");
  }
}

// Parses text as JSON with a nesting limit; errors are 400 "malformed_json".
// `storage`: where the tree's memory comes from (default: the heap, one
// allocation per string, array and object).
Result<json::value> parse_json(std::string_view text, std::size_t max_depth = 64, json::storage_ptr storage = {});

// Compact serialization.
inline std::string dump(const json::value& v) { return json::serialize(v); }

namespace detail {
// `s` as a JSON string, quoted and escaped as json::serialize writes it.
void append_json_string(std::string& out, std::string_view s);
inline void append_json(std::string& out, const json::value& v) { out += json::serialize(v); }
}  // namespace detail

// The text of to_json(v), written straight from `v`: the same bytes as
// dump(to_json(v)) (row_codec_test checks every row type), without building
// the tree first. Building it was 85% of encoding a task row, and the store
// encodes several rows for every task it writes. Types with their own
// cp_to_json still go through a (small) tree.
template <class T>
void to_json_text_into(std::string& out, const T& v) {
  if constexpr (detail::HasCustomToJson<T>) {
    json::value tree;
    cp_to_json(tree, v);
    detail::append_json(out, tree);
  } else if constexpr (std::is_same_v<T, json::value> || std::is_same_v<T, json::object>) {
    out += json::serialize(v);
  } else if constexpr (std::is_same_v<T, bool>) {
    out += v ? "true" : "false";
  } else if constexpr (std::is_integral_v<T>) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, static_cast<std::int64_t>(v));
    out.append(buf, r.ptr);
  } else if constexpr (std::is_floating_point_v<T>) {
    detail::append_json(out, json::value(static_cast<double>(v)));
  } else if constexpr (std::is_same_v<T, std::string>) {
    detail::append_json_string(out, v);
  } else if constexpr (boost::describe::has_describe_enumerators<T>::value) {
    detail::append_json_string(out, boost::describe::enum_to_string(v, "unknown"));
  } else if constexpr (detail::is_optional<T>::value) {
    if (v) {
      to_json_text_into(out, *v);
    } else {
      out += "null";
    }
  } else if constexpr (detail::is_vector<T>::value) {
    out += '[';
    bool first = true;
    for (const auto& e : v) {
      if (!first) out += ',';
      first = false;
      to_json_text_into(out, e);
    }
    out += ']';
  } else if constexpr (detail::is_string_map<T>::value) {
    out += '{';
    bool first = true;
    for (const auto& [k, e] : v) {
      if (!first) out += ',';
      first = false;
      detail::append_json_string(out, k);
      out += ':';
      to_json_text_into(out, e);
    }
    out += '}';
  } else if constexpr (boost::describe::has_describe_members<T>::value) {
    out += '{';
    bool first = true;
    using Ds = boost::describe::describe_members<T, boost::describe::mod_public>;
    boost::mp11::mp_for_each<Ds>([&](auto d) {
      const auto& member = v.*d.pointer;
      // Unset optionals are left out rather than written as null (to_json).
      if constexpr (detail::is_optional<std::decay_t<decltype(member)>>::value) {
        if (!member) return;
      }
      if (!first) out += ',';
      first = false;
      detail::append_json_string(out, d.name);
      out += ':';
      to_json_text_into(out, member);
    });
    out += '}';
  } else {
    static_assert(sizeof(T) == 0, "no JSON encoding for this type");
  }
}

template <class T>
std::string to_json_text(const T& v) {
  std::string out;
  out.reserve(512);
  to_json_text_into(out, v);
  return out;
}

// Decodes a struct from JSON text.
template <class T>
Result<T> decode_json(std::string_view text, bool strict = false) {
  CP_ASSIGN(auto v, parse_json(text));
  T out{};
  CP_TRY(from_json(v, out, DecodeContext{"", strict}));
  return out;
}

}  // namespace cp
