// The verbs end to end: argv in, a fake server answering, stdout/stderr and
// the exit code out (API.md: 0 success, 1 refused or unreachable, 2 usage).
#include "cli/cli.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <fstream>
#include <map>
#include <sstream>

#include "cli/fake_server.h"
#include "cli/temp_dir.h"
#include "common/json.h"

namespace cp::cli {
namespace {

using testing::ClosedPort;
using testing::FakeRequest;
using testing::FakeResponse;
using testing::FakeServer;
using testing::TempDir;

constexpr Millis kNow = 1'767'225'600'000;  // 2026-01-01T00:00:00Z

std::string slurp_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Canned answers by "METHOD /path"; anything else is a 404 error object.
class Routes {
 public:
  Routes& on(const std::string& method_path, FakeResponse r) {
    routes_[method_path] = std::move(r);
    return *this;
  }
  FakeServer::Handler handler() const {
    return [routes = routes_](const FakeRequest& req) {
      auto it = routes.find(req.method + " " + req.path);
      if (it != routes.end()) return it->second;
      return FakeResponse{404, R"({"error":{"code":"not_found","message":"no route )" + req.path + R"("}})"};
    };
  }

 private:
  std::map<std::string, FakeResponse> routes_;
};

class CliTest : public ::testing::Test {
 protected:
  void use_server(const std::string& url) { env_["CUBEPLANE_SERVER"] = url; }

  int run(const std::vector<std::string>& args, const AddCommands& add_more = {}) {
    out_.str("");
    err_.str("");
    ClientContext ctx;
    ctx.out = &out_;
    ctx.err = &err_;
    ctx.in = &in_;
    ctx.clock = &clock_;
    ctx.sleep = [this](Millis ms) { slept_.push_back(ms); };
    ctx.env = [vars = env_](std::string_view name) -> std::optional<std::string> {
      auto it = vars.find(std::string(name));
      if (it == vars.end() || it->second.empty()) return std::nullopt;
      return it->second;
    };
    return run_cli(ctx, args, add_more);
  }

  std::string out() const { return out_.str(); }
  std::string err() const { return err_.str(); }
  std::string config_file() const { return home_.path() + "/.config/cubeplane/config.yaml"; }

  TempDir home_;
  std::map<std::string, std::string> env_{{"HOME", home_.path()}, {"CUBEPLANE_TOKEN", "tok"}};
  std::istringstream in_;
  std::ostringstream out_, err_;
  SimulatedClock clock_{kNow};
  std::vector<Millis> slept_;  // the waits of retried requests, in order
};

const char* kTasksPage = R"({"items":[{"id":"t-1","name":"train","state":"Queued","project_group":"pb",
  "resource_group":"rg-b","created_at":1767225540000,
  "reasons":[{"code":"quota_exceeded","message":"no GPU free","message_zh":"没有空闲 GPU"}]}],"next_cursor":""})";

const char* kSubmitted =
    R"({"pipeline":{"id":"p-1","name":"ft"},"tasks":[{"id":"t-1","name":"prepare","state":"Queued"}]})";

TEST_F(CliTest, TasksLsPrintsATable) {
  FakeServer server(Routes().on("GET /api/v1/tasks", {200, kTasksPage}).handler());
  use_server(server.url());
  EXPECT_EQ(run({"tasks", "ls"}), 0) << err();
  EXPECT_EQ(out(),
            "ID    NAME    STATE    PROJECT GROUP   RESOURCE GROUP   CLUSTER   AGE   REASON\n"
            "t-1   train   Queued   pb              rg-b             -         1m    no GPU free\n");
  EXPECT_EQ(server.last().header("authorization"), "Bearer tok");
}

TEST_F(CliTest, FiltersBecomeQueryParametersAndStatesAreCaseInsensitive) {
  FakeServer server(Routes().on("GET /api/v1/tasks", {200, kTasksPage}).handler());
  use_server(server.url());
  EXPECT_EQ(run({"tasks", "ls", "--state", "queued", "--project-group", "pb", "--resource-group", "rg-b", "--cluster",
                 "c1", "--pipeline", "p-1", "--limit", "5"}),
            0)
      << err();
  EXPECT_EQ(server.last().query, "state=Queued&project_group=pb&resource_group=rg-b&cluster=c1&pipeline=p-1&limit=5");
}

TEST_F(CliTest, OutputJsonAfterTheVerbPrintsTheServersJson) {
  FakeServer server(Routes().on("GET /api/v1/clusters/c1", {200, R"({"id":"c1","labels":{}})"}).handler());
  use_server(server.url());
  EXPECT_EQ(run({"clusters", "get", "c1", "-o", "json"}), 0) << err();
  EXPECT_EQ(out(), "{\n  \"id\": \"c1\",\n  \"labels\": {}\n}\n");
}

