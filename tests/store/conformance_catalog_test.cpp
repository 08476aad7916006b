// Conformance: schema, settings, users and tokens, clusters, bootstrap tokens,
// agent credentials, nodes, groups and priority classes.
#include "store/migrations.h"
#include "store_conformance.h"

namespace cp::testing {
namespace {

// --------------------------------------------------------------- schema

TEST_P(StoreTest, MigrateIsIdempotentAndReportsTheLatestVersion) {
  // Migrating an up-to-date database changes nothing, data included.
  EXPECT_EQ(store_->schema_version(), latest_schema_version());
  write([](Tx& tx) { return tx.set_meta("k", "v"); });
  ASSERT_OK(store_->migrate());
  ASSERT_OK(store_->migrate());
  EXPECT_EQ(store_->schema_version(), latest_schema_version());
  EXPECT_EQ(read([](Tx& tx) { return tx.get_meta("k"); }), std::optional<std::string>("v"));
  EXPECT_FALSE(store_->backend().empty());
}

// ----------------------------------------------------------------- meta

TEST_P(StoreTest, MetaIsAbsentUntilSetAndThenOverwritten) {
  EXPECT_EQ(read([](Tx& tx) { return tx.get_meta("admin_token_created"); }), std::nullopt);
  write([](Tx& tx) { return tx.set_meta("admin_token_created", "1"); });
  write([](Tx& tx) { return tx.set_meta("admin_token_created", "2"); });
  EXPECT_EQ(read([](Tx& tx) { return tx.get_meta("admin_token_created"); }), std::optional<std::string>("2"));
}

// ------------------------------------------------------- users, tokens

TEST_P(StoreTest, UsersUpsertByNameAndListInNameOrder) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.upsert_user(User{"zoe", PlatformRole::viewer, kT0}));
    CP_TRY(tx.upsert_user(User{"alice", PlatformRole::user, kT0}));
    return tx.upsert_user(User{"alice", PlatformRole::admin, kT0 + 1});  // replaces
  });
  auto alice = read([](Tx& tx) { return tx.get_user("alice"); });
  ASSERT_TRUE(alice.has_value());
  expect_same(User{"alice", PlatformRole::admin, kT0 + 1}, *alice);
  EXPECT_EQ(read([](Tx& tx) { return tx.get_user("nobody"); }), std::nullopt);
  auto users = read([](Tx& tx) { return tx.list_users(); });
  ASSERT_EQ(users.size(), 2u);
  EXPECT_EQ(users[0].name, "alice");
  EXPECT_EQ(users[1].name, "zoe");
}

TEST_P(StoreTest, ApiTokensAreFoundByHashListedPerUserAndDeleted) {
  ApiToken t1{"tok-1", "hash-1", "alice", "laptop", kT0, 0};
  ApiToken t2{"tok-2", "hash-2", "alice", "ci", kT0 + 1, kT0 + 1000};
  ApiToken t3{"tok-3", "hash-3", "bob", "", kT0, 0};
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.insert_token(t2));
    CP_TRY(tx.insert_token(t1));
    return tx.insert_token(t3);
  });
  auto found = read([](Tx& tx) { return tx.find_token_by_hash("hash-2"); });
  ASSERT_TRUE(found.has_value());
  expect_same(t2, *found);
  EXPECT_EQ(read([](Tx& tx) { return tx.find_token_by_hash("hash-x"); }), std::nullopt);

  auto alices = read([](Tx& tx) { return tx.list_tokens("alice"); });
  ASSERT_EQ(alices.size(), 2u);
  EXPECT_EQ(alices[0].id, "tok-1");  // oldest first
  EXPECT_EQ(alices[1].id, "tok-2");

  // The same id or the same secret hash twice is a conflict.
  EXPECT_EQ(write_error([&](Tx& tx) { return tx.insert_token(t1); }).code, "already_exists");
  ApiToken same_hash{"tok-9", "hash-1", "bob", "", kT0, 0};
  EXPECT_EQ(write_error([&](Tx& tx) { return tx.insert_token(same_hash); }).code, "already_exists");

  write([](Tx& tx) { return tx.delete_token("tok-1"); });
  EXPECT_EQ(read([](Tx& tx) { return tx.find_token_by_hash("hash-1"); }), std::nullopt);
  EXPECT_EQ(write_error([](Tx& tx) { return tx.delete_token("tok-1"); }).code, "not_found");
}

