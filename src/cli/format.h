// Small pure helpers that turn server JSON into text for a terminal: ages,
// aligned tables, truncation, pretty JSON. No I/O, no clock reads (the caller
// passes `now`), so each is tested on its own (tests/cli/format_test.cpp).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/json.h"
#include "common/result.h"

namespace cp::cli {

// Compact age of a timestamp: "5s", "3m", "2h", "4d". 0 (never) -> "-";
// a time in the future (clock skew) reads "0s".
std::string format_age(Millis now, Millis then);

// RFC 3339 to the second ("2026-01-01T00:00:00Z"); 0 -> "-".
std::string format_time_short(Millis t);

// Columns a terminal spends on `s` (UTF-8): East Asian wide characters count
// two, everything else one. Malformed bytes count one each.
std::size_t display_width(std::string_view s);

// At most `max_width` columns of `s`; a cut string ends in "..." and never
// splits a UTF-8 sequence. Line breaks become spaces so a row stays one line.
std::string truncate(std::string_view s, std::size_t max_width);

// An aligned text table: upper-case headers, columns separated by three
// spaces, the last column not padded. Empty cells print as "".
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void add_row(std::vector<std::string> cells);
  std::size_t rows() const { return rows_.size(); }
  std::string render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// "KEY:  value" lines with the values aligned, for one object's details.
class Details {
 public:
  void add(std::string key, std::string value);
  std::string render() const;

 private:
  std::vector<std::pair<std::string, std::string>> lines_;
};

// JSON with two-space indentation and a final newline, for -o json.
std::string pretty_json(const json::value& v);

// Exit status of the CLI for an HTTP status: 0 for 2xx, 1 for anything else:
// a refusal (4xx/5xx), a redirect (not followed) or no answer (0).
int exit_code_for_http_status(long status);

// "90s", "15m", "12h", "7d", "1h30m" -> seconds; nullopt for anything else
// (and for 0).
std::optional<std::int64_t> parse_duration_arg(std::string_view text);

// ------------------------------------------------ reading loosely typed JSON
// The CLI prints whatever the server sends; a missing or oddly typed member
// prints as empty rather than failing the whole listing.

const json::value* member(const json::value& v, std::string_view key);
// Dotted path: "metadata.name", "status.used".
const json::value* member_path(const json::value& v, std::string_view path);
std::string str_at(const json::value& v, std::string_view path);
Millis millis_at(const json::value& v, std::string_view path);
// Scalars as text: strings as-is, numbers in decimal, bools "true"/"false",
// null/absent "".
std::string scalar_text(const json::value* v);

// {"a":"1","b":"2"} -> "a=1,b=2"; "" when empty.
std::string join_labels(const json::value* labels);
// ["a","b"] -> "a,b".
std::string join_strings(const json::value* list, std::string_view sep = ",");

// GPUs of a node from its capacity: {"gpu/nvidia-a100-80gb":"4"} ->
// "4x nvidia-a100-80gb"; several types joined with ", "; none -> "-".
std::string gpu_summary(const json::value* resources);

// A resource group's quota column: "gpu/a100 4/16, cpu 10/128" with used
// amounts from status.used when the document has a status, else guaranteed
// amounts alone ("gpu/a100 16"). A max (borrowing ceiling) shows as "(max 24)".
std::string quota_summary(const json::value& group_document);

// "zh..." languages read Chinese; everything else English.
bool is_chinese(std::string_view accept_language);

// Picks the message of a PendingReason-like object ({message, message_zh})
// in the language asked for, falling back to the other when one is empty.
std::string localized_message(const json::value& reason, std::string_view accept_language);

// gpu seconds -> hours with one decimal, rounded half up: 5400 -> "1.5".
std::string seconds_as_hours(std::int64_t seconds);

// ------------------------------------------------------ reading arguments

// "k=v" sets a label; with allow_removal "k-" and "k=" remove one (the REST
// API reads "" as removal). Errors are usage errors naming the argument.
Result<json::object> parse_label_args(const std::vector<std::string>& args, bool allow_removal);

// A user-given id or name as one URL path segment (percent-encoded).
std::string path_segment(std::string_view s);

// --from/--to: a date ("2026-01-31"), RFC 3339 time, or ms since the epoch.
bool is_valid_time_arg(std::string_view s);

}  // namespace cp::cli