TEST_F(CliTest, OutputYaml) {
  FakeServer server(Routes().on("GET /api/v1/clusters/c1", {200, R"({"id":"c1","state":"online"})"}).handler());
  use_server(server.url());
  EXPECT_EQ(run({"-o", "yaml", "clusters", "get", "c1"}), 0) << err();
  EXPECT_NE(out().find("id: c1"), std::string::npos) << out();
  EXPECT_NE(out().find("state: online"), std::string::npos) << out();
}

TEST_F(CliTest, ARefusalPrintsTheServersMessageAndExitsOne) {
  FakeServer server(Routes()
                        .on("GET /api/v1/tasks/t-9",
                            {404, R"({"error":{"code":"not_found","message":"任务 \"t-9\" 不存在"}})"})
                        .handler());
  use_server(server.url());
  EXPECT_EQ(run({"--lang", "zh", "tasks", "get", "t-9"}), 1);
  EXPECT_EQ(out(), "");
  EXPECT_EQ(err(), "错误：任务 \"t-9\" 不存在\n");
  EXPECT_EQ(server.last().header("accept-language"), "zh-CN");
}

TEST_F(CliTest, LanguageFollowsLangWhenNoFlag) {
  FakeServer server(Routes().on("GET /api/v1/tasks", {200, kTasksPage}).handler());
  use_server(server.url());
  env_["LANG"] = "zh_CN.UTF-8";
  EXPECT_EQ(run({"tasks", "ls"}), 0) << err();
  EXPECT_EQ(server.last().header("accept-language"), "zh-CN");
  EXPECT_NE(out().find("没有空闲 GPU"), std::string::npos);
}

TEST_F(CliTest, AnUnreachableServerExitsOneWithAClearMessage) {
  ClosedPort closed;
  use_server(closed.url());
  EXPECT_EQ(run({"clusters", "ls"}), 1);
  EXPECT_NE(err().find("cannot reach " + closed.url()), std::string::npos) << err();
}

// --server (or CUBEPLANE_SERVER, or the saved login) may list several
// servers: one that does not answer is passed over, and stderr says so.
TEST_F(CliTest, AServerListPassesOverOneThatDoesNotAnswerAndSaysSo) {
  ClosedPort closed;
  FakeServer server(Routes().on("GET /api/v1/tasks", {200, kTasksPage}).handler());
  use_server(closed.url() + "," + server.url());
  EXPECT_EQ(run({"tasks", "ls"}), 0) << err();
  EXPECT_NE(out().find("t-1"), std::string::npos) << out();
  EXPECT_NE(err().find("server " + closed.url() + " did not answer (cannot reach " + closed.url()), std::string::npos)
      << err();
  EXPECT_NE(err().find("; trying " + server.url() + "\n"), std::string::npos) << err();

  EXPECT_EQ(run({"--lang", "zh", "--server", closed.url() + ", " + server.url() + "/", "tasks", "ls"}), 0) << err();
  EXPECT_NE(err().find("服务器 " + closed.url() + " 没有应答"), std::string::npos) << err();
  EXPECT_NE(err().find("；改试 " + server.url()), std::string::npos) << err();
}

// Submit under a list: the next server gets the same bytes under the same
// Idempotency-Key at once; the waits come only after every server failed.
TEST_F(CliTest, SubmitGoesToTheNextServerUnderTheSameKey) {
  FakeServer failing_over([](const FakeRequest&) {
    return FakeResponse{503, R"({"error":{"code":"not_leader","message":"this server is not the leader"}})"};
  });
  FakeServer leader(Routes().on("POST /api/v1/pipelines", {201, kSubmitted}).handler());
  use_server(failing_over.url() + "," + leader.url());
  in_.str("kind: Pipeline\n");
  EXPECT_EQ(run({"submit", "-f", "-"}), 0) << err();
  ASSERT_EQ(failing_over.requests().size(), 1u);
  ASSERT_EQ(leader.requests().size(), 1u);
  EXPECT_EQ(leader.last().header("idempotency-key"), failing_over.last().header("idempotency-key"));
  EXPECT_EQ(leader.last().body, "kind: Pipeline\n");
  EXPECT_TRUE(slept_.empty());
  EXPECT_NE(err().find("did not answer (this server is not the leader); trying " + leader.url()), std::string::npos)
      << err();
  EXPECT_EQ(out(), "pipeline p-1 (ft) submitted\nTASK ID   NAME      STATE\nt-1       prepare   Queued\n");
}