// ------------------------------------------------------------- clusters

TEST_P(StoreTest, ClustersRoundTripEveryField) {
  Cluster c = make_cluster("c-east");
  write([&](Tx& tx) { return tx.insert_cluster(c); });
  auto got = read([](Tx& tx) { return tx.get_cluster("c-east"); });
  ASSERT_TRUE(got.has_value());
  expect_same(c, *got);
  EXPECT_EQ(read([](Tx& tx) { return tx.get_cluster("c-none"); }), std::nullopt);
}

TEST_P(StoreTest, ClusterInsertTwiceIsAlreadyExists) {
  write([](Tx& tx) { return tx.insert_cluster(make_cluster("c-east")); });
  Error e = write_error([](Tx& tx) { return tx.insert_cluster(make_cluster("c-east")); });
  EXPECT_EQ(e.code, "already_exists");
  EXPECT_EQ(e.status, 409);
}

TEST_P(StoreTest, ClusterUpdateAndDeleteOfAnUnknownIdAreNotFound) {
  EXPECT_EQ(write_error([](Tx& tx) { return tx.update_cluster(make_cluster("c-none")); }).code, "not_found");
  EXPECT_EQ(write_error([](Tx& tx) { return tx.delete_cluster("c-none"); }).code, "not_found");
}

TEST_P(StoreTest, ClusterUpdateReplacesTheDocumentAndListIsByIdOrder) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(make_cluster("c-west")));
    return tx.insert_cluster(make_cluster("c-east"));
  });
  Cluster changed = make_cluster("c-west");
  changed.state = ClusterState::online;
  changed.state_reason = "";
  changed.updated_at = kT0 + 9'000;
  write([&](Tx& tx) { return tx.update_cluster(changed); });
  auto clusters = read([](Tx& tx) { return tx.list_clusters(); });
  ASSERT_EQ(clusters.size(), 2u);
  EXPECT_EQ(clusters[0].id, "c-east");
  expect_same(changed, clusters[1]);
}

