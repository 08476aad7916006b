// A control plane reached at one address or several: `--server URL[,URL...]`
// for the agent and the CLI. The list is read once; its order is the order
// in which the addresses are tried.
//
//   " http://a:8080/ ,https://b"  ->  {"http://a:8080", "https://b"}
//   "http://a,,http://b" | "a:8080" | "http://" | "http://a,http://a/"  ->  an Error naming the entry
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace cp {

// Splits at ',', trims spaces and trailing '/' from each entry. Each must be
// an http:// or https:// URL naming a host; an empty entry, a malformed one
// or one listed twice is errors::invalid(field, ...) naming it, in English
// and Chinese. An empty list is "required".
Result<std::vector<std::string>> parse_server_urls(std::string_view list, const std::string& field);

// The entries trimmed as parse_server_urls trims them, joined by ",", with
// nothing checked: the same list written two ways compares equal.
std::string normalize_server_urls(std::string_view list);

}  // namespace cp