TEST_F(CliTest, SubmitRetriesTheWholeListUnderOneKey) {
  ClosedPort closed;
  FakeServer gateway([](const FakeRequest&) { return FakeResponse{502, "bad gateway", "text/plain"}; });
  use_server(closed.url() + "," + gateway.url());
  in_.str("kind: Pipeline\n");
  EXPECT_EQ(run({"submit", "-f", "-"}), 1);
  EXPECT_EQ(slept_, (std::vector<Millis>{1000, 2000, 4000}));
  auto requests = gateway.requests();
  ASSERT_EQ(requests.size(), 4u);
  for (const auto& r : requests) EXPECT_EQ(r.header("idempotency-key"), requests[0].header("idempotency-key"));
  EXPECT_NE(err().find("trying again in 4s with the same idempotency key (attempt 4)"), std::string::npos) << err();
}

// A POST that may have been done is not sent again elsewhere: after a 503
// the cancel's answer is the 503.
TEST_F(CliTest, APostIsNotSentToTheNextServerAfterAnAnswer) {
  FakeServer unavailable([](const FakeRequest&) {
    return FakeResponse{503, R"({"error":{"code":"store_error","message":"the database is unavailable"}})"};
  });
  FakeServer other(
      Routes().on("POST /api/v1/tasks/t-1/cancel", {200, R"({"id":"t-1","state":"Cancelled"})"}).handler());
  use_server(unavailable.url() + "," + other.url());
  EXPECT_EQ(run({"tasks", "cancel", "t-1"}), 1);
  EXPECT_TRUE(other.requests().empty());
  EXPECT_NE(err().find("the database is unavailable"), std::string::npos) << err();
}

// A malformed server list, from wherever it comes, is a usage error (2)
// naming the entry, before any request.
TEST_F(CliTest, AMalformedServerListExitsTwoNamingTheEntry) {
  FakeServer server(Routes().on("GET /api/v1/tasks", {200, kTasksPage}).handler());
  use_server(server.url() + ",,");
  EXPECT_EQ(run({"tasks", "ls"}), 2);
  EXPECT_EQ(err(), "error: server: entry 2 of the server list \"" + server.url() + ",,\" is empty\n");
  EXPECT_EQ(run({"--lang", "zh", "tasks", "ls"}), 2);
  EXPECT_EQ(err(), "错误：server：服务器列表 \"" + server.url() + ",,\" 的第 2 项为空\n");
  EXPECT_EQ(run({"--server", server.url() + ",cp.example:8080", "clusters", "ls"}), 2);
  EXPECT_NE(err().find("\"cp.example:8080\" is not a server URL: it must start with http:// or https://"),
            std::string::npos)
      << err();
  EXPECT_EQ(run({"--server", server.url() + "," + server.url() + "/", "tasks", "ls"}), 2);
  EXPECT_NE(err().find("listed twice"), std::string::npos) << err();
  in_.str("kind: Pipeline\n");
  EXPECT_EQ(run({"--server", "http://", "submit", "-f", "-"}), 2);
  EXPECT_NE(err().find("it names no host"), std::string::npos) << err();
  EXPECT_EQ(run({"login", "--server", "http://a:1,,", "--token", "t"}), 2);
  EXPECT_TRUE(server.requests().empty());
}

// login saves the list; later commands use it with the saved token, also
// for a --server naming some of the saved servers, and never for another.
TEST_F(CliTest, LoginWithAServerListSavesItAndItsToken) {
  ClosedPort closed;
  FakeServer server(Routes().on("GET /api/v1/whoami", {200, R"({"user":"alice","role":"admin"})"}).handler());
  env_.erase("CUBEPLANE_TOKEN");
  const std::string list = closed.url() + ", " + server.url() + "/";
  EXPECT_EQ(run({"login", "--server", list, "--token", "cpt_1"}), 0) << err();
  EXPECT_NE(out().find("Logged in to " + closed.url() + "," + server.url() + " as alice"), std::string::npos) << out();
  EXPECT_NE(slurp_file(config_file()).find(closed.url() + "," + server.url()), std::string::npos);

  EXPECT_EQ(run({"users", "ls"}), 1);  // no such route on the fake: a refusal, but from the second server
  EXPECT_EQ(server.last().path, "/api/v1/users");
  EXPECT_EQ(server.last().header("authorization"), "Bearer cpt_1");
  EXPECT_EQ(run({"--server", server.url(), "users", "ls"}), 1);
  EXPECT_EQ(server.last().header("authorization"), "Bearer cpt_1");
}

TEST_F(CliTest, UsageErrorsExitTwo) {
  EXPECT_EQ(run({}), 2);                                         // no verb
  EXPECT_EQ(run({"frobnicate"}), 2);                             // unknown verb
  EXPECT_EQ(run({"tasks"}), 2);                                  // no sub-verb
  EXPECT_EQ(run({"tasks", "get"}), 2);                           // missing ID
  EXPECT_EQ(run({"-o", "xml", "tasks", "ls"}), 2);               // bad output format
  EXPECT_EQ(run({"tasks", "ls", "--state", "Sleeping"}), 2);     // unknown state
  EXPECT_EQ(run({"nodes", "maintenance", "c", "n", "maybe"}), 2);  // on|off
  EXPECT_EQ(run({"usage", "--from", "yesterday"}), 2);
  EXPECT_EQ(run({"usage", "--by", "team"}), 2);
  EXPECT_EQ(run({"usage", "rebuild", "--from", "2026-13"}), 2);
  EXPECT_EQ(run({"usage", "rebuild"}), 2);  // --from is required
  EXPECT_EQ(run({"usage", "advice", "--days", "0"}), 2);
  EXPECT_EQ(run({"nodes", "label", "c", "n", "novalue"}), 2);
  EXPECT_NE(err().find("novalue"), std::string::npos);
}

