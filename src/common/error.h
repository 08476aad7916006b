// Expected failures as values: an Error carries a stable machine code, the
// HTTP status it maps to, an English and a Chinese message, and details.
#pragma once

#include <boost/json/object.hpp>
#include <string>

namespace cp {

struct Error {
  std::string code;        // stable, snake_case: "quota_exceeded", "invalid_field"
  int status = 400;        // HTTP status the API answers with
  std::string message;     // English
  std::string message_zh;  // Simplified Chinese
  boost::json::object details;

  // The message in the language asked for ("zh", "zh-CN", ... pick Chinese).
  const std::string& message_for(std::string_view accept_language) const;
  std::string to_string() const { return code + ": " + message; }
};

// Whether the first language of an Accept-Language header is Chinese.
bool prefers_chinese(std::string_view accept_language);

// Constructors for the common cases; each takes both languages so that no
// message reaches a user in one language only.
namespace errors {
Error invalid(std::string field_path, std::string en, std::string zh);
Error not_found(std::string kind, std::string name);
Error already_exists(std::string kind, std::string name);
Error conflict(std::string en, std::string zh);
Error unauthenticated(std::string en, std::string zh);
Error forbidden(std::string en, std::string zh);
Error unavailable(std::string en, std::string zh);
Error internal(std::string en);
Error too_large(std::string en, std::string zh);
}  // namespace errors

}  // namespace cp
