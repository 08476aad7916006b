// The control plane's beacon (DESIGN.md "Fencing and outages"): the object
// the leader writes every G and agents read while their syncs fail. The
// server writes it (server/beacon.h), the agent reads it (agent/agent.cpp):
// one format, one parser.
#pragma once

#include <compare>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace cp {

// The beacon object's key in the object store.
inline constexpr const char* kBeaconKey = "control-plane/beacon";

// Ordered by term, then seq: a later chain's marks are above every earlier one's.
struct BeaconMark {
  std::int64_t term = 0;
  std::int64_t seq = 0;
  auto operator<=>(const BeaconMark&) const = default;
};

// {"term", "seq", "server"}.
std::string encode_beacon(const BeaconMark& b, const std::string& server);
// nullopt for anything but {"term": >0, "seq": >0, ...}.
std::optional<BeaconMark> parse_beacon(std::string_view body);

}  // namespace cp
