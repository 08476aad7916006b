// The conformance suite: what any ObjectStore does. Instantiated per
// backend elsewhere (local_object_store_test.cpp, s3_object_store_test.cpp).
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <thread>

#include "object_store_conformance.h"
#include "objstore/retention.h"

namespace cp::testing_objstore {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST_P(ObjectStoreConformance, PutThenGet) {
  // What put stores, get returns byte for byte, including NULs and non-UTF-8.
  std::string data("line 1\n\0\xff binary", 17);
  put("logs/t1/a1/r0/0000000000000000", data);
  EXPECT_EQ(get("logs/t1/a1/r0/0000000000000000"), data);
}

TEST_P(ObjectStoreConformance, PutReportsSize) {
  // put returns the key and size of what it stored.
  auto r = store().put("a/b", "12345");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_EQ(r->key, "a/b");
  EXPECT_EQ(r->size, 5);
}

TEST_P(ObjectStoreConformance, EmptyObject) {
  // An empty object exists and reads back empty, unlike a missing one.
  put("empty", "");
  EXPECT_EQ(get("empty"), std::string());
}

TEST_P(ObjectStoreConformance, GetMissingIsNullopt) {
  // get of a key never written is nullopt, not an error.
  auto r = store().get("never/written");
  ASSERT_TRUE(r.ok()) << r.error().message;
  EXPECT_FALSE(r->has_value());
}

TEST_P(ObjectStoreConformance, GetOfAPrefixIsNullopt) {
  // A prefix of other keys is not itself an object.
  put("dir/file", "x");
  EXPECT_EQ(get("dir"), std::nullopt);
}

TEST_P(ObjectStoreConformance, OverwriteReplaces) {
  // A second put to the same key replaces the object entirely.
  put("k", "a long first version");
  put("k", "short");
  EXPECT_EQ(get("k"), "short");
  EXPECT_THAT(keys(""), ElementsAre("k"));
}

TEST_P(ObjectStoreConformance, ListIsSortedByKeyBytes) {
  // list returns keys in byte order across "directories": "a-c" before "a/b".
  for (const char* k : {"a/b", "a-c", "b", "a/a/z", "a0"}) put(k, k);
  EXPECT_THAT(keys(""), ElementsAre("a-c", "a/a/z", "a/b", "a0", "b"));
}

TEST_P(ObjectStoreConformance, ListReportsSizes) {
  // list reports each object's size.
  put("x/1", "abc");
  auto r = store().list("x/");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].size, 3);
}

TEST_P(ObjectStoreConformance, ListByDirectoryPrefix) {
  // A prefix ending in "/" lists everything below it, at any depth, and nothing beside it.
  for (const char* k : {"logs/t1/a1/r0/0", "logs/t1/a1/r1/0", "logs/t1/a2/r0/0", "logs/t10/a1/r0/0", "other"}) {
    put(k, "x");
  }
  EXPECT_THAT(keys("logs/t1/"), ElementsAre("logs/t1/a1/r0/0", "logs/t1/a1/r1/0", "logs/t1/a2/r0/0"));
  EXPECT_THAT(keys("logs/t1/a1/"), ElementsAre("logs/t1/a1/r0/0", "logs/t1/a1/r1/0"));
}

TEST_P(ObjectStoreConformance, ListByPrefixEndingMidName) {
  // A prefix may end in the middle of a name: "logs/t1" matches t1 and t10.
  for (const char* k : {"logs/t1/a", "logs/t10/a", "logs/t2/a", "logs/t1x"}) put(k, "x");
  EXPECT_THAT(keys("logs/t1"), ElementsAre("logs/t1/a", "logs/t10/a", "logs/t1x"));
}

TEST_P(ObjectStoreConformance, ListOfNothing) {
  // A prefix that matches nothing lists nothing, without error.
  put("a/b", "x");
  EXPECT_THAT(keys("zzz/"), IsEmpty());
  EXPECT_THAT(keys("a/b/c/"), IsEmpty());
}

TEST_P(ObjectStoreConformance, ListStartAfter) {
  // start_after skips every key up to and including it, even one that does not exist.
  for (const char* k : {"p/1", "p/2", "p/3", "p/4"}) put(k, "x");
  EXPECT_THAT(keys("p/", "p/2"), ElementsAre("p/3", "p/4"));
  EXPECT_THAT(keys("p/", "p/25"), ElementsAre("p/3", "p/4"));
  EXPECT_THAT(keys("p/", "p/4"), IsEmpty());
  EXPECT_THAT(keys("p/", "a"), ElementsAre("p/1", "p/2", "p/3", "p/4"));
}

