// The one binary. This file alone chooses the concrete classes: which Store,
// which ObjectStore, which Executor (STYLE.md, Envoy's REPO_LAYOUT).
//
//   cubeplane up       server + the embedded local agents the config declares
//   cubeplane server   control plane only
//   cubeplane agent    one agent for one cluster
//   cubeplane <verb>   client verbs (src/cli)
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "agent/agent.h"
#include "agent/executors/kubernetes_executor.h"
#include "agent/executors/local_executor.h"
#include "agent/executors/slurm_executor.h"
#include "cli/cli.h"
#include "common/ids.h"
#include "common/log.h"
#include "http/metrics.h"
#include "http/routes.h"
#include "http/server.h"
#include "model/documents.h"
#include "objstore/object_store.h"
#include "server/control_plane.h"
#include "server/fleet_config.h"
#include "store/server_lock.h"
#include "store/store.h"

namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_stop{false};

extern "C" void on_stop_signal(int) { g_stop = true; }

void install_stop_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

// How often local agents sample what their attempts use (LocalExecutorConfig::
// use_sample_ms): CUBEPLANE_USE_SAMPLE_MS, for tests and tuning; 5 s unless set.
std::int64_t use_sample_ms() {
  const char* e = std::getenv("CUBEPLANE_USE_SAMPLE_MS");
  std::int64_t ms = 0;
  if (e == nullptr || std::from_chars(e, e + std::strlen(e), ms).ec != std::errc() || ms < 0) return 5000;
  return ms;
}

int fail(const cp::Error& e) {
  std::cerr << "error: " << e.message << "\n";
  if (!e.message_zh.empty()) std::cerr << "错误：" << e.message_zh << "\n";
  return 1;
}

struct PlatformOptions {
  std::string config;
  std::string data_dir;
  std::string listen;
  std::string store;
  std::string objects;
  std::string web_root;
  std::string log_level;
  bool embedded_agents = false;  // `up`
};

std::string default_data_dir() {
  if (const char* x = std::getenv("XDG_DATA_HOME"); x && *x) return std::string(x) + "/cubeplane";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.local/share/cubeplane";
  return ".cubeplane";
}

// Without --config, `up` runs this machine as one cluster with one open group.
constexpr std::string_view kDefaultFleet = R"(apiVersion: cubeplane/v1
kind: Cluster
metadata: {name: local}
spec: {executor: local, storage_pool: local}
---
apiVersion: cubeplane/v1
kind: ResourceGroup
metadata: {name: default}
spec: {clusters: [local], placement: binpack}
---
apiVersion: cubeplane/v1
kind: ProjectGroup
metadata: {name: default}
spec: {default_resource_group: default}
)";

std::string find_web_root(const std::string& configured) {
  if (!configured.empty()) return configured;
  // Next to the binary (installed) or in the source tree (development).
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  for (fs::path dir = exe.parent_path(); !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
    if (fs::exists(dir / "web/dist/index.html")) return (dir / "web/dist").string();
    if (fs::exists(dir / "share/cubeplane/web/index.html")) return (dir / "share/cubeplane/web").string();
  }
  return "";
}

cp::DeclaredNode to_declared(const cp::FleetNode& n) {
  cp::DeclaredNode d;
  d.name = n.name;
  d.labels = n.labels;
  if (!n.cpu.empty()) d.cpu_milli = cp::parse_quantity(cp::kCpu, n.cpu).value();
  if (!n.memory.empty()) d.memory_bytes = cp::parse_quantity(cp::kMemory, n.memory).value();
  d.gpus.type = n.gpus.type;
  d.gpus.count = n.gpus.count;
  return d;
}

