// The keyset cursor of list_tasks, shared by every backend. A page ends at
// some task; the next page starts strictly after it in the order
// (created_at, id) descending. Because the cursor names a position rather
// than an offset, tasks submitted while a client pages through do not shift
// the later pages: they sort before the cursor and never show up twice.
//
// Clients get it as an opaque string (unpadded base64url of "<ms>:<id>") so
// that nobody builds one by hand and the format can change later.
#pragma once

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/result.h"

namespace cp {

struct TaskCursor {
  Millis created_at = 0;
  std::string id;
};

std::string encode_task_cursor(const TaskCursor& cursor);
// 400 "invalid_cursor" for anything encode_task_cursor could not have made.
Result<TaskCursor> decode_task_cursor(std::string_view text);

}  // namespace cp
