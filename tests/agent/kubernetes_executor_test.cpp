// The Kubernetes executor against a fake kube-apiserver that answers as the
// real one does (fake_kube_apiserver.h): Status objects, resourceVersions,
// chunked watches with 410 Gone. Waits poll with a deadline; time that
// matters (retries, stop deadlines) runs on a SimulatedClock.
#include "agent/executors/kubernetes_executor.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "fake_kube_apiserver.h"
#include "test_util.h"

namespace cp {
namespace {

using testing::FakeKubeApiServer;
using testing::slurp;
using testing::TempDir;
using testing::wait_until;

StartOrder order_for(const std::string& task, int number, int replicas = 1) {
  StartOrder o;
  o.task_id = task;
  o.attempt_number = number;
  o.attempt_id = task + "." + std::to_string(number);
  o.epoch = number;
  o.command = {"python", "train.py"};
  o.image = "pytorch/pytorch:2.3.0";
  for (int r = 0; r < replicas; ++r) o.placements.push_back(ReplicaPlacement{r, "node-" + std::to_string(r), {}});
  o.resources = Resources::parse_or_die("cpu:2,memory:4Gi");
  o.env = {{"EPOCHS", "3"}};
  o.grace_s = 20;
  return o;
}

std::string env_of(const json::value& job, const std::string& name) {
  for (const auto& e : job.at("spec").at("template").at("spec").at("containers").at(0).at("env").as_array()) {
    if (e.at("name").as_string() == name) return std::string(e.at("value").as_string());
  }
  return "<unset>";
}

std::optional<AttemptReport> report(KubernetesExecutor& ex, const std::string& id) {
  for (auto& r : ex.poll()) {
    if (r.attempt_id == id) return r;
  }
  return std::nullopt;
}

bool state_is(KubernetesExecutor& ex, const std::string& id, AttemptState s) {
  auto r = report(ex, id);
  return r && r->state == s;
}

class KubernetesExecutorTest : public ::testing::Test {
 protected:
  std::unique_ptr<KubernetesExecutor> make(std::string token = "good-token") {
    KubernetesExecutorConfig cfg;
    cfg.kube_namespace = "ml";
    cfg.data_dir = dir.path();
    cfg.default_image = "busybox:1.36";
    cfg.relist_backoff_ms = 20;
    KubeConfig kube;
    kube.server = api.url();
    kube.token = std::move(token);
    return std::make_unique<KubernetesExecutor>(cfg, kube, clock);
  }