int run_platform(const PlatformOptions& opt) {
  install_stop_handlers();
  cp::FleetConfig fleet;
  if (!opt.config.empty()) {
    auto f = cp::load_fleet_config(opt.config);
    if (!f.ok()) return fail(f.error());
    fleet = std::move(f).value();
  } else if (opt.embedded_agents) {
    fleet = cp::parse_fleet_config(kDefaultFleet).value();
  }
  auto& s = fleet.server;
  if (!opt.listen.empty()) s.listen = opt.listen;
  if (!opt.store.empty()) s.store = opt.store;
  if (!opt.objects.empty()) s.objects = opt.objects;
  if (!opt.web_root.empty()) s.web_root = opt.web_root;
  if (!opt.log_level.empty()) s.log_level = opt.log_level;
  // The SMTP login of the alert emails: from the environment only, so that
  // no config file (often in version control) holds a password.
  if (const char* u = std::getenv("CUBEPLANE_SMTP_USER")) s.control.smtp_user = u;
  if (const char* pw = std::getenv("CUBEPLANE_SMTP_PASSWORD")) s.control.smtp_password = pw;
  cp::setup_logging(s.log_level);

  std::string data_dir = fs::absolute(opt.data_dir.empty() ? default_data_dir() : opt.data_dir).string();
  std::error_code ec;
  fs::create_directories(data_dir, ec);
  if (ec) return fail(cp::errors::invalid("--data-dir", "cannot create " + data_dir + ": " + ec.message(),
                                          "无法创建 " + data_dir + "：" + ec.message()));
  if (s.store.empty()) s.store = "sqlite://" + data_dir + "/cubeplane.db";
  if (s.objects.empty()) {
    fs::create_directories(data_dir + "/objects", ec);
    s.objects = "file://" + data_dir + "/objects";
  }

  // Before anything touches the store: one server per store (store/server_lock.h).
  auto server_lock = cp::lock_store_for_server(s.store);
  if (!server_lock.ok()) return fail(server_lock.error());
  auto store = cp::open_store(s.store);
  if (!store.ok()) return fail(store.error());
  if (auto st = (*store)->migrate(); !st.ok()) return fail(st.error());
  auto objects = cp::open_object_store(s.objects);
  if (!objects.ok()) return fail(objects.error());

  // Several servers may share a PostgreSQL store: they date agent contacts
  // and judge silence on its clock, which the beacon chain samples.
  const bool shared_store = (*store)->backend() == "postgresql";
  cp::OffsetClock store_clock(cp::SystemClock::instance());
  cp::ControlPlane control(**store, **objects,
                           shared_store ? static_cast<const cp::Clock&>(store_clock) : cp::SystemClock::instance(),
                           s.control);
  auto admin_token = control.ensure_admin_token();
  if (!admin_token.ok()) return fail(admin_token.error());
  std::string token_file = data_dir + "/admin-token";
  if (*admin_token && opt.embedded_agents) {
    // `up` is the laptop mode: keep the token where its user can find it again.
    std::ofstream(token_file) << **admin_token << "\n";
    ::chmod(token_file.c_str(), 0600);
  }
  if (auto st = cp::apply_fleet(control, fleet); !st.ok()) return fail(st.error());

  cp::http::Metrics metrics;
  cp::http::Router router;
  cp::http::add_api_routes(router, control, &metrics, find_web_root(s.web_root));
  cp::http::HttpLimits limits;
  limits.body_max = 4 << 20;  // agents ship log chunks of up to 256 KiB, JSON-escaped
  cp::http::HttpServer http(router, limits, &metrics);
  auto port = http.listen(s.listen);
  if (!port.ok()) return fail(port.error());
  http.run(s.http_threads);
  // The beacon before the loops: liveness is judged only while it holds.
  // On PostgreSQL several servers may share the store: this one leads once
  // it wins the term, and serves requests meanwhile (server/beacon.h).
  if (auto st = control.start_beacon(cp::new_id("srv", cp::SystemClock::instance().now_ms()),
                                     cp::BootTimeClock::instance(), true, shared_store,
                                     shared_store ? &store_clock : nullptr);
      !st.ok()) {
    return fail(st.error());
  }
  control.start_background();

  std::string host = s.listen.substr(0, s.listen.rfind(':'));
  if (host.empty() || host == "0.0.0.0") host = "127.0.0.1";
  std::string url = "http://" + host + ":" + std::to_string(*port);

  // Embedded agents talk to the server over HTTP like remote ones, with a
  // fresh one-time bootstrap token each start (unused ones expire).
  std::vector<std::unique_ptr<cp::Agent>> agents;
  std::vector<std::thread> agent_threads;
  std::atomic<bool> agents_stop{false};
  if (opt.embedded_agents) {
    cp::Principal admin;
    admin.user = "admin";
    admin.role = cp::PlatformRole::admin;
    for (const auto& c : fleet.clusters) {
      if (!c.embedded_agent || c.executor != cp::ExecutorKind::local) continue;
      auto tok = control.create_bootstrap_token(admin, c.id, cp::json::value(nullptr));
      if (!tok.ok()) return fail(tok.error());
      cp::LocalExecutorConfig ec_cfg;
      ec_cfg.data_dir = data_dir + "/agents/" + c.id;
      ec_cfg.use_sample_ms = use_sample_ms();
      for (const auto& n : c.nodes) ec_cfg.nodes.push_back(to_declared(n));
      if (!ec_cfg.nodes.empty()) ec_cfg.nvml_library = "";  // declared GPUs only
      cp::AgentConfig ac;
      ac.server_url = url;
      ac.cluster_id = c.id;
      ac.bootstrap_token = std::string(tok->at("token").as_string());
      ac.data_dir = ec_cfg.data_dir;
      auto executor = std::make_unique<cp::LocalExecutor>(ec_cfg);
      agents.push_back(std::make_unique<cp::Agent>(ac, std::move(executor)));
    }
    for (auto& a : agents) {
      agent_threads.emplace_back([&a, &agents_stop] {
        if (auto st = a->run(agents_stop); !st.ok()) spdlog::error("agent stopped: {}", st.error().to_string());
      });
    }
  }

  std::cout << "Cubeplane is running.\n"
            << "  UI and API:  " << url << "/\n"
            << "  OpenAPI:     " << url << "/api/v1/openapi.json\n"
            << "  data dir:    " << data_dir << "\n";
  if (*admin_token) {
    std::cout << "  admin token: " << **admin_token << "   (shown once; only its hash is stored";
    if (opt.embedded_agents) std::cout << "; also saved to " << token_file;
    std::cout << ")\n";
  } else if (opt.embedded_agents && fs::exists(token_file)) {
    std::cout << "  admin token: see " << token_file << "\n";
  }
  std::cout << "  try:         export CUBEPLANE_SERVER=" << url
            << " CUBEPLANE_TOKEN=<admin token>; cubeplane clusters ls\n"
            << "Press Ctrl-C to stop." << std::endl;

  while (!g_stop) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::cout << "stopping..." << std::endl;
  agents_stop = true;
  for (auto& t : agent_threads) t.join();
  http.stop();
  control.stop_background();
  return 0;
}

