// Errors of the store layer, shared by every backend. A database problem is
// "store_error": 503 when the database is unavailable for now (busy, locked,
// disk full, cannot open: retrying later may work), 500 when retrying cannot
// help (a constraint the caller should have checked, a corrupt row, a bug).
#pragma once

#include <string>
#include <string_view>

#include "common/error.h"

namespace cp {

Error store_error(int status, std::string message);
// A row whose JSON document does not decode: the database was edited by hand
// or written by an incompatible version.
Error corrupt_row(std::string_view table, const Error& cause);
// 400 "invalid_cursor": a page cursor that this store did not hand out.
Error invalid_cursor();

}  // namespace cp
