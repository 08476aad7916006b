// Node preflight (find_drift): one property per test.
#include <gtest/gtest.h>

#include "server/preflight.h"

namespace cp {
namespace {

Node node(const std::string& name, const std::string& kernel, int gpus_declared = 0, int gpus_seen = 0) {
  Node n;
  n.cluster_id = "c1";
  n.name = name;
  n.facts.kernel = kernel;
  n.facts.runtime = "containerd 1.7.2";
  n.facts.driver = "550.54.15";
  n.facts.cuda = "12.4";
  n.facts.mounts = {"/", "/mnt/shared", "/var/lib/containerd"};
  if (gpus_declared > 0) n.capacity = Resources::parse_or_die("gpu/nvidia-a100-80gb:" + std::to_string(gpus_declared));
  for (int i = 0; i < gpus_seen; ++i) n.gpus.push_back(GpuDevice{i, "uuid", "nvidia-a100-80gb", 0, 0, 0});
  return n;
}

std::vector<std::string> kinds(const std::vector<NodeDrift>& drift) {
  std::vector<std::string> out;
  for (const auto& d : drift) out.push_back(d.kind);
  return out;
}

TEST(Preflight, ANodeThatAgreesWithItsClusterHasNoDrift) {
  auto drift = find_drift({node("a", "Linux 6.1"), node("b", "Linux 6.1")}, "/mnt/shared");
  ASSERT_EQ(drift.size(), 2u);
  EXPECT_TRUE(drift["a"].empty());
  EXPECT_TRUE(drift["b"].empty());
}

TEST(Preflight, TheOddKernelOutIsFlaggedWithTheUsualValueAndCount) {
  auto drift = find_drift({node("a", "Linux 6.1"), node("b", "Linux 6.1"), node("c", "Linux 5.15")}, "");
  EXPECT_TRUE(drift["a"].empty());
  ASSERT_EQ(kinds(drift["c"]), std::vector<std::string>{"kernel"});
  EXPECT_EQ(drift["c"][0].message, "kernel \"Linux 5.15\" differs from \"Linux 6.1\" on 2/3 nodes of the cluster");
  EXPECT_NE(drift["c"][0].message_zh.find("内核"), std::string::npos);
}

TEST(Preflight, ATieIsResolvedTheSameWhateverTheOrder) {
  auto one = find_drift({node("a", "Linux 6.1"), node("b", "Linux 5.15")}, "");
  auto two = find_drift({node("b", "Linux 5.15"), node("a", "Linux 6.1")}, "");
  EXPECT_EQ(kinds(one["b"]), std::vector<std::string>{"kernel"});
  EXPECT_EQ(kinds(two["b"]), std::vector<std::string>{"kernel"});
  EXPECT_TRUE(one["a"].empty());
  EXPECT_TRUE(two["a"].empty());
}

TEST(Preflight, DriverAndCudaDriftAndUnreportedFactsAreLeftOut) {
  Node a = node("a", "Linux 6.1"), b = node("b", "Linux 6.1"), c = node("c", "");
  b.facts.driver = "535.104.05";
  b.facts.cuda = "12.2";
  c.facts.driver = "";
  c.facts.cuda = "";
  auto drift = find_drift({a, b, c, node("d", "Linux 6.1")}, "");
  EXPECT_EQ(kinds(drift["b"]), (std::vector<std::string>{"driver", "cuda"}));
  EXPECT_TRUE(drift["c"].empty());  // reports no kernel, driver or CUDA: nothing to compare
}

TEST(Preflight, AMissingStorageMountIsFlaggedAndAPathUnderAMountIsFine) {
  Node a = node("a", "Linux 6.1"), b = node("b", "Linux 6.1");
  b.facts.mounts = {"/", "/data"};
  auto drift = find_drift({a, b}, "/mnt/shared/datasets");
  EXPECT_TRUE(drift["a"].empty());  // under /mnt/shared
  ASSERT_EQ(kinds(drift["b"]), std::vector<std::string>{"storage_mount"});
  EXPECT_EQ(drift["b"][0].message, "storage mount /mnt/shared/datasets is missing");
  // The root filesystem does not count as the mount, nor does a sibling prefix.
  b.facts.mounts = {"/", "/mnt/shared2"};
  EXPECT_EQ(kinds(find_drift({b}, "/mnt/shared")["b"]), std::vector<std::string>{"storage_mount"});
}

TEST(Preflight, AClockMoreThanOneSecondOffIsFlagged) {
  Node a = node("a", "Linux 6.1"), b = node("b", "Linux 6.1");
  a.facts.clock_offset_ms = 1000;
  b.facts.clock_offset_ms = -1500;
  auto drift = find_drift({a, b}, "");
  EXPECT_TRUE(drift["a"].empty());
  EXPECT_EQ(kinds(drift["b"]), std::vector<std::string>{"clock_offset"});
}

TEST(Preflight, FewerGpusSeenThanDeclaredOrLabelledIsFlagged) {
  Node declared = node("a", "Linux 6.1", 8, 7);
  Node labelled = node("b", "Linux 6.1", 0, 4);
  labelled.labels["nvidia.com/gpu.count"] = "8";
  Node fine = node("c", "Linux 6.1", 8, 8);
  auto drift = find_drift({declared, labelled, fine}, "");
  ASSERT_EQ(kinds(drift["a"]), std::vector<std::string>{"gpus"});
  EXPECT_EQ(drift["a"][0].message, "sees 7 GPU(s), fewer than the 8 it declares");
  ASSERT_EQ(kinds(drift["b"]), std::vector<std::string>{"gpus"});
  EXPECT_EQ(drift["b"][0].message, "sees 4 GPU(s), fewer than the 8 it is labelled with");
  EXPECT_TRUE(drift["c"].empty());
}

}  // namespace
}  // namespace cp