// `cubeplane agent --executor kubernetes` options.
struct KubeAgentOptions {
  std::string kubeconfig;      // "" = in-cluster (the pod's service account)
  std::string kube_namespace;  // "" = the kubeconfig context's, the service account's, or "default"
  std::string image;           // for orders without one
  std::string checkpoint_pvc;
  bool given() const { return !kubeconfig.empty() || !kube_namespace.empty() || !image.empty() || !checkpoint_pvc.empty(); }
};

int run_agent(const cp::cli::ClientContext& ctx, const std::string& cluster_id, const std::string& executor,
              const std::string& data_dir, const std::vector<std::string>& gpus, const std::string& log_level,
              const cp::SlurmExecutorConfig& slurm_opts, const KubeAgentOptions& kube_opts) {
  install_stop_handlers();
  cp::setup_logging(log_level);
  std::string server = ctx.server;
  if (server.empty()) {
    if (const char* e = std::getenv("CUBEPLANE_SERVER")) server = e;
  }
  std::string token = ctx.token;
  if (token.empty()) {
    if (const char* e = std::getenv("CUBEPLANE_BOOTSTRAP_TOKEN")) token = e;
  }
  if (server.empty()) {
    std::cerr << "error: --server is required (or CUBEPLANE_SERVER)\n";
    return 2;
  }
  const std::string agent_data_dir = data_dir.empty() ? default_data_dir() + "/agent-" + cluster_id : data_dir;
  auto run = [&](std::unique_ptr<cp::Executor> ex) {
    cp::AgentConfig ac;
    ac.server_url = server;
    ac.cluster_id = cluster_id;
    ac.bootstrap_token = token;
    ac.data_dir = agent_data_dir;
    cp::Agent agent(ac, std::move(ex));
    auto st = agent.run(g_stop);
    if (!st.ok()) return fail(st.error());
    return 0;
  };
  if (executor == "slurm") {
    // Jobs through the Slurm CLI of this machine (sbatch, squeue, scontrol,
    // scancel in PATH; SLURM_CONF as the environment says).
    if (!gpus.empty()) {
      std::cerr << "error: --declare-gpus is for the local executor; Slurm declares its GPUs (gres.conf)\n"
                << "错误：--declare-gpus 仅用于 local 执行器；Slurm 的 GPU 由其自身声明（gres.conf）\n";
      return 2;
    }
    cp::SlurmExecutorConfig sc = slurm_opts;
    sc.data_dir = agent_data_dir;
    return run(std::make_unique<cp::SlurmExecutor>(sc));
  }
  if (executor == "kubernetes") {
    // One Job per replica in a namespace of the cluster this agent runs in
    // (or the one --kubeconfig names).
    if (!gpus.empty()) {
      std::cerr << "error: --declare-gpus is for the local executor; Kubernetes reports its nodes' GPUs\n"
                << "错误：--declare-gpus 仅用于 local 执行器；Kubernetes 自行报告节点的 GPU\n";
      return 2;
    }
    const auto& ko = kube_opts;
    cp::KubernetesExecutorConfig kc;
    kc.data_dir = agent_data_dir;
    kc.default_image = ko.image;
    kc.checkpoint_pvc = ko.checkpoint_pvc;
    auto kube = ko.kubeconfig.empty() ? cp::in_cluster_config() : cp::load_kubeconfig(ko.kubeconfig, kc.data_dir + "/kube");
    if (!kube.ok()) return fail(kube.error());
    kc.kube_namespace = !ko.kube_namespace.empty() ? ko.kube_namespace
                        : !kube->kube_namespace.empty() ? kube->kube_namespace
                                                        : "default";
    return run(std::make_unique<cp::KubernetesExecutor>(kc, std::move(kube).value()));
  }
  if (kube_opts.given()) {
    std::cerr << "error: --kubeconfig, --namespace, --image and --checkpoint-pvc need --executor kubernetes\n"
              << "错误：--kubeconfig、--namespace、--image 和 --checkpoint-pvc 需要与 --executor kubernetes 一起使用\n";
    return 2;
  }
  if (!slurm_opts.partition.empty() || !slurm_opts.sbatch_args.empty()) {
    std::cerr << "error: --slurm-partition and --slurm-sbatch-arg need --executor slurm\n"
              << "错误：--slurm-partition 和 --slurm-sbatch-arg 需要与 --executor slurm 一起使用\n";
    return 2;
  }
  if (executor != "local") {
    std::cerr << "error: executor \"" << executor << "\" is not available; use --executor local, slurm or kubernetes\n"
              << "错误：执行器 \"" << executor << "\" 不可用，请使用 --executor local、slurm 或 kubernetes\n";
    return 2;
  }
  cp::LocalExecutorConfig ec_cfg;
  ec_cfg.data_dir = agent_data_dir;
  ec_cfg.use_sample_ms = use_sample_ms();
  if (!gpus.empty()) {
    // --declare-gpus TYPE:N: a machine without NVML still offers its GPUs.
    cp::DeclaredNode n;
    char host[256] = "local";
    gethostname(host, sizeof host);
    n.name = host;
    for (const auto& g : gpus) {
      auto colon = g.rfind(':');
      if (colon == std::string::npos) {
        std::cerr << "error: --declare-gpus takes TYPE:COUNT\n";
        return 2;
      }
      n.gpus.type = g.substr(0, colon);
      n.gpus.count = std::atoi(g.c_str() + colon + 1);
      n.labels[std::string(cp::kLabelGpuType)] = n.gpus.type;
    }
    ec_cfg.nodes.push_back(n);
  }
  return run(std::make_unique<cp::LocalExecutor>(ec_cfg));
}