TEST_F(CliTest, HelpExitsZeroAndListsTheVerbs) {
  EXPECT_EQ(run({"--help"}), 0);
  for (const char* verb : {"login", "submit", "tasks", "clusters", "nodes", "resource-groups", "project-groups",
                           "priority-classes", "users", "tokens", "usage", "events", "version"}) {
    EXPECT_NE(out().find(verb), std::string::npos) << verb;
  }
  EXPECT_EQ(run({"tasks", "logs", "--help"}), 0);
  EXPECT_NE(out().find("--follow"), std::string::npos) << out();
}

TEST_F(CliTest, LoginVerifiesThenSavesThePrivateConfig) {
  FakeServer server(Routes().on("GET /api/v1/whoami", {200, R"({"user":"alice","role":"admin"})"}).handler());
  env_.erase("CUBEPLANE_TOKEN");
  EXPECT_EQ(run({"login", "--server", server.url() + "/", "--token", "cpt_1"}), 0) << err();
  EXPECT_NE(out().find("as alice (admin)"), std::string::npos) << out();
  EXPECT_EQ(server.last().header("authorization"), "Bearer cpt_1");

  struct stat st {};
  ASSERT_EQ(::stat(config_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  // Later commands use the saved server and token.
  EXPECT_EQ(run({"users", "ls"}), 1);  // no such route on the fake: a refusal
  EXPECT_EQ(server.last().path, "/api/v1/users");
  EXPECT_EQ(server.last().header("authorization"), "Bearer cpt_1");
}

TEST_F(CliTest, ARefusedLoginSavesNothing) {
  FakeServer server(Routes()
                        .on("GET /api/v1/whoami",
                            {401, R"({"error":{"code":"unauthenticated","message":"invalid token"}})"})
                        .handler());
  EXPECT_EQ(run({"login", "--server", server.url(), "--token", "bad"}), 1);
  EXPECT_EQ(err(), "error: invalid token\n");
  struct stat st {};
  EXPECT_NE(::stat(config_file().c_str(), &st), 0);
}

TEST_F(CliTest, LoginWithoutATokenIsAUsageError) {
  env_.erase("CUBEPLANE_TOKEN");
  EXPECT_EQ(run({"login", "--server", "http://127.0.0.1:1"}), 2);
}

TEST_F(CliTest, SubmitSendsTheYamlFromStdinAndPrintsTheIds) {
  FakeServer server(Routes()
                        .on("POST /api/v1/pipelines",
                            {201, R"({"pipeline":{"id":"p-1","name":"ft"},
                                      "tasks":[{"id":"t-1","name":"prepare","state":"Queued"}]})"})
                        .handler());
  use_server(server.url());
  in_.str("apiVersion: cubeplane/v1\nkind: Pipeline\n");
  EXPECT_EQ(run({"submit", "-f", "-"}), 0) << err();
  EXPECT_EQ(server.last().header("content-type"), "application/yaml");
  EXPECT_EQ(server.last().body, "apiVersion: cubeplane/v1\nkind: Pipeline\n");
  EXPECT_EQ(out(), "pipeline p-1 (ft) submitted\nTASK ID   NAME      STATE\nt-1       prepare   Queued\n");
}

TEST_F(CliTest, SubmitRetriesA502503Or504UnderTheSameKeyAndSaysSo) {
  // A gateway's or a failing-over server's answer settles nothing: the same
  // bytes go again under the same key, which the server answers once.
  std::atomic<int> calls{0};
  FakeServer server([&](const FakeRequest&) -> FakeResponse {
    switch (++calls) {
      case 1: return {503, R"({"error":{"code":"store_error","message":"the database is unavailable"}})"};
      case 2: return {504, "gateway timeout", "text/plain"};
      case 3: return {502, "bad gateway", "text/plain"};
      default: return {201, kSubmitted};
    }
  });
  use_server(server.url());
  in_.str("kind: Pipeline\n");
  EXPECT_EQ(run({"submit", "-f", "-"}), 0) << err();
  auto requests = server.requests();
  ASSERT_EQ(requests.size(), 4u);
  const std::string key = requests[0].header("idempotency-key");
  EXPECT_EQ(key.size(), 40u) << key;  // 160 random bits, hex
  for (const auto& r : requests) {
    EXPECT_EQ(r.header("idempotency-key"), key);
    EXPECT_EQ(r.body, "kind: Pipeline\n");
  }
  EXPECT_EQ(slept_, (std::vector<Millis>{1000, 2000, 4000}));
  EXPECT_NE(err().find("submit got no settled answer (the database is unavailable); trying again in 1s with the "
                       "same idempotency key (attempt 2)"),
            std::string::npos)
      << err();
  EXPECT_NE(err().find("trying again in 4s with the same idempotency key (attempt 4)"), std::string::npos) << err();
  EXPECT_EQ(out(), "pipeline p-1 (ft) submitted\nTASK ID   NAME      STATE\nt-1       prepare   Queued\n");

  // The next submit is another request: a key of its own.
  in_.clear();
  in_.str("kind: Pipeline\n");
  EXPECT_EQ(run({"submit", "-f", "-"}), 0) << err();
  EXPECT_NE(server.last().header("idempotency-key"), key);
}

TEST_F(CliTest, SubmitSendsAnAnswerThatSettlesItOnce) {
  // Refusals (and a 500, which no retry mends) are final.
  for (int status : {422, 400, 403, 500}) {
    FakeServer server([&](const FakeRequest&) -> FakeResponse {
      return {status, R"({"error":{"code":"refused","message":"no, )" + std::to_string(status) + R"("}})"};
    });
    use_server(server.url());
    slept_.clear();
    in_.clear();
    in_.str("kind: Pipeline\n");
    EXPECT_EQ(run({"submit", "-f", "-"}), 1) << status;
    EXPECT_EQ(server.requests().size(), 1u) << status;
    EXPECT_TRUE(slept_.empty()) << status;
    EXPECT_NE(err().find("no, " + std::to_string(status)), std::string::npos) << err();
  }
}

TEST_F(CliTest, SubmitWithoutAnyAnswerTriesFourTimesThenExitsOne) {
  ClosedPort closed;
  use_server(closed.url());
  in_.str("kind: Pipeline\n");
  EXPECT_EQ(run({"submit", "-f", "-"}), 1);
  EXPECT_EQ(slept_, (std::vector<Millis>{1000, 2000, 4000}));
  EXPECT_NE(err().find("trying again in 2s with the same idempotency key (attempt 3)"), std::string::npos) << err();
  EXPECT_NE(err().find("error: cannot reach " + closed.url()), std::string::npos) << err();
}

TEST_F(CliTest, SubmitOfAMissingFileExitsOne) {
  EXPECT_EQ(run({"submit", "-f", home_.path() + "/nope.yaml"}), 1);
  EXPECT_NE(err().find("nope.yaml"), std::string::npos);
}

const char* kTwoDocuments = R"(apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: rg-x}
spec:
  clusters: [c1]
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: pg-y}
spec:
  default_resource_group: rg-x
)";

