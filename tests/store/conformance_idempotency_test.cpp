// Conformance: idempotency keys of submits (one row per user and key, the
// answer kept as text, removed by age).
#include "store_conformance.h"

namespace cp::testing {
namespace {

IdempotencyRecord key_row(const std::string& user, const std::string& key, Millis at,
                          const std::string& response = R"({"pipeline":{"id":"p-1"}})") {
  return IdempotencyRecord{user, key, "hash-of-" + key, 201, response, at};
}

TEST_P(StoreTest, IdempotencyKeysAreEachUsersOwnAndATakenOneIsAlreadyExists) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_idempotency(key_row("alice", "k-1", kT0)));
    return tx.insert_idempotency(key_row("bob", "k-1", kT0 + 1, R"({"pipeline":{"id":"p-2"}})"));
  });
  auto alice = read([](Tx& tx) { return tx.get_idempotency("alice", "k-1"); });
  ASSERT_TRUE(alice.has_value());
  EXPECT_EQ(alice->user, "alice");
  EXPECT_EQ(alice->key, "k-1");
  EXPECT_EQ(alice->request_hash, "hash-of-k-1");
  EXPECT_EQ(alice->status, 201);
  EXPECT_EQ(alice->response, R"({"pipeline":{"id":"p-1"}})");
  EXPECT_EQ(alice->created_at, kT0);
  EXPECT_EQ(read([](Tx& tx) { return tx.get_idempotency("bob", "k-1"); })->response, R"({"pipeline":{"id":"p-2"}})");
  EXPECT_FALSE(read([](Tx& tx) { return tx.get_idempotency("carol", "k-1"); }).has_value());
  EXPECT_FALSE(read([](Tx& tx) { return tx.get_idempotency("alice", "k-2"); }).has_value());

  // The key taken: 409, and the first answer stays.
  Error e = write_error([](Tx& tx) { return tx.insert_idempotency(key_row("alice", "k-1", kT0 + 5, "{}")); });
  EXPECT_EQ(e.code, "already_exists");
  EXPECT_EQ(e.status, 409);
  EXPECT_EQ(read([](Tx& tx) { return tx.get_idempotency("alice", "k-1"); })->response, R"({"pipeline":{"id":"p-1"}})");
}

TEST_P(StoreTest, AHeldIdempotencyKeyThatIsTakenFailsTheWholeSubmit) {
  // A submit holds its writes (PostgreSQL sends them with COMMIT): a key
  // that another submit took in the meantime fails it, pipeline and all.
  write([](Tx& tx) { return tx.insert_idempotency(key_row("alice", "k-1", kT0)); });
  Error e = write_error([](Tx& tx) -> Status {
    tx.hold_writes();
    CP_TRY(tx.insert_pipeline(make_pipeline("p-2", "pg-a")));
    CP_TRY(tx.insert_task(make_task("t-2", kT0)));
    return tx.insert_idempotency(key_row("alice", "k-1", kT0 + 1, "{}"));
  });
  EXPECT_EQ(e.code, "already_exists");
  EXPECT_FALSE(read([](Tx& tx) { return tx.get_pipeline("p-2"); }).has_value());
  EXPECT_FALSE(read([](Tx& tx) { return tx.get_task("t-2"); }).has_value());
  EXPECT_EQ(read([](Tx& tx) { return tx.get_idempotency("alice", "k-1"); })->created_at, kT0);
}

TEST_P(StoreTest, AKeyWrittenEarlierInTheTransactionIsReadBack) {
  // A second submit under the key, later in the same transaction (a group
  // commit), must see the first one's row, held or not.
  write([](Tx& tx) -> Status {
    tx.hold_writes();
    CP_TRY(tx.insert_idempotency(key_row("alice", "k-1", kT0)));
    CP_ASSIGN(auto seen, tx.get_idempotency("alice", "k-1"));
    EXPECT_TRUE(seen.has_value());
    return {};
  });
}

TEST_P(StoreTest, IdempotencyKeysAreDeletedOldestFirstBeforeTheCutoff) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_idempotency(key_row("alice", "k-new", kT0 + 2)));
    CP_TRY(tx.insert_idempotency(key_row("alice", "k-old", kT0)));
    return tx.insert_idempotency(key_row("bob", "k-mid", kT0 + 1));
  });
  std::int64_t removed = 0;
  write([&](Tx& tx) -> Status {
    CP_ASSIGN(removed, tx.delete_idempotency_before(kT0 + 2, 1));
    return {};
  });
  EXPECT_EQ(removed, 1);
  EXPECT_FALSE(read([](Tx& tx) { return tx.get_idempotency("alice", "k-old"); }).has_value());
  EXPECT_TRUE(read([](Tx& tx) { return tx.get_idempotency("bob", "k-mid"); }).has_value());
  write([&](Tx& tx) -> Status {
    CP_ASSIGN(removed, tx.delete_idempotency_before(kT0 + 2, 100));
    return {};
  });
  EXPECT_EQ(removed, 1);
  EXPECT_FALSE(read([](Tx& tx) { return tx.get_idempotency("bob", "k-mid"); }).has_value());
  EXPECT_TRUE(read([](Tx& tx) { return tx.get_idempotency("alice", "k-new"); }).has_value());
}

}  // namespace
}  // namespace cp::testing
