// The configuration file of `cubeplane up` and `cubeplane server`: a
// multi-document YAML. One `Server` document holds settings; `Cluster`
// documents register clusters (with the nodes an embedded local agent
// declares); `User`, `PriorityClass`, `ResourceGroup` and `ProjectGroup`
// documents are applied at every start (create or update), so the file is the
// source of truth for what it names. See examples/demo-fleet.yaml.
#pragma once

#include <string>
#include <vector>

#include "common/json.h"
#include "common/result.h"
#include "model/types.h"
#include "server/control_plane.h"

namespace cp {

struct FleetGpus {
  std::string type;
  int count = 0;
};
BOOST_DESCRIBE_STRUCT(FleetGpus, (), (type, count))

struct FleetNode {
  std::string name;
  Labels labels;
  std::string cpu;     // quantity, "" = this machine's
  std::string memory;  // quantity, "" = this machine's
  FleetGpus gpus;
};
BOOST_DESCRIBE_STRUCT(FleetNode, (), (name, labels, cpu, memory, gpus))

struct ClusterConfig {
  std::string id;
  std::string display_name;
  ExecutorKind executor = ExecutorKind::local;
  std::string storage_pool = "default";
  std::string storage_mount;  // checked on every node by the preflight ("" = not)
  Labels labels;
  bool embedded_agent = true;  // `up` runs a local agent for it
  std::vector<FleetNode> nodes;
};

struct ServerSettings {
  std::string listen = "127.0.0.1:8080";
  std::string store;    // "" = sqlite:///<data-dir>/cubeplane.db
  std::string objects;  // "" = file:///<data-dir>/objects
  std::string web_root;  // "" = the built UI next to the binary, if any
  std::string log_level = "info";
  // Threads that run the HTTP handlers. A handler blocks on the store, and
  // the store commits the writes that arrive together in one transaction
  // (SqliteStore::write, AuditBatch): more threads than cores let requests
  // meet there. Long-polls and streams hold no thread.
  static constexpr int kDefaultHttpThreads = 16;
  static constexpr int kMaxHttpThreads = 256;
  int http_threads = kDefaultHttpThreads;
  ServerConfig control;
};

struct FleetConfig {
  ServerSettings server;
  std::vector<ClusterConfig> clusters;
  std::vector<User> users;
  std::vector<json::value> documents;  // PriorityClass, ResourceGroup, ProjectGroup, in file order
};

Result<FleetConfig> load_fleet_config(const std::string& path);
Result<FleetConfig> parse_fleet_config(std::string_view text);

// Creates missing clusters and users and applies the documents, as the admin.
Status apply_fleet(ControlPlane& cp, const FleetConfig& fleet);

}  // namespace cp
