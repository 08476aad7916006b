// clusters ls|get|create|token|confirm-lost, nodes ls|label|maintenance, control-plane status
#include <memory>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/views.h"

namespace cp::cli {
namespace {

std::string cluster_path(const std::string& id) { return "/api/v1/clusters/" + path_segment(id); }

std::string node_path(const std::string& cluster, const std::string& node) {
  return cluster_path(cluster) + "/nodes/" + path_segment(node);
}

int print_node(ClientContext& ctx, const json::value& node) {
  return print(ctx, node, [](const json::value& v) { return nodes_table(json::array{v}); });
}

void add_clusters_ls_get(CLI::App& clusters, ClientContext& ctx) {
  auto* ls = clusters.add_subcommand("ls", "List clusters with their state and agent contact");
  on_run(ls, ctx, [&ctx] {
    return print_list(ctx, "/api/v1/clusters", {}, true,
                      [&](const json::array& items) { return clusters_table(items, ctx.clock->now_ms()); });
  });

  auto* get = clusters.add_subcommand("get", "Show one cluster");
  auto id = std::make_shared<std::string>();
  get->add_option("ID", *id, "Cluster id")->required();
  on_run(get, ctx, [&ctx, id] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto cluster = (*api)->get(cluster_path(*id));
    if (!cluster) return fail(ctx, cluster.error());
    return print(ctx, *cluster, [&](const json::value& v) { return cluster_details(v, ctx.clock->now_ms()); });
  });
}

struct CreateClusterOptions {
  std::string id;
  std::string display_name;
  std::string executor = "local";
  std::string storage_pool = "default";
  std::string storage_mount;
  std::vector<std::string> labels;
};

void add_clusters_create(CLI::App& clusters, ClientContext& ctx) {
  auto* sub = clusters.add_subcommand("create", "Register a cluster (admin); then give its agent a bootstrap token");
  auto o = std::make_shared<CreateClusterOptions>();
  sub->add_option("ID", o->id, "Cluster id (a DNS-1123 label, globally unique)")->required();
  sub->add_option("--executor", o->executor, "How the agent runs tasks: local, slurm or kubernetes")
      ->check(CLI::IsMember({"local", "slurm", "kubernetes"}))
      ->capture_default_str();
  sub->add_option("--storage-pool", o->storage_pool, "Storage pool the cluster's checkpoints and logs go to")
      ->capture_default_str();
  sub->add_option("--storage-mount", o->storage_mount,
                  "Where the storage pool is mounted on every node (e.g. /mnt/shared); nodes without it show drift");
  sub->add_option("--display-name", o->display_name, "Human-readable name");
  sub->add_option("--label", o->labels, "Label k=v (repeatable)");
  on_run(sub, ctx, [&ctx, o] {
    auto labels = parse_label_args(o->labels, false);
    if (!labels) return usage_error(ctx, labels.error().message, labels.error().message_zh);
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    json::object body{{"id", o->id},
                      {"display_name", o->display_name},
                      {"executor", o->executor},
                      {"storage_pool", o->storage_pool},
                      {"labels", std::move(*labels)}};
    if (!o->storage_mount.empty()) body["storage_mount"] = o->storage_mount;
    auto cluster = (*api)->post("/api/v1/clusters", body);
    if (!cluster) return fail(ctx, cluster.error());
    return print(ctx, *cluster, [&](const json::value& v) {
      return cluster_details(v, ctx.clock->now_ms()) +
             tr(ctx, "Next: cubeplane clusters token ", "下一步：cubeplane clusters token ") + o->id + "\n";
    });
  });
}

struct ClusterTokenOptions {
  std::string id;
  std::int64_t ttl_s = 0;
};

void add_clusters_token(CLI::App& clusters, ClientContext& ctx) {
  auto* sub = clusters.add_subcommand("token", "Create a one-time bootstrap token for the cluster's agent (admin)");
  auto o = std::make_shared<ClusterTokenOptions>();
  sub->add_option("ID", o->id, "Cluster id")->required();
  sub->add_option("--ttl", o->ttl_s, "Seconds the token stays valid (server default: 86400)")
      ->check(CLI::PositiveNumber);
  on_run(sub, ctx, [&ctx, o] {
    auto opts = connection_options(ctx);
    if (!opts) return fail(ctx, opts.error());
    ApiClient api(*opts);
    json::object body;
    if (o->ttl_s > 0) body["ttl_s"] = o->ttl_s;
    auto answer = api.post(cluster_path(o->id) + "/bootstrap-tokens", body);
    if (!answer) return fail(ctx, answer.error());
    return print(ctx, *answer, [&](const json::value& v) {
      // The agent command line needs the cluster's executor; a cluster that
      // cannot be read just leaves the choice to the reader.
      auto cluster = api.get(cluster_path(o->id));
      std::string executor = cluster.ok() ? str_at(*cluster, "executor") : "";
      if (executor.empty()) executor = "local|slurm|kubernetes";
      return secret_text(v, language(ctx)) + tr(ctx, "Start the agent with:\n", "用以下命令启动 agent：\n") +
             "  cubeplane agent --server " + opts->server + " --cluster-id " + o->id + " --token " +
             str_at(v, "token") + " --executor " + executor + "\n";
    });
  });
}

// The --help of confirm-lost: what it does, and what to check first.
constexpr const char* kConfirmLostHelp =
    "When the agent of a Slurm or Kubernetes cluster falls silent, the cluster goes offline and its attempts\n"
    "become Unknown: their jobs may still run, so they are not rerun until the agent reports their end.\n"
    "confirm-lost states that they are gone: each Unknown attempt becomes Lost and its task is requeued in the\n"
    "cluster's storage pool. Make sure first that the jobs really are gone (Slurm: squeue; Kubernetes: kubectl\n"
    "get pods), or a task runs twice at once. Platform admins only; the cluster must be offline.";

void add_clusters_confirm_lost(CLI::App& clusters, ClientContext& ctx) {
  auto* sub = clusters.add_subcommand(
      "confirm-lost", "Confirm that an offline cluster's Unknown attempts are gone; their tasks rerun (admin)");
  auto id = std::make_shared<std::string>();
  sub->add_option("NAME", *id, "Cluster id")->required();
  on_run(sub, ctx, [&ctx, id] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto answer = (*api)->post(cluster_path(*id) + "/confirm-lost", json::object{});
    if (!answer) return fail(ctx, answer.error());
    return print(ctx, *answer, [&](const json::value& v) { return confirm_lost_text(v, language(ctx)); });
  });
  sub->footer(std::string(kConfirmLostHelp) + "\n\n" + sub->get_footer());
}