TEST_F(CliTest, ApplySendsEachDocumentByKind) {
  FakeServer server(Routes()
                        .on("PUT /api/v1/resource-groups/rg-x", {200, R"({"kind":"ResourceGroup"})"})
                        .on("PUT /api/v1/project-groups/pg-y", {201, R"({"kind":"ProjectGroup"})"})
                        .handler());
  use_server(server.url());
  in_.str(kTwoDocuments);
  EXPECT_EQ(run({"resource-groups", "apply", "-f", "-"}), 0) << err();
  EXPECT_EQ(out(), "resourcegroup/rg-x applied\nprojectgroup/pg-y applied\n");
  auto reqs = server.requests();
  ASSERT_EQ(reqs.size(), 2u);
  EXPECT_EQ(reqs[0].header("content-type"), "application/json");
  auto first = parse_json(reqs[0].body);
  ASSERT_TRUE(first.ok()) << reqs[0].body;
  EXPECT_EQ(dump(first->at("spec")), R"({"clusters":["c1"]})");
}

TEST_F(CliTest, ApplyChecksEveryDocumentBeforeSendingAny) {
  FakeServer server(Routes().handler());
  use_server(server.url());
  in_.str(std::string(kTwoDocuments) + "---\nkind: Pipeline\nmetadata: {name: p}\n");
  EXPECT_EQ(run({"apply", "-f", "-"}), 1);
  EXPECT_NE(err().find("document 3"), std::string::npos) << err();
  EXPECT_TRUE(server.requests().empty());
}

TEST_F(CliTest, ApplyStopsAtTheFirstRefusalNamingTheDocument) {
  FakeServer server(
      Routes()
          .on("PUT /api/v1/resource-groups/rg-x",
              {400, R"({"error":{"code":"invalid_field","message":"spec.clusters[0]: unknown cluster"}})"})
          .handler());
  use_server(server.url());
  in_.str(kTwoDocuments);
  EXPECT_EQ(run({"project-groups", "apply", "-f", "-"}), 1);
  EXPECT_EQ(err(), "error: resourcegroup/rg-x: spec.clusters[0]: unknown cluster\n");
  EXPECT_EQ(server.requests().size(), 1u);
}

