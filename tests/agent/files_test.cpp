// The agent's small file helpers: appended records and their reading back.
#include "agent/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "test_util.h"

namespace cp {
namespace {

using testing::slurp;
using testing::TempDir;

TEST(AgentFiles, RecordsReadBackLatestFirst) {
  TempDir dir;
  const std::string path = dir.path() + "/journal.json";
  EXPECT_TRUE(agent_files::read_records(path).empty()) << "a missing file has no records";
  ASSERT_TRUE(agent_files::append_record(path, R"({"n":1})").ok());
  ASSERT_TRUE(agent_files::append_record(path, R"({"n":2})").ok());
  EXPECT_EQ(agent_files::read_records(path), (std::vector<std::string>{R"({"n":2})", R"({"n":1})"}));
}

// A crash mid-write leaves a torn line; the next record still stands on a line of its own.
TEST(AgentFiles, ARecordAfterATornOneIsWhole) {
  TempDir dir;
  const std::string path = dir.path() + "/journal.json";
  ASSERT_TRUE(agent_files::append_record(path, R"({"n":1})").ok());
  {
    std::ofstream out(path, std::ios::app);
    out << R"({"n":2,"tor)";  // no newline: the agent died here
  }
  ASSERT_TRUE(agent_files::append_record(path, R"({"n":3})").ok());
  auto records = agent_files::read_records(path);
  ASSERT_EQ(records.size(), 3u);
  EXPECT_EQ(records[0], R"({"n":3})");
  EXPECT_EQ(records[1], R"({"n":2,"tor)");
}

// A file written whole before records were appended (one JSON document, no newline) reads as one record.
TEST(AgentFiles, AnOlderWholeFileIsOneRecord) {
  TempDir dir;
  const std::string path = dir.path() + "/journal.json";
  ASSERT_TRUE(agent_files::write_atomic(path, R"({"n":0})", 0644, agent_files::Durability::process_crash).ok());
  EXPECT_EQ(agent_files::read_records(path), (std::vector<std::string>{R"({"n":0})"}));
  ASSERT_TRUE(agent_files::append_record(path, R"({"n":1})").ok());
  EXPECT_EQ(agent_files::read_records(path).front(), R"({"n":1})");
}

TEST(AgentFiles, ABigFileIsCompactedToItsLatestRecord) {
  TempDir dir;
  const std::string path = dir.path() + "/journal.json";
  const std::string filler(100, 'x');
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(agent_files::append_record(path, filler + std::to_string(i), 0644, 1000).ok());
  auto records = agent_files::read_records(path);
  EXPECT_LE(slurp(path).size(), 1000u + filler.size() + 8);
  ASSERT_FALSE(records.empty());
  EXPECT_EQ(records.front(), filler + "19");
}

TEST(AgentFiles, ARecordWithANewlineIsRefusedAndWritesNothing) {
  TempDir dir;
  const std::string path = dir.path() + "/journal.json";
  EXPECT_FALSE(agent_files::append_record(path, "a\nb").ok());
  struct stat st {};
  EXPECT_NE(::stat(path.c_str(), &st), 0);
}

}  // namespace
}  // namespace cp
