#include "model/beacon_mark.h"

#include "common/json.h"

namespace cp {

std::string encode_beacon(const BeaconMark& b, const std::string& server) {
  json::object o;
  o["term"] = b.term;
  o["seq"] = b.seq;
  o["server"] = server;
  return dump(o);
}

std::optional<BeaconMark> parse_beacon(std::string_view body) {
  auto v = parse_json(body, 4);
  if (!v.ok() || !v->is_object()) return std::nullopt;
  const auto& o = v->as_object();
  BeaconMark b;
  if (auto* t = o.if_contains("term"); t && t->is_int64()) b.term = t->as_int64();
  if (auto* s = o.if_contains("seq"); s && s->is_int64()) b.seq = s->as_int64();
  if (b.term <= 0 || b.seq <= 0) return std::nullopt;
  return b;
}

}  // namespace cp