TEST_P(ObjectStoreConformance, ListStartAfterInsideADeeperTree) {
  // start_after works across nested keys, resuming inside and after subtrees.
  for (const char* k : {"d/a/1", "d/a/2", "d/b/1", "d/c"}) put(k, "x");
  EXPECT_THAT(keys("d/", "d/a/1"), ElementsAre("d/a/2", "d/b/1", "d/c"));
  EXPECT_THAT(keys("d/", "d/a"), ElementsAre("d/a/1", "d/a/2", "d/b/1", "d/c"));
  EXPECT_THAT(keys("d/", "d/a/9"), ElementsAre("d/b/1", "d/c"));
}

TEST_P(ObjectStoreConformance, ListLimitAndPaging) {
  // limit caps the answer; paging with start_after = last key visits every key once, in order.
  std::vector<std::string> all;
  for (int i = 0; i < 25; ++i) {
    char key[32];
    std::snprintf(key, sizeof key, "page/%c/%02d", 'a' + i % 3, i);
    put(key, "x");
  }
  EXPECT_EQ(keys("page/", "", 10).size(), 10u);
  std::vector<std::string> paged;
  std::string after;
  while (true) {
    auto page = keys("page/", after, 7);
    if (page.empty()) break;
    EXPECT_LE(page.size(), 7u);
    paged.insert(paged.end(), page.begin(), page.end());
    after = page.back();
  }
  EXPECT_EQ(paged, keys("page/"));
  EXPECT_EQ(paged.size(), 25u);
  EXPECT_TRUE(std::is_sorted(paged.begin(), paged.end()));
}

TEST_P(ObjectStoreConformance, ListLimitZeroIsEmpty) {
  // limit 0 asks for nothing and gets nothing.
  put("z", "x");
  EXPECT_THAT(keys("", "", 0), IsEmpty());
}

TEST_P(ObjectStoreConformance, RemoveDeletes) {
  // After remove, get is nullopt and list no longer shows the key.
  put("r/1", "x");
  put("r/2", "x");
  ASSERT_TRUE(store().remove("r/1").ok());
  EXPECT_EQ(get("r/1"), std::nullopt);
  EXPECT_THAT(keys("r/"), ElementsAre("r/2"));
}

TEST_P(ObjectStoreConformance, RemoveMissingIsFine) {
  // Removing a key that does not exist succeeds.
  EXPECT_TRUE(store().remove("not/there").ok());
}

TEST_P(ObjectStoreConformance, RemoveLastKeyThenPutBeside) {
  // Removing the last key under a prefix leaves the store usable there.
  put("deep/er/still/k", "x");
  ASSERT_TRUE(store().remove("deep/er/still/k").ok());
  EXPECT_THAT(keys("deep/"), IsEmpty());
  put("deep/er/other", "y");
  EXPECT_EQ(get("deep/er/other"), "y");
}

TEST_P(ObjectStoreConformance, InvalidKeysAreRefused) {
  // Empty, absolute, "..", ".", "//", trailing "/" and control characters are refused by every call.
  for (std::string key : {std::string(""), std::string("/abs"), std::string("../x"), std::string("a/../../x"),
                          std::string("a/./b"), std::string("a//b"), std::string("a/"), std::string("..", 2),
                          std::string("nul\0x", 5), std::string("tab\tx"), std::string("nl\nx"),
                          std::string(1025, 'k')}) {
    auto p = store().put(key, "x");
    ASSERT_FALSE(p.ok()) << "put accepted " << key;
    EXPECT_EQ(p.error().code, "invalid_object_key");
    EXPECT_EQ(p.error().status, 400);
    EXPECT_FALSE(p.error().message_zh.empty());
    EXPECT_FALSE(store().get(key).ok()) << key;
    EXPECT_FALSE(store().remove(key).ok()) << key;
  }
}

TEST_P(ObjectStoreConformance, InvalidPrefixIsRefused) {
  // list refuses a prefix under which no key could be valid.
  EXPECT_FALSE(store().list("../").ok());
  EXPECT_FALSE(store().list("/abs").ok());
  EXPECT_FALSE(store().list("a//").ok());
}