TEST_P(StoreTest, DeleteClusterRemovesItsNodesTokensAndCredentialsOnly) {
  write([](Tx& tx) -> Status {
    for (const char* id : {"c-east", "c-west"}) {
      std::string c = id;
      CP_TRY(tx.insert_cluster(make_cluster(c)));
      CP_TRY(tx.upsert_node(make_node(c, "node-1")));
      CP_TRY(tx.insert_bootstrap_token("boot-" + c, c, kT0, kT0 + 60'000));
      CP_TRY(tx.insert_agent_credential(AgentCredential{"cred-" + c, c, kT0, kT0 + 60'000}));
    }
    return {};
  });
  write([](Tx& tx) { return tx.delete_cluster("c-east"); });

  EXPECT_EQ(read([](Tx& tx) { return tx.get_cluster("c-east"); }), std::nullopt);
  EXPECT_TRUE(read([](Tx& tx) { return tx.list_nodes("c-east"); }).empty());
  EXPECT_EQ(read([](Tx& tx) { return tx.find_agent_credential("cred-c-east"); }), std::nullopt);
  // The other cluster keeps everything.
  EXPECT_EQ(read([](Tx& tx) { return tx.list_nodes(""); }).size(), 1u);
  EXPECT_TRUE(read([](Tx& tx) { return tx.find_agent_credential("cred-c-west"); }).has_value());
  // The bootstrap token went with its cluster: a re-created cluster of the
  // same id does not inherit it.
  write([](Tx& tx) { return tx.insert_cluster(make_cluster("c-east")); });
  std::optional<std::string> consumed = std::string("sentinel");
  write([&](Tx& tx) -> Status {
    CP_ASSIGN(consumed, tx.consume_bootstrap_token("boot-c-east", kT0));
    return {};
  });
  EXPECT_EQ(consumed, std::nullopt);
}

// ---------------------------------------- bootstrap tokens, credentials

// Exchanging a bootstrap token, in its own write transaction as the server does.
std::optional<std::string> consume(Store& store, const std::string& hash, Millis now) {
  std::optional<std::string> cluster;
  Status s = store.write([&](Tx& tx) -> Status {
    CP_ASSIGN(cluster, tx.consume_bootstrap_token(hash, now));
    return {};
  });
  EXPECT_TRUE(s.ok()) << s.error().to_string();
  return cluster;
}

TEST_P(StoreTest, BootstrapTokenWorksOnceAndNotAfterItExpires) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(make_cluster("c-east")));
    CP_TRY(tx.insert_bootstrap_token("once", "c-east", kT0, kT0 + 60'000));
    return tx.insert_bootstrap_token("late", "c-east", kT0, kT0 + 60'000);
  });
  EXPECT_EQ(consume(*store_, "once", kT0 + 59'999), std::optional<std::string>("c-east"));
  EXPECT_EQ(consume(*store_, "once", kT0 + 59'999), std::nullopt);  // one time only
  EXPECT_EQ(consume(*store_, "late", kT0 + 60'000), std::nullopt);   // expired at expires_at
  EXPECT_EQ(consume(*store_, "unknown", kT0), std::nullopt);
}

TEST_P(StoreTest, BootstrapTokenConsumedInARolledBackTransactionStaysUsable) {
  // A registration that fails later in its transaction must not burn the token.
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(make_cluster("c-east")));
    return tx.insert_bootstrap_token("tok", "c-east", kT0, kT0 + 60'000);
  });
  Status failed = store_->write([](Tx& tx) -> Status {
    CP_TRY(tx.consume_bootstrap_token("tok", kT0));
    return errors::conflict("later step failed", "后续步骤失败");
  });
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(consume(*store_, "tok", kT0), std::optional<std::string>("c-east"));
}

TEST_P(StoreTest, TokensAndCredentialsOfAnUnknownClusterAreNotFound) {
  Error e = write_error([](Tx& tx) { return tx.insert_bootstrap_token("h", "c-none", kT0, kT0 + 1); });
  EXPECT_EQ(e.code, "not_found");
  e = write_error([](Tx& tx) { return tx.insert_agent_credential(AgentCredential{"h", "c-none", kT0, kT0 + 1}); });
  EXPECT_EQ(e.code, "not_found");
  e = write_error([](Tx& tx) { return tx.upsert_node(make_node("c-none", "n")); });
  EXPECT_EQ(e.code, "not_found");
}

TEST_P(StoreTest, AgentCredentialsAreFoundByHashAndPrunedByExpiry) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(make_cluster("c-east")));
    CP_TRY(tx.insert_cluster(make_cluster("c-west")));
    CP_TRY(tx.insert_agent_credential(AgentCredential{"old", "c-east", kT0, kT0 + 1'000}));
    CP_TRY(tx.insert_agent_credential(AgentCredential{"new", "c-east", kT0 + 900, kT0 + 2'000}));
    return tx.insert_agent_credential(AgentCredential{"other", "c-west", kT0, kT0 + 1'000});
  });
  auto found = read([](Tx& tx) { return tx.find_agent_credential("new"); });
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->cluster_id, "c-east");
  EXPECT_EQ(found->created_at, kT0 + 900);
  EXPECT_EQ(found->expires_at, kT0 + 2'000);

  // Renewal: drop this cluster's credentials that expire before the new one's.
  write([](Tx& tx) { return tx.delete_agent_credentials_before("c-east", kT0 + 2'000); });
  EXPECT_EQ(read([](Tx& tx) { return tx.find_agent_credential("old"); }), std::nullopt);
  EXPECT_TRUE(read([](Tx& tx) { return tx.find_agent_credential("new"); }).has_value());
  EXPECT_TRUE(read([](Tx& tx) { return tx.find_agent_credential("other"); }).has_value());

  Error dup = write_error([](Tx& tx) { return tx.insert_agent_credential(AgentCredential{"new", "c-east", 0, 1}); });
  EXPECT_EQ(dup.code, "already_exists");
}

// ---------------------------------------------------------------- nodes

TEST_P(StoreTest, NodesRoundTripEveryField) {
  Node n = make_node("c-east", "node-1");
  n.label_overrides = {{"pool", "infer"}};
  n.maintenance = true;
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(make_cluster("c-east")));
    return tx.upsert_node(n);
  });
  auto got = read([](Tx& tx) { return tx.get_node("c-east", "node-1"); });
  ASSERT_TRUE(got.has_value());
  expect_same(n, *got);
}

TEST_P(StoreTest, UpsertNodeKeepsTheAdminFieldsOfAnExistingNode) {
  // The agent owns what it reports; label_overrides and maintenance belong to
  // an admin, and an agent's next sync must not undo them.
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(make_cluster("c-east")));
    CP_TRY(tx.upsert_node(make_node("c-east", "node-1")));
    return tx.set_node_admin("c-east", "node-1", {{"gpu-node-group", "g2"}}, true);
  });
  Node report = make_node("c-east", "node-1");
  report.ready = true;
  report.not_ready_reason = "";
  report.labels["kernel"] = "6.1";
  report.label_overrides = {};  // agents never send overrides
  report.maintenance = false;
  report.updated_at = kT0 + 2'000;
  write([&](Tx& tx) { return tx.upsert_node(report); });

  auto got = read([](Tx& tx) { return tx.get_node("c-east", "node-1"); });
  ASSERT_TRUE(got.has_value());
  EXPECT_TRUE(got->ready);
  EXPECT_EQ(got->labels.at("kernel"), "6.1");
  EXPECT_EQ(got->updated_at, kT0 + 2'000);
  EXPECT_EQ(got->label_overrides, (Labels{{"gpu-node-group", "g2"}}));
  EXPECT_TRUE(got->maintenance);
}

TEST_P(StoreTest, SetNodeAdminChangesOnlyTheAdminFields) {
  Node n = make_node("c-east", "node-1");
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(make_cluster("c-east")));
    return tx.upsert_node(n);
  });
  write([](Tx& tx) { return tx.set_node_admin("c-east", "node-1", {{"pool", ""}}, true); });
  auto got = read([](Tx& tx) { return tx.get_node("c-east", "node-1"); });
  ASSERT_TRUE(got.has_value());
  n.label_overrides = {{"pool", ""}};
  n.maintenance = true;
  expect_same(n, *got);
  EXPECT_EQ(write_error([](Tx& tx) { return tx.set_node_admin("c-east", "node-9", {}, true); }).code, "not_found");
}

TEST_P(StoreTest, NodesListPerClusterOrAllAndDelete) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(make_cluster("c-east")));
    CP_TRY(tx.insert_cluster(make_cluster("c-west")));
    CP_TRY(tx.upsert_node(make_node("c-west", "b")));
    CP_TRY(tx.upsert_node(make_node("c-east", "b")));
    return tx.upsert_node(make_node("c-east", "a"));
  });
  auto east = read([](Tx& tx) { return tx.list_nodes("c-east"); });
  ASSERT_EQ(east.size(), 2u);
  EXPECT_EQ(east[0].name, "a");
  EXPECT_EQ(east[1].name, "b");
  auto all = read([](Tx& tx) { return tx.list_nodes(""); });
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2].cluster_id, "c-west");

  write([](Tx& tx) { return tx.delete_node("c-east", "a"); });
  EXPECT_EQ(read([](Tx& tx) { return tx.get_node("c-east", "a"); }), std::nullopt);
  EXPECT_EQ(write_error([](Tx& tx) { return tx.delete_node("c-east", "a"); }).code, "not_found");
}

// get_nodes: the named nodes of one cluster that exist, by name in bytes
// order, with their admin fields; names of other clusters' nodes, of nodes
// that do not exist, and repeats add nothing; more names than one
// statement takes are read in several.
TEST_P(StoreTest, GetNodesReadsTheNamedNodesOfOneCluster) {
  write([](Tx& tx) -> Status {
    CP_TRY(tx.insert_cluster(make_cluster("c-east")));
    CP_TRY(tx.insert_cluster(make_cluster("c-west")));
    CP_TRY(tx.upsert_node(make_node("c-west", "only-west")));
    for (int i = 0; i < 1005; ++i) CP_TRY(tx.upsert_node(make_node("c-east", "n" + std::to_string(i))));
    CP_TRY(tx.upsert_node(make_node("c-east", "B")));
    return tx.set_node_admin("c-east", "n7", {{"pool", "infer"}}, true);
  });
  auto got = read([](Tx& tx) { return tx.get_nodes("c-east", {"n7", "only-west", "B", "missing", "n1", "n7"}); });
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].name, "B");  // bytes order: upper case first
  EXPECT_EQ(got[1].name, "n1");
  EXPECT_EQ(got[2].name, "n7");
  EXPECT_EQ(got[2].label_overrides, (Labels{{"pool", "infer"}}));
  EXPECT_TRUE(got[2].maintenance);
  EXPECT_FALSE(got[1].maintenance);
  expect_same(got[1], *read([](Tx& tx) { return tx.get_node("c-east", "n1"); }));

  std::vector<std::string> many;
  for (int i = 0; i < 1005; ++i) many.push_back("n" + std::to_string(i));
  EXPECT_EQ(read([&](Tx& tx) { return tx.get_nodes("c-east", many); }).size(), 1005u);
  EXPECT_TRUE(read([](Tx& tx) { return tx.get_nodes("c-east", {}); }).empty());
  EXPECT_TRUE(read([](Tx& tx) { return tx.get_nodes("c-none", {"n1"}); }).empty());
}