  TempDir dir;
  FakeKubeApiServer api;
  SimulatedClock clock;
};

// The Job of one replica has every field the brief names, and nothing that
// would let Kubernetes run it twice.
TEST(JobManifest, CpuOrderBuildsAPinnedSingleShotJob) {
  KubernetesExecutorConfig cfg;
  cfg.kube_namespace = "ml";
  cfg.checkpoint_pvc = "cubeplane-checkpoints";
  cfg.ttl_seconds_after_finished = 600;
  auto o = order_for("t-01jabcdefgh0123456789", 2);
  auto m = job_manifest(o, 0, cfg);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const auto& job = *m;
  EXPECT_EQ(job.at("apiVersion"), "batch/v1");
  EXPECT_EQ(job.at("kind"), "Job");
  EXPECT_EQ(job.at("metadata").at("name"), "cp-t-01jabcdefgh0123456789-2-r0");
  EXPECT_EQ(job.at("metadata").at("namespace"), "ml");
  const auto& labels = job.at("metadata").at("labels");
  EXPECT_EQ(labels.at("cubeplane.io/attempt"), "t-01jabcdefgh0123456789.2");
  EXPECT_EQ(labels.at("cubeplane.io/task"), "t-01jabcdefgh0123456789");
  EXPECT_EQ(labels.at("cubeplane.io/replica"), "0");
  EXPECT_EQ(labels.at("app.kubernetes.io/managed-by"), "cubeplane");
  const auto& spec = job.at("spec");
  EXPECT_EQ(spec.at("completions"), 1);
  EXPECT_EQ(spec.at("backoffLimit"), 0);
  EXPECT_EQ(spec.at("ttlSecondsAfterFinished"), 600);
  EXPECT_FALSE(spec.as_object().contains("activeDeadlineSeconds"));
  EXPECT_EQ(spec.at("template").at("metadata").at("labels"), labels);
  const auto& pod = spec.at("template").at("spec");
  EXPECT_EQ(pod.at("restartPolicy"), "Never");
  EXPECT_EQ(pod.at("terminationGracePeriodSeconds"), 20);
  EXPECT_EQ(pod.at("nodeSelector").at("kubernetes.io/hostname"), "node-0");
  const auto& c = pod.at("containers").at(0);
  EXPECT_EQ(c.at("image"), "pytorch/pytorch:2.3.0");
  EXPECT_EQ(c.at("command"), (json::array{"python", "train.py"}));
  EXPECT_EQ(c.at("resources").at("requests").at("cpu"), "2");
  EXPECT_EQ(c.at("resources").at("limits").at("memory"), "4Gi");
  EXPECT_FALSE(c.at("resources").at("limits").as_object().contains("nvidia.com/gpu"));
  EXPECT_EQ(env_of(job, "EPOCHS"), "3");
  EXPECT_EQ(env_of(job, "CUBEPLANE_ATTEMPT_ID"), "t-01jabcdefgh0123456789.2");
  EXPECT_EQ(env_of(job, "CUBEPLANE_REPLICA"), "0");
  EXPECT_EQ(env_of(job, "CUBEPLANE_REPLICAS"), "1");
  EXPECT_EQ(env_of(job, "CUBEPLANE_NODE"), "node-0");
  EXPECT_EQ(env_of(job, "CUBEPLANE_RESUME"), "1");
  EXPECT_EQ(env_of(job, "CUBEPLANE_RESTART_COUNT"), "1");
  EXPECT_EQ(env_of(job, "NVIDIA_VISIBLE_DEVICES"), "void");  // no GPU asked: none seen
  // The checkpoint survives the pod: a PVC with the task's subPath, not an emptyDir.
  EXPECT_EQ(env_of(job, "CUBEPLANE_CHECKPOINT_DIR"), "/cubeplane/checkpoints");
  EXPECT_EQ(c.at("volumeMounts").at(0).at("subPath"), "t-01jabcdefgh0123456789");
  EXPECT_EQ(pod.at("volumes").at(0).at("persistentVolumeClaim").at("claimName"), "cubeplane-checkpoints");
}

// GPUs become nvidia.com/gpu, MIG slices nvidia.com/mig-<profile> with the
// configured instance names; the platform's variables beat the order's.
TEST(JobManifest, GpuAndMigResources) {
  KubernetesExecutorConfig cfg;
  cfg.gpu_products["nvidia-a100-sxm4-80gb"] = "NVIDIA-A100-SXM4-80GB";
  cfg.mig_instances["node-0"] = {"MIG-aaaa", "MIG-bbbb", "MIG-cccc"};
  auto o = order_for("t-gpu", 1);
  o.resources = Resources::parse_or_die("cpu:8,memory:64Gi,gpu/nvidia-a100-sxm4-80gb:2");
  o.env["CUDA_VISIBLE_DEVICES"] = "7";
  auto m = job_manifest(o, 0, cfg);
  ASSERT_TRUE(m.ok()) << m.error().message;
  const auto& pod = m->at("spec").at("template").at("spec");
  EXPECT_EQ(pod.at("containers").at(0).at("resources").at("limits").at("nvidia.com/gpu"), "2");
  EXPECT_EQ(pod.at("nodeSelector").at("nvidia.com/gpu.product"), "NVIDIA-A100-SXM4-80GB");
  EXPECT_EQ(env_of(*m, "CUDA_VISIBLE_DEVICES"), "0,1");
  EXPECT_EQ(env_of(*m, "CUBEPLANE_RESUME"), "<unset>");

  auto mig = order_for("t-mig", 1);
  mig.resources = Resources::parse_or_die("cpu:2,memory:8Gi,gpu/mig-1g.10gb:1");
  mig.placements[0].gpu_indices = {2};
  auto mm = job_manifest(mig, 0, cfg);
  ASSERT_TRUE(mm.ok()) << mm.error().message;
  const auto& limits = mm->at("spec").at("template").at("spec").at("containers").at(0).at("resources").at("limits");
  EXPECT_EQ(limits.at("nvidia.com/mig-1g.10gb"), "1");
  EXPECT_FALSE(limits.as_object().contains("nvidia.com/gpu"));
  EXPECT_EQ(env_of(*mm, "NVIDIA_VISIBLE_DEVICES"), "MIG-cccc");
  mig.placements[0].gpu_indices = {5};
  EXPECT_FALSE(job_manifest(mig, 0, cfg).ok());  // an instance the node does not have
}

TEST(JobManifest, NamesAreDnsSafeBoundedAndDistinct) {
  const std::string long_task = "t-" + std::string(80, 'A');
  const std::string a = job_name(long_task + ".1", 3), b = job_name(long_task + ".2", 3);
  EXPECT_LE(a.size(), 63u);
  EXPECT_NE(a, b);
  for (char c : a) EXPECT_TRUE((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') << a;
  EXPECT_EQ(a, job_name(long_task + ".1", 3));  // deterministic
  auto o = order_for("t-x", 1);
  o.image.clear();
  EXPECT_FALSE(job_manifest(o, 0, KubernetesExecutorConfig{}).ok());  // no image, no default
  o.image = "busybox";
  EXPECT_FALSE(job_manifest(o, 1, KubernetesExecutorConfig{}).ok());  // no such replica
}

// start POSTs one Job per replica; a second start, or one that meets an
// existing Job (409 AlreadyExists), creates nothing new and is not an error.
TEST_F(KubernetesExecutorTest, StartCreatesJobsIdempotently) {
  auto ex = make();
  auto o = order_for("t-start", 1, 2);
  ASSERT_TRUE(ex->start(o).ok());
  ASSERT_EQ(api.requests("POST", "/jobs").size(), 2u);
  auto posted = json::parse(api.requests("POST", "/jobs")[1].body);
  EXPECT_EQ(posted.at("metadata").at("name"), "cp-t-start-1-r1");
  EXPECT_EQ(posted.at("spec").at("template").at("spec").at("nodeSelector").at("kubernetes.io/hostname"), "node-1");
  EXPECT_EQ(api.requests("POST", "/jobs")[0].path, "/apis/batch/v1/namespaces/ml/jobs");
  ASSERT_TRUE(ex->start(o).ok());
  EXPECT_EQ(api.requests("POST", "/jobs").size(), 2u);
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, o.attempt_id, AttemptState::Running); }));

