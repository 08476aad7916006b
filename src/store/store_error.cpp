#include "store/store_error.h"

namespace cp {

Error store_error(int status, std::string message) {
  std::string zh = "数据库错误：" + message;
  return Error{"store_error", status, std::move(message), std::move(zh), {}};
}

Error corrupt_row(std::string_view table, const Error& cause) {
  Error e = store_error(500, "corrupt row in table " + std::string(table) + ": " + cause.message);
  e.details["table"] = table;
  return e;
}

Error invalid_cursor() {
  return Error{"invalid_cursor", 400, "invalid cursor: pass back next_cursor exactly as it was returned",
               "无效的分页游标：请原样传回 next_cursor", {}};
}

}  // namespace cp