// Pages walk (cluster, name) in bytes order across clusters, the admin
// fields come along, and the cursor of the last page is "".
TEST_P(StoreTest, NodesPageByClusterAndNameWithACursor) {
  write([](Tx& tx) -> Status {
    for (const char* c : {"c-b", "c-a", "c-B"}) {
      CP_TRY(tx.insert_cluster(make_cluster(c)));
      for (const char* n : {"n-2", "n-1", "N-3"}) CP_TRY(tx.upsert_node(make_node(c, n)));
    }
    return tx.set_node_admin("c-a", "n-1", {{"zone", "z1"}}, true);
  });
  std::vector<std::string> seen;
  NodeQuery q;
  q.limit = 4;
  for (int pages = 0; pages < 10; ++pages) {
    auto page = read([&](Tx& tx) { return tx.list_nodes_page(q); });
    for (const auto& n : page.items) {
      seen.push_back(n.cluster_id + "/" + n.name);
      if (n.cluster_id == "c-a" && n.name == "n-1") {
        EXPECT_TRUE(n.maintenance);
      }
    }
    if (page.next_cursor.empty()) break;
    q.cursor = page.next_cursor;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"c-B/N-3", "c-B/n-1", "c-B/n-2", "c-a/N-3", "c-a/n-1", "c-a/n-2",
                                            "c-b/N-3", "c-b/n-1", "c-b/n-2"}));
  NodeQuery one{"c-a", 2, ""};
  auto first = read([&](Tx& tx) { return tx.list_nodes_page(one); });
  ASSERT_EQ(first.items.size(), 2u);
  EXPECT_EQ(first.next_cursor, "c-a/n-1");
  one.cursor = first.next_cursor;
  auto last = read([&](Tx& tx) { return tx.list_nodes_page(one); });
  ASSERT_EQ(last.items.size(), 1u);
  EXPECT_EQ(last.items[0].name, "n-2");
  EXPECT_EQ(last.next_cursor, "");
  one.cursor = "no-slash";
  EXPECT_EQ(read_error([&](Tx& tx) { return tx.list_nodes_page(one); }).status, 400);
}