  // Another data dir (a journal lost): the POST meets 409 and that is "started".
  TempDir other;
  KubernetesExecutorConfig cfg;
  cfg.kube_namespace = "ml";
  cfg.data_dir = other.path();
  KubeConfig kube{api.url(), "", false, "good-token", "", "", "", ""};
  KubernetesExecutor ex2(cfg, kube, clock);
  ASSERT_TRUE(ex2.start(o).ok());
  EXPECT_EQ(api.requests("POST", "/jobs").size(), 4u);
  EXPECT_EQ(api.job_count(), 2u);
  auto r = report(ex2, o.attempt_id);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, AttemptState::Running);
  EXPECT_TRUE(ex2.engine().ok) << ex2.engine().message;
}

// Pod phase and container state map to attempt states and exit codes.
TEST_F(KubernetesExecutorTest, PodPhasesMapToStates) {
  auto ex = make();
  auto ok = order_for("t-ok", 1), bad = order_for("t-bad", 1), oom = order_for("t-oom", 1), pull = order_for("t-pull", 1);
  for (auto* o : {&ok, &bad, &oom, &pull}) ASSERT_TRUE(ex->start(*o).ok());
  const std::string p_ok = api.pod_of("cp-t-ok-1-r0"), p_bad = api.pod_of("cp-t-bad-1-r0"),
                    p_oom = api.pod_of("cp-t-oom-1-r0"), p_pull = api.pod_of("cp-t-pull-1-r0");
  ASSERT_FALSE(p_ok.empty());
  api.pod_waiting(p_pull, "ImagePullBackOff", "Back-off pulling image \"nope:1\"");
  EXPECT_TRUE(wait_until([&] {
    auto r = report(*ex, pull.attempt_id);
    return r && r->message.find("ImagePullBackOff: Back-off pulling image") != std::string::npos;
  }));
  EXPECT_EQ(report(*ex, pull.attempt_id)->state, AttemptState::Running);
  api.pod_running(p_ok);
  api.pod_exited(p_ok, 0);
  api.pod_exited(p_bad, 3);
  api.pod_exited(p_oom, 137, "OOMKilled");
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, ok.attempt_id, AttemptState::Succeeded); }));
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, bad.attempt_id, AttemptState::Failed); }));
  EXPECT_EQ(report(*ex, bad.attempt_id)->exit_code, 3);
  EXPECT_EQ(report(*ex, bad.attempt_id)->message, "exited with code 3");
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, oom.attempt_id, AttemptState::Failed); }));
  EXPECT_EQ(report(*ex, oom.attempt_id)->exit_code, 137);
  EXPECT_EQ(report(*ex, oom.attempt_id)->message, "exited with code 137 (OOMKilled)");
  // A pod that vanishes while it runs (deleted by hand): Lost, so the task runs again.
  api.pod_running(p_pull);
  api.delete_pod(p_pull);
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, pull.attempt_id, AttemptState::Lost); }));
}