TEST_F(CliTest, LogsFollowStreamsToStdout) {
  FakeServer server(Routes().on("GET /api/v1/tasks/t-1/logs", {200, "step 1\nstep 2\n", "text/plain"}).handler());
  use_server(server.url());
  EXPECT_EQ(run({"tasks", "logs", "t-1", "-f", "--attempt", "2"}), 0) << err();
  EXPECT_EQ(out(), "step 1\nstep 2\n");
  EXPECT_EQ(server.last().query, "attempt=2&follow=true");

  EXPECT_EQ(run({"tasks", "logs", "t-1"}), 0) << err();
  EXPECT_EQ(out(), "step 1\nstep 2\n");
  EXPECT_EQ(server.last().query, "");
}

TEST_F(CliTest, LogsOfAnUnknownTaskExitOneWithNothingOnStdout) {
  FakeServer server(Routes().handler());
  use_server(server.url());
  EXPECT_EQ(run({"tasks", "logs", "t-9", "-f"}), 1);
  EXPECT_EQ(out(), "");
  EXPECT_NE(err().find("no route"), std::string::npos);
}

TEST_F(CliTest, NodeLabelsAndMaintenanceArePatches) {
  const char* node = R"({"cluster_id":"c1","name":"n1","ready":true,"capacity":{"cpu":"8"}})";
  FakeServer server(Routes().on("PATCH /api/v1/clusters/c1/nodes/n1", {200, node}).handler());
  use_server(server.url());
  EXPECT_EQ(run({"nodes", "label", "c1", "n1", "zone=a", "rack-"}), 0) << err();
  EXPECT_EQ(server.last().body, R"({"labels":{"zone":"a","rack":""}})");
  EXPECT_EQ(run({"nodes", "maintenance", "c1", "n1", "on"}), 0) << err();
  EXPECT_EQ(server.last().body, R"({"maintenance":true})");
  EXPECT_NE(out().find("c1        n1"), std::string::npos) << out();
}

TEST_F(CliTest, ClusterCreateAndBootstrapToken) {
  FakeServer server(Routes()
                        .on("POST /api/v1/clusters", {201, R"({"id":"c1","executor":"slurm"})"})
                        .on("GET /api/v1/clusters/c1", {200, R"({"id":"c1","executor":"slurm"})"})
                        .on("POST /api/v1/clusters/c1/bootstrap-tokens",
                            {201, R"({"token":"cpb_x","cluster_id":"c1","expires_at":1767312000000})"})
                        .handler());
  use_server(server.url());
  EXPECT_EQ(run({"clusters", "create", "c1", "--executor", "slurm", "--storage-pool", "p1", "--label", "region=east"}),
            0)
      << err();
  EXPECT_EQ(server.last().body,
            R"({"id":"c1","display_name":"","executor":"slurm","storage_pool":"p1","labels":{"region":"east"}})");

  EXPECT_EQ(run({"clusters", "token", "c1", "--ttl", "3600"}), 0) << err();
  EXPECT_NE(out().find("cpb_x"), std::string::npos);
  EXPECT_NE(out().find("cubeplane agent --server " + server.url() + " --cluster-id c1 --token cpb_x --executor slurm"),
            std::string::npos)
      << out();
  auto reqs = server.requests();
  EXPECT_EQ(reqs[reqs.size() - 2].body, R"({"ttl_s":3600})");
}

TEST_F(CliTest, ClustersConfirmLostPostsAndSaysWhatItConfirmed) {
  FakeServer server(
      Routes()
          .on("POST /api/v1/clusters/cs/confirm-lost",
              {200, R"({"cluster":"cs","confirmed":[{"attempt":"t-1.1","task":"t-1","requeued":true}],
                 "message":"1 attempt(s) of cluster cs confirmed lost; 1 task(s) requeued in storage pool p1",
                 "message_zh":"已确认集群 cs 的 1 个尝试丢失；1 个任务在存储池 p1 中重新排队"})"})
          .on("POST /api/v1/clusters/done/confirm-lost",
              {200, R"({"cluster":"done","confirmed":[],
                 "message":"nothing confirmed: cluster done has no attempt in state Unknown"})"})
          .on("POST /api/v1/clusters/up/confirm-lost",
              {409, R"({"error":{"code":"cluster_not_offline",
                 "message":"cluster up is online: its agent reports its attempts itself"}})"})
          .handler());
  use_server(server.url());
  EXPECT_EQ(run({"clusters", "confirm-lost", "cs"}), 0) << err();
  EXPECT_EQ(server.last().method, "POST");
  EXPECT_EQ(out(),
            "1 attempt(s) of cluster cs confirmed lost; 1 task(s) requeued in storage pool p1\n"
            "  t-1.1 (task t-1): requeued\n");
  EXPECT_EQ(run({"--lang", "zh", "clusters", "confirm-lost", "cs"}), 0) << err();
  EXPECT_NE(out().find("已确认集群 cs 的 1 个尝试丢失"), std::string::npos) << out();
  // Nothing left Unknown: said plainly, and not an error.
  EXPECT_EQ(run({"clusters", "confirm-lost", "done"}), 0) << err();
  EXPECT_EQ(out(), "nothing confirmed: cluster done has no attempt in state Unknown\n");
  EXPECT_EQ(run({"clusters", "confirm-lost", "up"}), 1);
  EXPECT_NE(err().find("its agent reports its attempts itself"), std::string::npos) << err();
  // The help says to check the jobs first.
  EXPECT_EQ(run({"clusters", "confirm-lost", "--help"}), 0);
  EXPECT_NE(out().find("squeue"), std::string::npos) << out();
  EXPECT_NE(out().find("kubectl"), std::string::npos) << out();
  EXPECT_NE(out().find("--server URL"), std::string::npos) << out();
}