// `control-plane status`: which server leads, its term, whether it judges liveness.
std::string control_plane_text(const json::value& v) {
  std::string out;
  const auto& o = v.as_object();
  auto str = [](const json::value* x) {
    if (x == nullptr || x->is_null()) return std::string("-");
    if (x->is_string()) return std::string(x->get_string());
    return json::serialize(*x);
  };
  for (const auto& s : o.at("servers").as_array()) {
    const auto& srv = s.as_object();
    const bool judging = srv.at("judging").as_bool();
    if (!srv.at("leader").as_bool()) {
      // A follower (several servers on one store): it serves, the leader judges.
      out += "server " + str(srv.if_contains("id")) + "  follower; the store names " + str(o.if_contains("leader")) +
             " as leader, term " + str(o.if_contains("term")) + "\n";
      continue;
    }
    out += "server " + str(srv.if_contains("id")) + "  leader  term " + str(srv.if_contains("term")) + " since " +
           str(srv.if_contains("leading_since")) + "\n";
    out += judging ? "  judging liveness since " + str(srv.if_contains("judging_since")) + "\n"
                   : "  NOT judging liveness: " + str(srv.if_contains("not_judging")) + "\n";
    out += "  beacon seq " + str(srv.if_contains("beacon_seq")) + " in " + str(srv.if_contains("witness")) + "\n";
  }
  if (o.at("servers").as_array().empty()) out += "no beacon: silence counts from the server's start\n";
  out += "lease " + str(o.if_contains("lease_ttl_s")) + " s; a silent cluster is offline after " +
         str(o.if_contains("lost_after_ms")) + " ms of judged silence\n";
  return out;
}