// Gang: the first failing replica fails the attempt and its siblings' Jobs
// are deleted.
TEST_F(KubernetesExecutorTest, FirstFailureFailsTheGangAndStopsSiblings) {
  auto ex = make();
  auto o = order_for("t-gang", 1, 2);
  ASSERT_TRUE(ex->start(o).ok());
  api.pod_running(api.pod_of("cp-t-gang-1-r0"));
  api.pod_exited(api.pod_of("cp-t-gang-1-r1"), 2);
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, o.attempt_id, AttemptState::Failed); }));
  auto r = report(*ex, o.attempt_id);
  EXPECT_EQ(r->exit_code, 2);
  EXPECT_EQ(r->message, "replica 1: exited with code 2");
  auto deletes = api.requests("DELETE", "/jobs/cp-t-gang-1-r0");
  ASSERT_EQ(deletes.size(), 1u);
  EXPECT_EQ(json::parse(deletes[0].body).at("propagationPolicy"), "Foreground");
}

// A watch whose resourceVersion expired (410 Gone) lists again and still
// sees the pod end; a dropped watch is resumed.
TEST_F(KubernetesExecutorTest, WatchRelistsAfterGoneAndSeesTheEnd) {
  auto ex = make();
  auto o = order_for("t-watch", 1);
  ASSERT_TRUE(ex->start(o).ok());
  ASSERT_TRUE(wait_until([&] { return ex->lists() == 1 && api.open_watches() == 1; }));
  const std::string pod = api.pod_of("cp-t-watch-1-r0");
  api.pod_running(pod);
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, o.attempt_id, AttemptState::Running); }));
  api.bookmark();
  api.compact();  // open watch: ERROR 410 -> relist
  ASSERT_TRUE(wait_until([&] { return ex->lists() == 2 && api.watches_started() == 2 && api.open_watches() == 1; }));
  api.drop_watches();  // dropped: watched again
  ASSERT_TRUE(wait_until([&] { return api.watches_started() >= 3 && api.open_watches() == 1; }));
  api.pod_exited(pod, 0);
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, o.attempt_id, AttemptState::Succeeded); }));
}

// stop deletes the Jobs with Foreground propagation and the stop's grace;
// the final state follows the reason, not the 143 the pods exit with.
TEST_F(KubernetesExecutorTest, StopDeletesForegroundWithGrace) {
  auto ex = make();
  auto o = order_for("t-stop", 1), p = order_for("t-pre", 1);
  ASSERT_TRUE(ex->start(o).ok());
  ASSERT_TRUE(ex->start(p).ok());
  const std::string pod = api.pod_of("cp-t-pre-1-r0");
  api.pod_waiting(pod, "ContainerCreating", "");
  ASSERT_TRUE(wait_until([&] {  // the executor has seen the pod
    auto r = report(*ex, p.attempt_id);
    return r && r->message.find("ContainerCreating") != std::string::npos;
  }));
  ex->stop(o.attempt_id, "cancel", 20);
  ex->stop(p.attempt_id, "preempt", 5);
  auto del = api.requests("DELETE", "/jobs/cp-t-stop-1-r0");
  ASSERT_EQ(del.size(), 1u);
  auto body = json::parse(del[0].body);
  EXPECT_EQ(body.at("propagationPolicy"), "Foreground");
  EXPECT_EQ(body.at("gracePeriodSeconds"), 20);
  EXPECT_EQ(json::parse(api.requests("DELETE", "/jobs/cp-t-pre-1-r0")[0].body).at("gracePeriodSeconds"), 5);
  // Less grace than the pod's own: the pod is told so directly.
  auto pod_del = api.requests("DELETE", "/pods/" + pod);
  ASSERT_EQ(pod_del.size(), 1u);
  EXPECT_EQ(json::parse(pod_del[0].body).at("gracePeriodSeconds"), 5);
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, o.attempt_id, AttemptState::Cancelled); }));
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, p.attempt_id, AttemptState::Preempted); }));
  EXPECT_EQ(report(*ex, p.attempt_id)->message, "preempted");
  ex->stop(o.attempt_id, "cancel", 1);  // ended: no-op
  EXPECT_EQ(api.requests("DELETE", "/jobs/cp-t-stop-1-r0").size(), 1u);
}

