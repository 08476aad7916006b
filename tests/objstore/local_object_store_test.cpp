// LocalObjectStore: the conformance suite, plus what only a directory on
// disk has (files, temporary files, the root it must not leave), the key
// helpers and open_object_store.
#include "objstore/local_object_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "object_store_conformance.h"

namespace cp {
namespace {

namespace fs = std::filesystem;
using ::testing::ElementsAre;

// A fresh directory per test, removed afterwards.
class TempDir {
 public:
  TempDir() {
    std::string pattern = (fs::path(::testing::TempDir()) / "cp-objstore-XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    if (made == nullptr) std::abort();
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

// Owns the directory of the store it wraps, so that the suite's factory can
// hand out a store that cleans up after itself.
class SelfCleaningStore : public ObjectStore {
 public:
  SelfCleaningStore() {
    auto s = LocalObjectStore::open(dir_.path() / "root");
    if (!s.ok()) std::abort();
    inner_ = std::move(s).value();
  }
  Result<ObjectInfo> put(const std::string& k, std::string_view d) override { return inner_->put(k, d); }
  Result<std::optional<std::string>> get(const std::string& k) override { return inner_->get(k); }
  Result<std::vector<ObjectInfo>> list(const std::string& p, const std::string& a, int l) override {
    return inner_->list(p, a, l);
  }
  Status remove(const std::string& k) override { return inner_->remove(k); }
  std::string url() const override { return inner_->url(); }
  Result<std::string> read_url(const std::string& k, std::int64_t ttl_s) override {
    return inner_->read_url(k, ttl_s);
  }

 private:
  TempDir dir_;
  std::unique_ptr<LocalObjectStore> inner_;  // destroyed before dir_
};

}  // namespace

namespace testing_objstore {
INSTANTIATE_TEST_SUITE_P(Local, ObjectStoreConformance,
                         ::testing::Values(StoreFactory{"local", [] { return std::make_unique<SelfCleaningStore>(); }}),
                         [](const ::testing::TestParamInfo<StoreFactory>& info) { return info.param.name; });
}  // namespace testing_objstore

namespace {

class LocalObjectStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = dir_.path() / "objects";
    auto s = LocalObjectStore::open(root_);
    ASSERT_TRUE(s.ok()) << s.error().message;
    store_ = std::move(s).value();
  }

  TempDir dir_;
  fs::path root_;
  std::unique_ptr<LocalObjectStore> store_;
};

TEST_F(LocalObjectStoreTest, KeysAreFilesUnderTheRoot) {
  // Key "a/b/c" is the file <root>/a/b/c holding the object's bytes.
  ASSERT_TRUE(store_->put("a/b/c", "hello").ok());
  std::ifstream in(root_ / "a/b/c");
  std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "hello");
}

TEST_F(LocalObjectStoreTest, NoTemporaryFilesLeftBehind) {
  // After puts and overwrites the directory holds only the objects.
  ASSERT_TRUE(store_->put("d/x", "1").ok());
  ASSERT_TRUE(store_->put("d/x", "2").ok());
  ASSERT_TRUE(store_->put("d/y", "3").ok());
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root_ / "d")) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_THAT(names, ElementsAre("x", "y"));
}

TEST_F(LocalObjectStoreTest, LeftoverTemporaryFilesAreNotListed) {
  // A temporary file left by a crash mid-put is not an object.
  ASSERT_TRUE(store_->put("d/x", "1").ok());
  std::ofstream(root_ / "d/.cp-tmp-y.123.0") << "partial";
  auto r = store_->list("d/");
  ASSERT_TRUE(r.ok());
  ASSERT_EQ(r->size(), 1u);
  EXPECT_EQ((*r)[0].key, "d/x");
}

TEST_F(LocalObjectStoreTest, ReservedTemporaryNamesAreRefusedAsKeys) {
  // Keys may not use the temporary-file prefix.
  EXPECT_EQ(store_->put("d/.cp-tmp-x", "1").error().code, "invalid_object_key");
  EXPECT_EQ(store_->put(".cp-tmp-x", "1").error().code, "invalid_object_key");
}

TEST_F(LocalObjectStoreTest, RemovePrunesEmptyDirectories) {
  // Removing the last object of a directory removes the now empty directories, not the root.
  ASSERT_TRUE(store_->put("logs/t1/a1/r0/0", "x").ok());
  ASSERT_TRUE(store_->put("logs/t2/a1/r0/0", "x").ok());
  ASSERT_TRUE(store_->remove("logs/t1/a1/r0/0").ok());
  EXPECT_FALSE(fs::exists(root_ / "logs/t1"));
  EXPECT_TRUE(fs::exists(root_ / "logs/t2/a1/r0/0"));
  ASSERT_TRUE(store_->remove("logs/t2/a1/r0/0").ok());
  EXPECT_FALSE(fs::exists(root_ / "logs"));
  EXPECT_TRUE(fs::is_directory(root_));
}

TEST_F(LocalObjectStoreTest, KeyAndPrefixOfOtherKeysConflict) {
  // "a" cannot be an object while "a/b" is one, and the reverse; both refusals are 409.
  ASSERT_TRUE(store_->put("a/b", "x").ok());
  auto over_dir = store_->put("a", "y");
  ASSERT_FALSE(over_dir.ok());
  EXPECT_EQ(over_dir.error().code, "object_key_conflict");
  EXPECT_EQ(over_dir.error().status, 409);
  ASSERT_TRUE(store_->put("f", "x").ok());
  auto under_file = store_->put("f/g", "y");
  ASSERT_FALSE(under_file.ok());
  EXPECT_EQ(under_file.error().code, "object_key_conflict");
  // Neither refusal disturbed what was there.
  EXPECT_EQ(*store_->get("a/b"), "x");
  EXPECT_EQ(*store_->get("f"), "x");
}