void add_control_plane(CLI::App& app, ClientContext& ctx) {
  auto* cp = app.add_subcommand("control-plane", "The control plane's servers and leadership");
  cp->require_subcommand(1);
  auto* status = cp->add_subcommand("status", "Which server leads, its term, whether it judges the clusters' liveness");
  on_run(status, ctx, [&ctx] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto answer = (*api)->get("/api/v1/control-plane");
    if (!answer) return fail(ctx, answer.error());
    return print(ctx, *answer, control_plane_text);
  });
}

void add_nodes(CLI::App& app, ClientContext& ctx) {
  auto* nodes = app.add_subcommand("nodes", "List nodes; set labels and maintenance");
  nodes->require_subcommand(1);

  auto* ls = nodes->add_subcommand("ls", "List nodes: readiness, maintenance, GPUs and labels");
  auto cluster = std::make_shared<std::string>();
  ls->add_option("--cluster", *cluster, "Only the nodes of this cluster");
  on_run(ls, ctx, [&ctx, cluster] {
    return print_list(ctx, "/api/v1/nodes", {{"cluster", *cluster}}, true,
                      [](const json::array& items) { return nodes_table(items); });
  });

  struct LabelOptions {
    std::string cluster, node;
    std::vector<std::string> labels;
  };
  auto* label = nodes->add_subcommand("label", "Set node labels k=v (admin); k- removes an override");
  auto lo = std::make_shared<LabelOptions>();
  label->add_option("CLUSTER", lo->cluster, "Cluster id")->required();
  label->add_option("NODE", lo->node, "Node name")->required();
  label->add_option("LABELS", lo->labels, "k=v to set, k- to remove")->required();
  on_run(label, ctx, [&ctx, lo] {
    auto labels = parse_label_args(lo->labels, true);
    if (!labels) return usage_error(ctx, labels.error().message, labels.error().message_zh);
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto node = (*api)->patch(node_path(lo->cluster, lo->node), json::object{{"labels", std::move(*labels)}});
    if (!node) return fail(ctx, node.error());
    return print_node(ctx, *node);
  });

  struct MaintenanceOptions {
    std::string cluster, node, mode;
  };
  auto* maint = nodes->add_subcommand("maintenance", "Take a node out of scheduling (on) or back in (off) (admin)");
  auto mo = std::make_shared<MaintenanceOptions>();
  maint->add_option("CLUSTER", mo->cluster, "Cluster id")->required();
  maint->add_option("NODE", mo->node, "Node name")->required();
  maint->add_option("MODE", mo->mode, "on or off")->required()->check(CLI::IsMember({"on", "off"}));
  on_run(maint, ctx, [&ctx, mo] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto node = (*api)->patch(node_path(mo->cluster, mo->node), json::object{{"maintenance", mo->mode == "on"}});
    if (!node) return fail(ctx, node.error());
    return print_node(ctx, *node);
  });
}

}  // namespace

void register_cluster_commands(CLI::App& app, ClientContext& ctx) {
  auto* clusters = app.add_subcommand("clusters", "List, inspect and register clusters");
  clusters->require_subcommand(1);
  add_clusters_ls_get(*clusters, ctx);
  add_clusters_create(*clusters, ctx);
  add_clusters_token(*clusters, ctx);
  add_clusters_confirm_lost(*clusters, ctx);
  add_nodes(app, ctx);
  add_control_plane(app, ctx);
}

}  // namespace cp::cli