// A stop whose pods never confirm (node unreachable) ends after grace + slack.
TEST_F(KubernetesExecutorTest, StopWithoutConfirmationEndsAfterGraceAndSlack) {
  auto ex = make();
  api.set_auto_pods(false);
  auto o = order_for("t-slack", 1);
  ASSERT_TRUE(ex->start(o).ok());
  ASSERT_TRUE(wait_until([&] { return ex->lists() >= 1; }));
  // Simulate a delete the API accepts but that never completes.
  api.forbid("delete", "jobs");
  ex->stop(o.attempt_id, "cancel", 10);
  EXPECT_FALSE(ex->engine().ok);
  EXPECT_EQ(report(*ex, o.attempt_id)->state, AttemptState::Stopping);
  clock.advance_ms(10'000 + 59'000);
  EXPECT_EQ(report(*ex, o.attempt_id)->state, AttemptState::Stopping);
  clock.advance_ms(1'000);
  EXPECT_EQ(report(*ex, o.attempt_id)->state, AttemptState::Cancelled);
}

// Logs come from pods/<pod>/log, sliced at the shipped offset, bounded by
// limitBytes; the last piece of an ended replica is final.
TEST_F(KubernetesExecutorTest, LogsByOffset) {
  auto ex = make();
  auto o = order_for("t-log", 1);
  ASSERT_TRUE(ex->start(o).ok());
  const std::string pod = api.pod_of("cp-t-log-1-r0");
  api.set_log(pod, "hello\nworld\n");
  api.pod_running(pod);
  std::vector<LogPiece> pieces;
  ASSERT_TRUE(wait_until([&] {  // once the watch has seen it run
    pieces = ex->read_new_logs(1 << 20);
    return !pieces.empty();
  }));
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].offset, 0);
  EXPECT_EQ(pieces[0].data, "hello\nworld\n");
  EXPECT_FALSE(pieces[0].final);
  // Not confirmed: read again from the same offset.
  EXPECT_EQ(ex->read_new_logs(1 << 20).at(0).offset, 0);
  ex->logs_shipped(o.attempt_id, 0, 6);
  api.set_log(pod, "hello\nworld\nbye\n");
  api.pod_exited(pod, 0);
  ASSERT_TRUE(wait_until([&] { return state_is(*ex, o.attempt_id, AttemptState::Succeeded); }));
  pieces = ex->read_new_logs(4);  // budget 4: limitBytes = 6 + 4
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].offset, 6);
  EXPECT_EQ(pieces[0].data, "worl");
  EXPECT_FALSE(pieces[0].final);
  EXPECT_EQ(api.requests("GET", "/log").back().query.at("limitBytes"), "10");
  ex->logs_shipped(o.attempt_id, 0, 10);
  pieces = ex->read_new_logs(1 << 20);
  ASSERT_EQ(pieces.size(), 1u);
  EXPECT_EQ(pieces[0].data, "d\nbye\n");
  EXPECT_TRUE(pieces[0].final);
  // Acked and shipped: the journal goes and the Job is cleaned up.
  ex->forget(o.attempt_id);
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/attempts/" + o.attempt_id));
  ex->logs_shipped(o.attempt_id, 0, 16);
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/attempts/" + o.attempt_id));
  EXPECT_EQ(api.job_count(), 0u);
  EXPECT_FALSE(report(*ex, o.attempt_id));
}

// A rejected credential and a forbidden create surface in engine() in the
// API's own words; the forbidden attempt stays unstarted and is retried.
TEST_F(KubernetesExecutorTest, UnauthorizedAndForbiddenAreEngineErrors) {
  {
    auto ex = make("stale-token");
    EXPECT_TRUE(wait_until([&] { return !ex->engine().ok; }));
    EXPECT_NE(ex->engine().message.find("credential rejected"), std::string::npos) << ex->engine().message;
    EXPECT_TRUE(ex->inventory().empty());
  }
  auto ex = make();
  api.forbid("create", "jobs");
  auto o = order_for("t-forbidden", 1);
  ASSERT_TRUE(ex->start(o).ok());  // not a refused order: it will be retried
  auto st = ex->engine();
  EXPECT_FALSE(st.ok);
  EXPECT_NE(st.message.find("jobs.batch is forbidden: User \"system:serviceaccount:cubeplane:agent\" cannot create "
                            "resource \"jobs\" in API group \"batch\" in the namespace \"ml\""),
            std::string::npos)
      << st.message;
  auto r = report(*ex, o.attempt_id);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, AttemptState::Dispatched);
  EXPECT_NE(r->message.find("forbidden"), std::string::npos);
  EXPECT_EQ(api.job_count(), 0u);
  api.allow("create", "jobs");
  (void)ex->poll();  // before the retry time: nothing new
  EXPECT_EQ(api.requests("POST", "/jobs").size(), 1u);
  clock.advance_ms(5000);
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, o.attempt_id, AttemptState::Running); }));
  EXPECT_EQ(api.job_count(), 1u);
  EXPECT_TRUE(ex->engine().ok) << ex->engine().message;
}