// ---------------------------------------- groups and priority classes

TEST_P(StoreTest, ResourceGroupsUpsertRoundTripListAndDelete) {
  ResourceGroup a = make_resource_group("rg-a");
  ResourceGroup b = make_resource_group("rg-b");
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.upsert_resource_group(b));
    return tx.upsert_resource_group(a);
  });
  a.quota["gpu/nvidia-a100-80gb"].guaranteed = 32;
  a.updated_at = kT0 + 99;
  write([&](Tx& tx) { return tx.upsert_resource_group(a); });

  auto got = read([](Tx& tx) { return tx.get_resource_group("rg-a"); });
  ASSERT_TRUE(got.has_value());
  expect_same(a, *got);
  auto all = read([](Tx& tx) { return tx.list_resource_groups(); });
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "rg-a");
  expect_same(b, all[1]);

  write([](Tx& tx) { return tx.delete_resource_group("rg-a"); });
  EXPECT_EQ(read([](Tx& tx) { return tx.get_resource_group("rg-a"); }), std::nullopt);
  EXPECT_EQ(write_error([](Tx& tx) { return tx.delete_resource_group("rg-a"); }).code, "not_found");
}

TEST_P(StoreTest, AGroupReadAgainAfterItChangedIsTheChangedOne) {
  // Read, change, read again, on the writer and on a reader: what was
  // decoded before (SqliteTx keeps decoded groups) never stands in for the
  // row as it is now.
  ResourceGroup a = make_resource_group("rg-a");
  write([&](Tx& tx) { return tx.upsert_resource_group(a); });
  for (int i = 1; i <= 3; ++i) {
    auto before = read([](Tx& tx) { return tx.get_resource_group("rg-a"); });
    ASSERT_TRUE(before.has_value());
    expect_same(a, *before);
    a.quota["cpu"].guaranteed = 1000 * i;
    a.clusters.push_back("c-" + std::to_string(i));
    std::optional<ResourceGroup> in_write;
    write([&](Tx& tx) -> Status {
      CP_ASSIGN(auto old, tx.get_resource_group("rg-a"));
      if (!old || old->clusters.size() != a.clusters.size() - 1) return Error{"test", 500, "stale read", "", {}};
      CP_TRY(tx.upsert_resource_group(a));
      CP_ASSIGN(in_write, tx.get_resource_group("rg-a"));
      return {};
    });
    ASSERT_TRUE(in_write.has_value());
    expect_same(a, *in_write);
    auto after = read([](Tx& tx) { return tx.get_resource_group("rg-a"); });
    ASSERT_TRUE(after.has_value());
    expect_same(a, *after);
  }
  write([](Tx& tx) { return tx.delete_resource_group("rg-a"); });
  EXPECT_EQ(read([](Tx& tx) { return tx.get_resource_group("rg-a"); }), std::nullopt);
}