TEST_F(LocalObjectStoreTest, NothingEscapesTheRoot) {
  // Keys that try to climb out of the root are refused and write nothing outside it.
  for (const char* key : {"../outside", "a/../../outside", "/tmp/outside"}) {
    EXPECT_FALSE(store_->put(key, "x").ok()) << key;
  }
  EXPECT_FALSE(fs::exists(dir_.path() / "outside"));
  EXPECT_FALSE(fs::exists("/tmp/outside"));
}

TEST_F(LocalObjectStoreTest, SymlinksAreNotListed) {
  // A symbolic link placed in the root is not followed by list.
  fs::create_directories(dir_.path() / "elsewhere");
  std::ofstream(dir_.path() / "elsewhere/secret") << "s";
  fs::create_directory_symlink(dir_.path() / "elsewhere", root_ / "link");
  auto r = store_->list("");
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->empty());
}

TEST_F(LocalObjectStoreTest, UrlNamesTheRoot) {
  // url() is file:// plus the absolute root.
  EXPECT_EQ(store_->url(), "file://" + root_.string());
}

TEST_F(LocalObjectStoreTest, ModifiedTimeIsSet) {
  // put and list report a modification time in ms since the epoch.
  auto p = store_->put("t", "x");
  ASSERT_TRUE(p.ok());
  EXPECT_GT(p->modified_ms, 1'600'000'000'000);
  auto l = store_->list("t");
  ASSERT_TRUE(l.ok());
  ASSERT_EQ(l->size(), 1u);
  EXPECT_EQ((*l)[0].modified_ms, p->modified_ms);
}

TEST_F(LocalObjectStoreTest, NegativeLimitIsRefused) {
  // A negative limit is a caller error.
  EXPECT_FALSE(store_->list("", "", -1).ok());
}

// --------------------------------------------------------- open_object_store

TEST(OpenObjectStore, FileUrlOpensALocalStore) {
  // file:///abs/dir opens (and creates) a local store there.
  TempDir dir;
  fs::path root = dir.path() / "new" / "objects";
  auto s = open_object_store("file://" + root.string());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_TRUE(fs::is_directory(root));
  ASSERT_TRUE((*s)->put("k", "v").ok());
  EXPECT_EQ(*(*s)->get("k").value(), "v");
  EXPECT_EQ((*s)->url(), "file://" + root.string());
}

TEST(OpenObjectStore, TrailingSlashIsTheSameDirectory) {
  // file:///dir/ and file:///dir name the same store.
  TempDir dir;
  auto s = open_object_store("file://" + dir.path().string() + "/");
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ((*s)->url(), "file://" + dir.path().string());
}

TEST(OpenObjectStore, RelativeFileUrlIsRefused) {
  // file://relative/dir (a host, not a path) is refused.
  auto s = open_object_store("file://relative/dir");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().code, "unsupported_objects_url");
  EXPECT_EQ(s.error().status, 400);
}

TEST(OpenObjectStore, OtherSchemesAreRefused) {
  // Any other URL is unsupported_objects_url, 400.
  for (const char* url : {"http://x/y", "/plain/path", "", "gs://bucket"}) {
    auto s = open_object_store(url);
    ASSERT_FALSE(s.ok()) << url;
    EXPECT_EQ(s.error().code, "unsupported_objects_url") << url;
    EXPECT_EQ(s.error().status, 400);
  }
}

TEST(OpenObjectStore, RootThatIsAFileIsRefused) {
  // A root path that is a regular file cannot be a store.
  TempDir dir;
  std::ofstream(dir.path() / "file") << "x";
  EXPECT_FALSE(open_object_store("file://" + (dir.path() / "file").string()).ok());
}

// ----------------------------------------------------------------- key rules

TEST(ObjectKeys, LogChunkKeyLayout) {
  // Log chunks live at logs/<task>/<attempt>/r<replica>/<offset padded to 16 digits>.
  EXPECT_EQ(log_chunk_key("t-1", "t-1.2", 3, 4096), "logs/t-1/t-1.2/r3/0000000000004096");
  EXPECT_EQ(log_prefix("t-1", "t-1.2"), "logs/t-1/t-1.2/");
  EXPECT_TRUE(log_chunk_key("t-1", "t-1.2", 0, 0).starts_with(log_prefix("t-1", "t-1.2")));
  EXPECT_TRUE(validate_object_key(log_chunk_key("t", "a", 0, 123)).ok());
}

TEST(ObjectKeys, LogChunkKeysSortByOffset) {
  // Zero padding makes byte order of chunk keys their offset order.
  EXPECT_LT(log_chunk_key("t", "a", 0, 999), log_chunk_key("t", "a", 0, 1000));
  EXPECT_LT(log_chunk_key("t", "a", 0, 9), log_chunk_key("t", "a", 0, 10'000'000'000));
}

TEST(ObjectKeys, Validation) {
  // validate_object_key accepts relative slash paths and refuses everything that could escape or confuse.
  EXPECT_TRUE(validate_object_key("a").ok());
  EXPECT_TRUE(validate_object_key("logs/t/a/r0/0000000000000000").ok());
  EXPECT_TRUE(validate_object_key("a..b/.c").ok());
  for (std::string bad : {std::string(""), std::string("/a"), std::string("a//b"), std::string("a/"),
                          std::string(".."), std::string("a/.."), std::string("./a"), std::string("a\x7f"),
                          std::string("a\0b", 3)}) {
    Status s = validate_object_key(bad);
    ASSERT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.error().code, "invalid_object_key");
  }
}

}  // namespace
}  // namespace cp