// An agent restart: the new executor reads the journal, lists the pods, and
// reports how the attempt ended while nobody watched.
TEST_F(KubernetesExecutorTest, RestartedExecutorFindsItsAttempt) {
  auto o = order_for("t-restart", 1);
  std::string pod;
  {
    auto ex = make();
    ASSERT_TRUE(ex->start(o).ok());
    pod = api.pod_of("cp-t-restart-1-r0");
    api.pod_running(pod);
    ASSERT_TRUE(wait_until([&] { return state_is(*ex, o.attempt_id, AttemptState::Running); }));
  }
  api.pod_exited(pod, 4);
  auto ex = make();
  ASSERT_TRUE(ex->start(o).ok());  // the server resends the order: nothing new
  EXPECT_EQ(api.requests("POST", "/jobs").size(), 1u);
  EXPECT_TRUE(wait_until([&] { return state_is(*ex, o.attempt_id, AttemptState::Failed); }));
  EXPECT_EQ(report(*ex, o.attempt_id)->exit_code, 4);
}

TEST_F(KubernetesExecutorTest, InventoryFromNodes) {
  api.add_node(json::parse(R"({"kind":"Node","apiVersion":"v1",
    "metadata":{"name":"gpu-1","labels":{"kubernetes.io/hostname":"gpu-1","nvidia.com/gpu.product":"NVIDIA-A100-SXM4-80GB",
      "nvidia.com/gpu.memory":"81920","nvidia.com/cuda.driver.major":"550","nvidia.com/cuda.driver.minor":"54",
      "nvidia.com/cuda.driver.rev":"15"}},
    "status":{"capacity":{"cpu":"64","memory":"527952196Ki","nvidia.com/gpu":"8","pods":"110"},
      "allocatable":{"cpu":"63500m","memory":"500Gi","nvidia.com/gpu":"8"},
      "conditions":[{"type":"Ready","status":"True","reason":"KubeletReady"}],
      "nodeInfo":{"kernelVersion":"5.15.0-105-generic","containerRuntimeVersion":"containerd://1.7.13","osImage":"Ubuntu 22.04.4 LTS"}}})")
                   .as_object());
  api.add_node(json::parse(R"({"kind":"Node","apiVersion":"v1","metadata":{"name":"cpu-1"},
    "status":{"capacity":{"cpu":"16","memory":"64Gi"},"allocatable":{"cpu":"16","memory":"64Gi"},
      "conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"PLEG is not healthy"}]}})")
                   .as_object());
  auto ex = make();
  auto nodes = ex->inventory();
  ASSERT_EQ(nodes.size(), 2u);
  const auto& g = nodes[0];
  EXPECT_EQ(g.name, "gpu-1");
  EXPECT_EQ(g.capacity.get("gpu/nvidia-a100-sxm4-80gb"), 8);
  EXPECT_EQ(g.capacity.memory_bytes(), 527952196LL * 1024);
  EXPECT_EQ(g.allocatable.cpu_milli(), 63500);
  EXPECT_EQ(g.labels.at("gpu-type"), "nvidia-a100-sxm4-80gb");
  EXPECT_TRUE(g.ready);
  EXPECT_EQ(g.facts.kernel, "5.15.0-105-generic");
  EXPECT_EQ(g.facts.runtime, "containerd://1.7.13");
  EXPECT_EQ(g.facts.os, "Ubuntu 22.04.4 LTS");
  EXPECT_EQ(g.facts.driver, "550.54.15");
  ASSERT_EQ(g.gpus.size(), 8u);
  EXPECT_EQ(g.gpus[0].memory_total, 81920LL << 20);
  EXPECT_FALSE(nodes[1].ready);
  EXPECT_EQ(nodes[1].reason, "KubeletNotReady: PLEG is not healthy");
  // The learned product label pins GPU jobs to it.
  auto o = order_for("t-inv", 1);
  o.resources = Resources::parse_or_die("cpu:1,gpu/nvidia-a100-sxm4-80gb:1");
  ASSERT_TRUE(ex->start(o).ok());
  auto posted = json::parse(api.requests("POST", "/jobs").at(0).body);
  EXPECT_EQ(posted.at("spec").at("template").at("spec").at("nodeSelector").at("nvidia.com/gpu.product"),
            "NVIDIA-A100-SXM4-80GB");
}

// ---- configuration -------------------------------------------------------------