TEST_P(StoreTest, ProjectGroupsUpsertRoundTripListAndDelete) {
  ProjectGroup pg = make_project_group("pg-a");
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.upsert_project_group(make_project_group("pg-b")));
    return tx.upsert_project_group(pg);
  });
  pg.members.push_back(Member{"carol", ProjectRole::member});
  write([&](Tx& tx) { return tx.upsert_project_group(pg); });

  auto got = read([](Tx& tx) { return tx.get_project_group("pg-a"); });
  ASSERT_TRUE(got.has_value());
  expect_same(pg, *got);
  auto all = read([](Tx& tx) { return tx.list_project_groups(); });
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "pg-a");
  EXPECT_EQ(all[1].name, "pg-b");

  write([](Tx& tx) { return tx.delete_project_group("pg-b"); });
  EXPECT_EQ(read([](Tx& tx) { return tx.list_project_groups(); }).size(), 1u);
  EXPECT_EQ(write_error([](Tx& tx) { return tx.delete_project_group("pg-b"); }).code, "not_found");
}

TEST_P(StoreTest, PriorityClassesUpsertRoundTripListAndDelete) {
  PriorityClass high = make_priority_class("high", 1000);
  write([&](Tx& tx) -> Status {
    CP_TRY(tx.upsert_priority_class(make_priority_class("low", 10)));
    return tx.upsert_priority_class(high);
  });
  high.value = 2000;
  write([&](Tx& tx) { return tx.upsert_priority_class(high); });

  auto got = read([](Tx& tx) { return tx.get_priority_class("high"); });
  ASSERT_TRUE(got.has_value());
  expect_same(high, *got);
  auto all = read([](Tx& tx) { return tx.list_priority_classes(); });
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].name, "high");
  EXPECT_EQ(all[1].name, "low");

  write([](Tx& tx) { return tx.delete_priority_class("low"); });
  EXPECT_EQ(read([](Tx& tx) { return tx.get_priority_class("low"); }), std::nullopt);
  EXPECT_EQ(write_error([](Tx& tx) { return tx.delete_priority_class("low"); }).code, "not_found");
}

}  // namespace
}  // namespace cp::testing