TEST_F(CliTest, ClustersShowTheirUnknownAttempts) {
  const std::string cs = R"({"id":"cs","executor":"slurm","state":"offline","unknown_attempts":2})";
  FakeServer server(Routes()
                        .on("GET /api/v1/clusters", {200, R"({"items":[)" + cs + R"(],"next_cursor":""})"})
                        .on("GET /api/v1/clusters/cs", {200, cs})
                        .handler());
  use_server(server.url());
  EXPECT_EQ(run({"clusters", "ls"}), 0) << err();
  EXPECT_NE(out().find("offline (2 unknown)"), std::string::npos) << out();
  EXPECT_EQ(run({"clusters", "get", "cs"}), 0) << err();
  EXPECT_NE(out().find("cubeplane clusters confirm-lost cs"), std::string::npos) << out();
}

TEST_F(CliTest, ListAllFollowsCursorsAndOnePageHintsAtMore) {
  FakeServer server([](const FakeRequest& req) {
    if (req.query.find("cursor=c1") != std::string::npos) {
      return FakeResponse{200, R"({"items":[{"id":1,"type":"b"}],"next_cursor":""})"};
    }
    return FakeResponse{200, R"({"items":[{"id":0,"type":"a"}],"next_cursor":"c1"})"};
  });
  use_server(server.url());
  EXPECT_EQ(run({"events", "--object-kind", "task", "--object-id", "t-1", "-o", "json"}), 0) << err();
  EXPECT_NE(out().find("\"next_cursor\": \"c1\""), std::string::npos);
  EXPECT_EQ(server.last().query, "object_kind=task&object_id=t-1");

  EXPECT_EQ(run({"events"}), 0) << err();
  EXPECT_NE(err().find("--all"), std::string::npos);

  EXPECT_EQ(run({"events", "--all", "-o", "json"}), 0) << err();
  auto all = parse_json(out());
  ASSERT_TRUE(all.ok()) << out();
  EXPECT_EQ(all->at("items").as_array().size(), 2u);
  EXPECT_EQ(err(), "");
}

TEST_F(CliTest, UsageCsvAndTable) {
  FakeServer server([](const FakeRequest& req) {
    if (req.header("accept") == "text/csv") return FakeResponse{200, "cluster,gpu_seconds\nc1,3600\n", "text/csv"};
    return FakeResponse{200, R"({"items":[{"cluster":"c1","gpu_seconds":3600,"attempts":1}]})"};
  });
  use_server(server.url());
  EXPECT_EQ(run({"usage", "--from", "2026-01-01", "--to", "2026-02-01", "--by", "cluster", "--csv"}), 0) << err();
  EXPECT_EQ(out(), "cluster,gpu_seconds\nc1,3600\n");
  EXPECT_EQ(server.last().query, "from=2026-01-01&to=2026-02-01&group_by=cluster");

  EXPECT_EQ(run({"usage", "--by", "cluster, gpu_type"}), 0) << err();
  EXPECT_EQ(server.last().query, "group_by=cluster%2Cgpu_type");
  EXPECT_NE(out().find("c1        1.0"), std::string::npos) << out();
}