std::string b64(const std::string& s) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < s.size(); i += 3) {
    unsigned v = (unsigned char)s[i] << 16 | (unsigned char)s[i + 1] << 8 | (unsigned char)s[i + 2];
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], t[v & 63]};
  }
  if (i + 1 == s.size()) {
    unsigned v = (unsigned char)s[i] << 16;
    out += {t[v >> 18], t[(v >> 12) & 63], '=', '='};
  } else if (i + 2 == s.size()) {
    unsigned v = (unsigned char)s[i] << 16 | (unsigned char)s[i + 1] << 8;
    out += {t[v >> 18], t[(v >> 12) & 63], t[(v >> 6) & 63], '='};
  }
  return out;
}

int mode_of(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return static_cast<int>(st.st_mode & 0777);
}

TEST(KubeConfigTest, KubeconfigWithTokenAndEmbeddedCertificates) {
  TempDir dir;
  std::ofstream(dir.path() + "/config") << "apiVersion: v1\nkind: Config\ncurrent-context: prod\n"
                                           "contexts:\n- name: dev\n  context: {cluster: dev, user: dev}\n"
                                           "- name: prod\n  context: {cluster: c1, user: u1, namespace: ml}\n"
                                           "clusters:\n- name: c1\n  cluster:\n    server: https://10.0.0.1:6443/\n"
                                           "    certificate-authority-data: " +
                                               b64("-----CA PEM-----\n") +
                                               "\nusers:\n- name: u1\n  user:\n    client-certificate-data: " +
                                               b64("CERT") + "\n    client-key-data: " + b64("KEY!") +
                                               "\n    token: abc.def\n";
  auto cfg = load_kubeconfig(dir.path() + "/config", dir.path() + "/kube");
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://10.0.0.1:6443");
  EXPECT_EQ(cfg->kube_namespace, "ml");
  EXPECT_EQ(cfg->token, "abc.def");
  EXPECT_EQ(slurp(cfg->ca_file), "-----CA PEM-----\n");
  EXPECT_EQ(slurp(cfg->client_cert_file), "CERT");
  EXPECT_EQ(slurp(cfg->client_key_file), "KEY!");
  EXPECT_EQ(mode_of(cfg->client_key_file), 0600);
  EXPECT_EQ(mode_of(cfg->ca_file), 0600);

  // Files by path, relative to the kubeconfig; a tokenFile; another context.
  std::ofstream(dir.path() + "/config2") << "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                                            "clusters:\n- name: c\n  cluster: {server: 'https://k:443', "
                                            "certificate-authority: certs/ca.pem, insecure-skip-tls-verify: true}\n"
                                            "users:\n- name: u\n  user: {tokenFile: tok}\n";
  auto c2 = load_kubeconfig(dir.path() + "/config2", dir.path() + "/kube2");
  ASSERT_TRUE(c2.ok()) << c2.error().message;
  EXPECT_EQ(c2->ca_file, dir.path() + "/certs/ca.pem");
  EXPECT_EQ(c2->token_file, dir.path() + "/tok");
  EXPECT_TRUE(c2->insecure_skip_verify);

  std::ofstream(dir.path() + "/config3") << "current-context: x\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
                                            "clusters:\n- name: c\n  cluster: {server: 'https://k'}\n"
                                            "users:\n- name: u\n  user: {exec: {command: aws}}\n";
  auto c3 = load_kubeconfig(dir.path() + "/config3", dir.path() + "/kube3");
  ASSERT_FALSE(c3.ok());
  EXPECT_NE(c3.error().message.find("exec"), std::string::npos);
  EXPECT_FALSE(load_kubeconfig(dir.path() + "/missing", dir.path()).ok());
}

// In a pod: the service account's files, and a token that rotates under us.
TEST(KubeConfigTest, InClusterConfigAndTokenRotation) {
  TempDir sa;
  FakeKubeApiServer api("token-1");
  std::ofstream(sa.path() + "/token") << "token-1\n";
  std::ofstream(sa.path() + "/ca.crt") << "CA";
  std::ofstream(sa.path() + "/namespace") << "cubeplane";
  auto saved = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  const auto old_host = saved("KUBERNETES_SERVICE_HOST"), old_port = saved("KUBERNETES_SERVICE_PORT");
  auto restore = [](const char* name, const std::optional<std::string>& v) {
    if (v) {
      ::setenv(name, v->c_str(), 1);
    } else {
      ::unsetenv(name);
    }
  };
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  auto cfg = in_cluster_config(sa.path());
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  auto outside = in_cluster_config(sa.path());
  restore("KUBERNETES_SERVICE_HOST", old_host);
  restore("KUBERNETES_SERVICE_PORT", old_port);
  ASSERT_FALSE(outside.ok());
  EXPECT_NE(outside.error().message.find("KUBERNETES_SERVICE_HOST"), std::string::npos);
  ASSERT_TRUE(cfg.ok()) << cfg.error().message;
  EXPECT_EQ(cfg->server, "https://10.96.0.1:443");
  EXPECT_EQ(cfg->kube_namespace, "cubeplane");
  EXPECT_EQ(cfg->ca_file, sa.path() + "/ca.crt");
  EXPECT_EQ(cfg->token_file, sa.path() + "/token");

  KubeConfig k = *cfg;
  k.server = api.url();
  k.ca_file.clear();
  KubeClient client(k);
  EXPECT_TRUE(client.get("/api/v1/nodes", "list nodes").ok());
  api.set_token("token-2");
  auto e = client.get("/api/v1/nodes", "list nodes");
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.error().code, "kube_unauthorized");
  std::ofstream(sa.path() + "/token") << "token-2-rotated\n";  // a different size: seen as changed
  api.set_token("token-2-rotated");
  EXPECT_TRUE(client.get("/api/v1/nodes", "list nodes").ok());
}

