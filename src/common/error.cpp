#include "common/error.h"

namespace cp {

bool prefers_chinese(std::string_view accept_language) {
  // Accept-Language: "zh-CN,zh;q=0.9,en;q=0.8" -> the first listed language wins.
  auto first = accept_language.substr(0, accept_language.find_first_of(",;"));
  while (!first.empty() && first.front() == ' ') first.remove_prefix(1);
  return first.size() >= 2 && (first[0] == 'z' || first[0] == 'Z') && (first[1] == 'h' || first[1] == 'H');
}

const std::string& Error::message_for(std::string_view accept_language) const {
  return prefers_chinese(accept_language) && !message_zh.empty() ? message_zh : message;
}

namespace errors {

Error invalid(std::string field_path, std::string en, std::string zh) {
  Error e{"invalid_field", 400, field_path.empty() ? en : field_path + ": " + en,
          field_path.empty() ? zh : field_path + "：" + zh, {}};
  if (!field_path.empty()) e.details["field"] = field_path;
  return e;
}

Error not_found(std::string kind, std::string name) {
  Error e{"not_found", 404, kind + " \"" + name + "\" not found", kind + " \"" + name + "\" 不存在", {}};
  e.details["kind"] = kind;
  e.details["name"] = name;
  return e;
}

Error already_exists(std::string kind, std::string name) {
  Error e{"already_exists", 409, kind + " \"" + name + "\" already exists", kind + " \"" + name + "\" 已存在", {}};
  e.details["kind"] = kind;
  e.details["name"] = name;
  return e;
}

Error conflict(std::string en, std::string zh) { return Error{"conflict", 409, std::move(en), std::move(zh), {}}; }

Error unauthenticated(std::string en, std::string zh) {
  return Error{"unauthenticated", 401, std::move(en), std::move(zh), {}};
}

Error forbidden(std::string en, std::string zh) { return Error{"forbidden", 403, std::move(en), std::move(zh), {}}; }

Error unavailable(std::string en, std::string zh) {
  return Error{"unavailable", 503, std::move(en), std::move(zh), {}};
}

Error internal(std::string en) { return Error{"internal", 500, en, "内部错误：" + en, {}}; }

Error too_large(std::string en, std::string zh) {
  return Error{"payload_too_large", 413, std::move(en), std::move(zh), {}};
}

}  // namespace errors
}  // namespace cp
