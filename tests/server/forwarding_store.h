// A Store that passes every call to another: tests derive from it and
// override the one call they need to bend (a write held, run twice, raced).
// write_shared is left to Store's default, which calls write(), so that an
// overridden write() sees submits too.
#pragma once

#include "store/store.h"

namespace cp::testing {

class ForwardingStore : public Store {
 public:
  explicit ForwardingStore(Store& inner) : inner_(inner) {}
  Status migrate() override { return inner_.migrate(); }
  Status write(const std::function<Status(Tx&)>& body) override { return inner_.write(body); }
  Status read(const std::function<Status(Tx&)>& body) override { return inner_.read(body); }
  int schema_version() override { return inner_.schema_version(); }
  std::string backend() const override { return inner_.backend(); }
  ChangeJournal* changes() override { return inner_.changes(); }

 protected:
  Store& inner_;
};

}  // namespace cp::testing