// usage advice: one row per step, the advice in the language asked for;
// usage rebuild posts the months. Neither runs the parent's report.
TEST_F(CliTest, UsageAdviceAndRebuild) {
  FakeServer server(
      Routes()
          .on("GET /api/v1/usage/advice",
              {200, R"({"items":[{"project_group":"pa","step":"finetune/train","attempts":3,"samples":360,)"
                    R"("request":{"cpu_milli":8000,"memory_bytes":68719476736,"gpus":0},)"
                    R"("cpu":{"p95_milli":1200},"memory":{"max_bytes":10200547328},"gpu":null,)"
                    R"("advice":[{"resource":"cpu","kind":"lower","message":"requests 8 CPUs, uses 1.2 at p95: 2 would do",)"
                    R"("message_zh":"申请 8 个 CPU，p95 实际使用 1.2 个：2 个即可"}]}]})"})
          .on("POST /api/v1/usage/rebuild",
              {200, R"({"from":"2026-11-01T00:00:00.000Z","to":"2027-01-01T00:00:00.000Z","attempts":42,)"
                    R"("rows_removed":10,"rows_written":12})"})
          .handler());
  use_server(server.url());
  EXPECT_EQ(run({"usage", "advice", "--days", "7", "--project-group", "pa"}), 0) << err();
  EXPECT_EQ(server.last().query, "days=7&project_group=pa");
  EXPECT_NE(out().find("finetune/train"), std::string::npos) << out();
  EXPECT_NE(out().find("9.5 GiB"), std::string::npos) << out();
  EXPECT_NE(out().find("2 would do"), std::string::npos) << out();
  EXPECT_EQ(run({"--lang", "zh", "usage", "advice"}), 0) << err();
  EXPECT_NE(out().find("2 个即可"), std::string::npos) << out();

  EXPECT_EQ(run({"usage", "rebuild", "--from", "2026-11", "--to", "2027-01"}), 0) << err();
  EXPECT_EQ(server.last().body, R"({"from":"2026-11","to":"2027-01"})");
  EXPECT_NE(out().find("2026-11 .. 2027-01: 42 attempts"), std::string::npos) << out();
}

TEST_F(CliTest, UsersAndTokens) {
  FakeServer server(Routes()
                        .on("POST /api/v1/users", {201, R"({"name":"bob","role":"viewer","created_at":0})"})
                        .on("POST /api/v1/users/bob/tokens",
                            {201, R"({"id":"tok-1","token":"cpt_s","user":"bob","expires_at":0})"})
                        .handler());
  use_server(server.url());
  EXPECT_EQ(run({"users", "create", "bob", "--role", "viewer"}), 0) << err();
  EXPECT_EQ(server.last().body, R"({"name":"bob","role":"viewer"})");
  EXPECT_EQ(run({"tokens", "create", "--user", "bob", "--description", "ci"}), 0) << err();
  EXPECT_EQ(server.last().body, R"({"description":"ci"})");
  EXPECT_NE(out().find("cpt_s"), std::string::npos);
}

TEST_F(CliTest, ExplainPrintsSentences) {
  FakeServer server(Routes()
                        .on("GET /api/v1/tasks/t-1/explain",
                            {200, R"({"task_id":"t-1","state":"Queued",
                                      "reasons":[{"message":"no GPU free","message_zh":"没有空闲 GPU"}]})"})
                        .handler());
  use_server(server.url());
  EXPECT_EQ(run({"tasks", "explain", "t-1"}), 0) << err();
  EXPECT_EQ(out(), "Task t-1 is Queued.\nWhy it waits:\n  - no GPU free\nIt has not run yet.\n");
}

TEST_F(CliTest, CancelPostsAndReportsTheState) {
  FakeServer server(Routes().on("POST /api/v1/tasks/t-1/cancel", {200, R"({"id":"t-1","state":"Running"})"}).handler());
  use_server(server.url());
  EXPECT_EQ(run({"tasks", "cancel", "t-1"}), 0) << err();
  EXPECT_EQ(out(), "task t-1: cancel requested (state Running)\n");
}

TEST_F(CliTest, DeleteAGroup) {
  FakeServer server(Routes().on("DELETE /api/v1/project-groups/pg-y", {200, "{}"}).handler());
  use_server(server.url());
  EXPECT_EQ(run({"project-groups", "delete", "pg-y"}), 0) << err();
  EXPECT_EQ(out(), "projectgroup/pg-y deleted\n");
}

TEST_F(CliTest, VersionNeedsNoServer) {
  EXPECT_EQ(run({"version"}), 0);
  EXPECT_EQ(out(), "cubeplane 0.1.0\n");
}

TEST_F(CliTest, MainAddsItsOwnVerbsWhichSetTheAction) {
  auto add = [](CLI::App& app, ClientContext& ctx) {
    auto* server = app.add_subcommand("server", "Run the control plane");
    auto config = std::make_shared<std::string>();
    server->add_option("--config", *config)->required();
    server->callback([&ctx, config] { ctx.action = [config] { return *config == "ok.yaml" ? 0 : 7; }; });
  };
  EXPECT_EQ(run({"server", "--config", "ok.yaml"}, add), 0);
  EXPECT_EQ(run({"server", "--config", "bad.yaml"}, add), 7);
  EXPECT_EQ(run({"server"}, add), 2);
}

}  // namespace
}  // namespace cp::cli