TEST_P(ObjectStoreConformance, OddButValidKeys) {
  // Spaces, dots inside names, UTF-8 and dot-files are ordinary keys.
  for (const char* k : {"with space/x", "a..b", ".hidden", "训练/日志", "x/.y"}) {
    put(k, k);
    EXPECT_EQ(get(k), k);
  }
}

TEST_P(ObjectStoreConformance, OverwriteIsAtomicForReaders) {
  // While a key is overwritten again and again, every read sees one whole version, never a mix.
  const std::string a(256 * 1024, 'a');
  const std::string b(128 * 1024, 'b');
  put("atomic", a);
  std::atomic<bool> stop{false};
  std::thread writer([&] {
    for (int i = 0; i < 60; ++i) {
      auto r = store().put("atomic", i % 2 == 0 ? b : a);
      EXPECT_TRUE(r.ok());
    }
    stop = true;
  });
  int reads = 0;
  while (!stop || reads == 0) {
    auto r = store().get("atomic");
    ASSERT_TRUE(r.ok());
    ASSERT_TRUE(r->has_value());
    const std::string& got = **r;
    ASSERT_TRUE(got == a || got == b) << "torn read of " << got.size() << " bytes";
    ++reads;
  }
  writer.join();
}

TEST_P(ObjectStoreConformance, ConcurrentWritersDoNotCollide) {
  // Many threads putting, listing and removing under one prefix all succeed and leave exactly their keys.
  constexpr int kThreads = 8;
  constexpr int kKeys = 40;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kKeys; ++i) {
        std::string dir = "c/" + std::to_string(i % 5) + "/";
        std::string key = dir + "t" + std::to_string(t) + "-" + std::to_string(i);
        EXPECT_TRUE(store().put(key, key).ok()) << key;
        // Churn: an extra key made and removed, so directories come and go.
        std::string tmp = dir + "tmp/t" + std::to_string(t);
        EXPECT_TRUE(store().put(tmp, "x").ok());
        EXPECT_TRUE(store().remove(tmp).ok());
        EXPECT_TRUE(store().list(dir).ok());
      }
    });
  }
  for (auto& th : threads) th.join();
  auto all = keys("c/");
  EXPECT_EQ(all.size(), static_cast<std::size_t>(kThreads * kKeys));
  for (const auto& k : all) EXPECT_EQ(get(k), k);
}

// ----------------------------------------------------------- retention

TEST_P(ObjectStoreConformance, RemoveOlderThanRemovesOldObjectsUnderThePrefixOnly) {
  // remove_older_than removes the objects under the prefix older than the cutoff, a batch at a time, and nothing else.
  for (const char* k : {"tmp/a", "tmp/b/c", "tmp/d", "keep/e", "tmpx"}) put(k, "x");
  auto all = store().list("");
  ASSERT_TRUE(all.ok());
  std::int64_t newest = 0;
  for (const auto& info : *all) newest = std::max(newest, info.modified_ms);
  ASSERT_GT(newest, 0) << "list reports modification times";
  auto removed = remove_older_than(store(), "tmp/", newest + 1, 1);
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  EXPECT_EQ(*removed, 3);
  EXPECT_THAT(keys(""), ElementsAre("keep/e", "tmpx"));
}

TEST_P(ObjectStoreConformance, RemoveOlderThanKeepsObjectsAtTheCutoff) {
  // "Older than" is strict: an object modified at the cutoff or later stays.
  put("tmp/a", "x");
  put("tmp/b", "x");
  auto listed = store().list("tmp/");
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 2u);
  std::int64_t oldest = std::min((*listed)[0].modified_ms, (*listed)[1].modified_ms);
  auto removed = remove_older_than(store(), "tmp/", oldest, 1);
  ASSERT_TRUE(removed.ok()) << removed.error().message;
  EXPECT_EQ(*removed, 0);
  EXPECT_THAT(keys("tmp/"), ElementsAre("tmp/a", "tmp/b"));
}

TEST_P(ObjectStoreConformance, RemoveOlderThanNeedsAPositiveBatch) {
  // A batch below 1 is a caller error, and nothing is removed.
  put("tmp/a", "x");
  auto r = remove_older_than(store(), "tmp/", std::int64_t{1} << 62, 0);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, "invalid_field");
  EXPECT_THAT(keys("tmp/"), ElementsAre("tmp/a"));
}

}  // namespace
}  // namespace cp::testing_objstore
