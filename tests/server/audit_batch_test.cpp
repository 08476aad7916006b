// AuditBatch: rows queued while a batch is written go out together in the
// next one, each caller returns once its row committed, and a row that
// fails keeps no other out.
#include "server/audit_batch.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <future>
#include <thread>

#include "forwarding_store.h"
#include "store/store.h"

namespace cp {
namespace {

// Counts write transactions; the first one waits until released.
class HeldFirstWrite final : public testing::ForwardingStore {
 public:
  explicit HeldFirstWrite(Store& inner) : ForwardingStore(inner), released_(release_.get_future().share()) {}
  Status write(const std::function<Status(Tx&)>& body) override {
    if (writes_++ == 0) released_.wait();
    return inner_.write(body);
  }

  void release() { release_.set_value(); }
  int writes() const { return writes_.load(); }

 private:
  std::atomic<int> writes_{0};
  std::promise<void> release_;
  std::shared_future<void> released_;
};

AuditEntry entry(const std::string& id) {
  AuditEntry e;
  e.id = id;
  e.at = 1'767'225'600'000;
  e.user = "alice";
  e.method = "POST";
  e.path = "/api/v1/pipelines";
  e.status = 201;
  return e;
}

class AuditBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    inner_ = std::move(open_store("sqlite::memory:")).value();
    ASSERT_TRUE(inner_->migrate().ok());
  }
  std::vector<std::string> stored_ids() {
    AuditPage page;
    AuditQuery q;
    q.limit = 1000;
    EXPECT_TRUE(inner_->read([&](Tx& tx) -> Status {
                        CP_ASSIGN(page, tx.list_audit(q));
                        return {};
                      })
                    .ok());
    std::vector<std::string> ids;
    for (const auto& e : page.items) ids.push_back(e.id);
    std::sort(ids.begin(), ids.end());
    return ids;
  }
  // Polls until `done` holds, or fails after 10 s.
  static void wait_until(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    ASSERT_TRUE(done());
  }

  std::unique_ptr<Store> inner_;
};

TEST_F(AuditBatchTest, RowsQueuedBehindABatchGoOutTogetherInTheNext) {
  HeldFirstWrite store(*inner_);
  AuditBatch batch(store);
  auto first = std::async(std::launch::async, [&] { return batch.append(entry("audit-0")); });
  wait_until([&] { return store.writes() == 1; });
  // The first row's transaction is held: these queue behind it.
  std::vector<std::future<Status>> rest;
  for (int i = 1; i <= 4; ++i) {
    rest.push_back(std::async(std::launch::async, [&, i] { return batch.append(entry("audit-" + std::to_string(i))); }));
    wait_until([&] { return batch.queued() == static_cast<std::size_t>(i); });
  }
  EXPECT_EQ(stored_ids(), std::vector<std::string>{});  // nobody has returned, nothing is stored
  store.release();
  EXPECT_TRUE(first.get().ok());
  for (auto& r : rest) EXPECT_TRUE(r.get().ok());
  EXPECT_EQ(store.writes(), 2);
  EXPECT_EQ(batch.stats().batches, 2);
  EXPECT_EQ(batch.stats().rows, 5);
  EXPECT_EQ(stored_ids(), (std::vector<std::string>{"audit-0", "audit-1", "audit-2", "audit-3", "audit-4"}));
}

TEST_F(AuditBatchTest, ARowThatFailsKeepsNoOtherOut) {
  ASSERT_TRUE(inner_->write([](Tx& tx) { return tx.append_audit(entry("audit-dup")); }).ok());
  HeldFirstWrite store(*inner_);
  AuditBatch batch(store);
  auto first = std::async(std::launch::async, [&] { return batch.append(entry("audit-0")); });
  wait_until([&] { return store.writes() == 1; });  // the first is being written (held)
  auto dup = std::async(std::launch::async, [&] { return batch.append(entry("audit-dup")); });
  wait_until([&] { return batch.queued() == 1; });
  auto good = std::async(std::launch::async, [&] { return batch.append(entry("audit-1")); });
  wait_until([&] { return batch.queued() == 2; });
  store.release();
  EXPECT_TRUE(first.get().ok());
  Status d = dup.get();
  EXPECT_FALSE(d.ok());
  EXPECT_TRUE(good.get().ok());
  // The batch of two failed, then each row was written on its own.
  EXPECT_EQ(store.writes(), 4);
  EXPECT_EQ(stored_ids(), (std::vector<std::string>{"audit-0", "audit-1", "audit-dup"}));
}

}  // namespace
}  // namespace cp
