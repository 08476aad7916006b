// PriorityClass documents:
//   spec: {value: 1000, preemptible: false, may_preempt: true,
//          preempt_after: 10m, grace: 30s, description: "..."}
#include <boost/describe.hpp>

#include <cmath>

#include "model/documents.h"
#include "model/documents_internal.h"

namespace cp {
namespace {

constexpr std::int64_t kMaxPriorityValue = 1'000'000;
constexpr std::size_t kMaxDescription = 1024;

struct PriorityClassSpecDoc {
  // Kept as a JSON value and checked below: the generic integer decoding of
  // common/json.h refused negative numbers when this was written (it casts
  // to uint64 before comparing with the type's maximum).
  json::value value = 0;
  bool preemptible = true;
  bool may_preempt = false;
  docs::Duration preempt_after;
  docs::Duration grace;
  std::string description;
};
BOOST_DESCRIBE_STRUCT(PriorityClassSpecDoc, (), (value, preemptible, may_preempt, preempt_after, grace, description))

// A whole number within [lo, hi], or nullopt.
std::optional<std::int64_t> whole_in_range(const json::value& v, std::int64_t lo, std::int64_t hi) {
  if (v.is_int64() && v.get_int64() >= lo && v.get_int64() <= hi) return v.get_int64();
  if (v.is_double()) {
    double d = v.get_double();
    // Range first: converting an out-of-range double to an integer is undefined.
    if (d >= static_cast<double>(lo) && d <= static_cast<double>(hi) && d == std::floor(d)) {
      return static_cast<std::int64_t>(d);
    }
  }
  return std::nullopt;
}

// Omitted fields keep the model's defaults.
PriorityClassSpecDoc defaults() {
  PriorityClass pc;
  return PriorityClassSpecDoc{pc.value, pc.preemptible, pc.may_preempt, {pc.preempt_after_s}, {pc.grace_s}, ""};
}

}  // namespace

Result<PriorityClass> priority_class_from_document(const json::value& doc) {
  CP_ASSIGN(auto env, docs::open_document(doc, "PriorityClass"));
  PriorityClass pc;
  CP_ASSIGN(pc.name, docs::object_name(env.metadata));

  PriorityClassSpecDoc spec = defaults();
  CP_TRY(docs::decode_strict(env.spec, spec, "spec"));
  std::optional<std::int64_t> value = whole_in_range(spec.value, -kMaxPriorityValue, kMaxPriorityValue);
  if (!value) {
    std::string got = json::serialize(spec.value);
    return errors::invalid("spec.value", "must be a whole number between -1000000 and 1000000, got " + got,
                           "必须是 -1000000 到 1000000 之间的整数，实际为 " + got);
  }
  if (spec.description.size() > kMaxDescription) {
    return errors::invalid("spec.description", "is longer than 1024 bytes", "超过 1024 字节");
  }
  pc.value = static_cast<int>(*value);
  pc.preemptible = spec.preemptible;
  pc.may_preempt = spec.may_preempt;
  pc.preempt_after_s = spec.preempt_after.seconds;
  pc.grace_s = spec.grace.seconds;
  pc.description = spec.description;
  return pc;
}

json::object priority_class_to_document(const PriorityClass& pc) {
  json::object spec;
  spec["value"] = pc.value;
  spec["preemptible"] = pc.preemptible;
  spec["may_preempt"] = pc.may_preempt;
  spec["preempt_after"] = docs::format_duration(pc.preempt_after_s);
  spec["grace"] = docs::format_duration(pc.grace_s);
  spec["description"] = pc.description;
  // The model keeps no updated_at for priority classes.
  return docs::make_document("PriorityClass", docs::object_meta(pc.name, pc.created_at, std::nullopt),
                             std::move(spec));
}

}  // namespace cp
