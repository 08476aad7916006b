// Identifiers and secrets. Ids sort by creation time (ULID-like, Crockford
// base32, lower case) so that listing by id is listing by age.
#pragma once

#include <string>

#include "common/clock.h"

namespace cp {

// "<prefix>-" + 10 chars of time + 10 chars of randomness, e.g. "t-01hx3k...".
std::string new_id(std::string_view prefix, Millis now);

// A secret token: prefix + 40 hex chars of cryptographic randomness.
std::string new_secret(std::string_view prefix);

// Hex SHA-256; tokens are stored only as their hash.
std::string sha256_hex(std::string_view data);

// Constant-time comparison for secrets.
bool secure_equals(std::string_view a, std::string_view b);

}  // namespace cp