void add_platform_commands(CLI::App& app, cp::cli::ClientContext& ctx) {
  auto platform_flags = [](CLI::App* cmd, PlatformOptions& o) {
    cmd->add_option("--config", o.config, "fleet configuration file (YAML; see examples/demo-fleet.yaml)");
    cmd->add_option("--data-dir", o.data_dir, "where the SQLite database, objects and agent state live");
    cmd->add_option("--listen", o.listen, "address to serve the API and UI on, e.g. 127.0.0.1:8080 or :0");
    cmd->add_option("--store", o.store, "metadata store URL: sqlite:///path/db or postgresql://user@host/db[?pool=N]");
    cmd->add_option("--objects", o.objects, "object store URL: file:///dir or s3://bucket[/prefix]?endpoint=...&region=...&style=path|virtual");
    cmd->add_option("--web-root", o.web_root, "directory of the built web UI");
    cmd->add_option("--log-level", o.log_level, "trace|debug|info|warn|error");
  };
  static PlatformOptions up_opts, server_opts;
  auto* up = app.add_subcommand("up", "all-in-one on this machine: server + embedded local agents");
  platform_flags(up, up_opts);
  up->callback([&ctx] {
    up_opts.embedded_agents = true;
    ctx.action = [] { return run_platform(up_opts); };
  });
  auto* server = app.add_subcommand("server", "run the control plane only");
  platform_flags(server, server_opts);
  server->callback([&ctx] { ctx.action = [] { return run_platform(server_opts); }; });

  static std::string cluster_id, executor = "local", agent_dir, log_level = "info";
  static cp::SlurmExecutorConfig slurm_opts;
  static KubeAgentOptions kube_opts;
  static std::vector<std::string> gpus;
  auto* agent = app.add_subcommand("agent", "run the agent of one cluster (uses --server and --token)");
  agent->add_option("--cluster-id", cluster_id, "the CLUSTER_ID this agent serves")->required();
  agent->add_option("--executor", executor,
                    "local (processes on this machine), slurm (batch jobs through sbatch) or kubernetes "
                    "(a batch/v1 Job per replica)");
  agent->add_option("--kubeconfig", kube_opts.kubeconfig,
                    "with --executor kubernetes: kubeconfig file (default: the pod's service account)");
  agent->add_option("--namespace,--kube-namespace", kube_opts.kube_namespace,
                    "with --executor kubernetes: namespace of the Jobs (default: the context's or the pod's)");
  agent->add_option("--image", kube_opts.image,
                    "with --executor kubernetes: image for steps that name none");
  agent->add_option("--checkpoint-pvc", kube_opts.checkpoint_pvc,
                    "with --executor kubernetes: PersistentVolumeClaim mounted at /cubeplane/checkpoints");
  agent->add_option("--slurm-partition", slurm_opts.partition, "with --executor slurm: submit to and report this partition");
  agent->add_option("--slurm-sbatch-arg", slurm_opts.sbatch_args,
                    "with --executor slurm: an extra sbatch option for every job, e.g. --slurm-sbatch-arg=--account=ml");
  agent->add_option("--data-dir", agent_dir, "agent state: credential, attempt journals, logs");
  agent->add_option("--declare-gpus", gpus, "GPUs of this machine without NVML, as TYPE:COUNT");
  agent->add_option("--log-level", log_level, "trace|debug|info|warn|error");
  agent->callback([&ctx] {
    ctx.action = [&ctx] { return run_agent(ctx, cluster_id, executor, agent_dir, gpus, log_level, slurm_opts, kube_opts); };
  });
}

}  // namespace

int main(int argc, char** argv) { return cp::cli::run_cli(argc, argv, add_platform_commands); }
