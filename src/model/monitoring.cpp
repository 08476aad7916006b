#include "model/monitoring.h"

namespace cp {

void redact_secrets(json::value& v) {
  if (v.is_object()) {
    for (auto& kv : v.as_object()) {
      const std::string_view k = kv.key();
      if (k == "token" || k == "credential" || k == "secret" || k == "password" || k == "hash") {
        kv.value() = "[redacted]";
      } else {
        redact_secrets(kv.value());
      }
    }
  } else if (v.is_array()) {
    for (auto& e : v.as_array()) redact_secrets(e);
  }
}

}  // namespace cp