TEST(KubeConfigTest, StatusObjectsBecomeClearErrors) {
  auto e = kube_status_error(409,
                             R"({"kind":"Status","apiVersion":"v1","status":"Failure","message":"jobs.batch \"a\" already exists",
                                 "reason":"AlreadyExists","details":{"name":"a","group":"batch","kind":"jobs"},"code":409})",
                             "create jobs");
  EXPECT_EQ(e.code, "kube_already_exists");
  EXPECT_EQ(e.details.at("name"), "a");
  EXPECT_EQ(kube_status_error(410, R"({"kind":"Status","reason":"Expired","code":410,"message":"too old"})", "watch pods")
                .code,
            "kube_gone");
  EXPECT_EQ(kube_status_error(422, R"({"kind":"Status","reason":"Invalid","code":422,"message":"bad"})", "x").code,
            "kube_invalid");
  EXPECT_EQ(kube_status_error(404, "", "x").code, "kube_not_found");
  auto html = kube_status_error(502, "<html>bad gateway</html>", "list pods");
  EXPECT_EQ(html.code, "kube_error");
  EXPECT_NE(html.message.find("HTTP 502"), std::string::npos);
}

// The Jobs built for typical orders pass the upstream Kubernetes schemas.
TEST(JobManifest, ValidAgainstKubernetesSchemas) {
  const std::string tool = std::string(CUBEPLANE_SOURCE_DIR) + "/tools/kube-validate";
  if (std::system("command -v node >/dev/null 2>&1") != 0) GTEST_SKIP() << "node is not installed";
  if (!std::filesystem::exists(tool + "/node_modules")) {
    GTEST_SKIP() << "tools/kube-validate/node_modules is missing (npm ci in tools/kube-validate)";
  }
  TempDir dir;
  KubernetesExecutorConfig cfg;
  cfg.kube_namespace = "ml";
  cfg.checkpoint_pvc = "ckpt";
  cfg.priority_class_name = "cubeplane-high";
  cfg.tolerations = {KubeToleration{"nvidia.com/gpu", "Exists", "", "NoSchedule", std::nullopt},
                     KubeToleration{"dedicated", "Equal", "ml", "NoExecute", 300}};
  cfg.gpu_products["nvidia-a100-sxm4-80gb"] = "NVIDIA-A100-SXM4-80GB";
  cfg.mig_instances["node-0"] = {"MIG-1", "MIG-2"};
  std::vector<StartOrder> orders;
  orders.push_back(order_for("t-cpu", 1));
  orders.push_back(order_for("t-gpu", 3, 2));
  orders.back().resources = Resources::parse_or_die("cpu:8,memory:64Gi,gpu/nvidia-a100-sxm4-80gb:2");
  orders.push_back(order_for("t-mig", 1));
  orders.back().resources = Resources::parse_or_die("cpu:1500m,memory:1536Mi,gpu/mig-1g.10gb:1");
  orders.back().placements[0].gpu_indices = {1};
  std::string files;
  int n = 0;
  for (const auto& o : orders) {
    for (const auto& p : o.placements) {
      auto m = job_manifest(o, p.replica, cfg);
      ASSERT_TRUE(m.ok()) << m.error().message;
      const std::string path = dir.path() + "/job" + std::to_string(n++) + ".json";
      std::ofstream(path) << json::serialize(*m);
      files += " " + path;
    }
  }
  const std::string cmd = "node " + tool + "/validate.mjs" + files + " > " + dir.path() + "/out.txt 2>&1";
  const int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << slurp(dir.path() + "/out.txt");
  EXPECT_NE(slurp(dir.path() + "/out.txt").find("ok "), std::string::npos);
}

}  // namespace
}  // namespace cp
