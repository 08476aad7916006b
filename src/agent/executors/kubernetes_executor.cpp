#include "agent/executors/kubernetes_executor.h"

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "agent/files.h"
#include "common/log.h"
#include "model/resources.h"

namespace cp {
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kManagedBy = "app.kubernetes.io/managed-by";
constexpr std::string_view kLabelAttempt = "cubeplane.io/attempt";
constexpr std::string_view kLabelTask = "cubeplane.io/task";
constexpr std::string_view kLabelReplica = "cubeplane.io/replica";
constexpr std::string_view kCheckpointMount = "/cubeplane/checkpoints";
constexpr std::string_view kMigPrefix = "mig-";
constexpr Millis kCreateRetryMs = 5000;  // a failed create or delete is retried after this

const std::string& selector() {
  static const std::string s = url_encode(std::string(kManagedBy) + "=cubeplane");
  return s;
}

bool safe_name(const std::string& s) {
  if (s.empty() || s.size() > 200 || s == "." || s == "..") return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return std::isalnum(c) || c == '.' || c == '_' || c == '-';
  });
}

// A Kubernetes label value: at most 63 of [A-Za-z0-9._-], alphanumeric at both ends.
bool label_value_ok(std::string_view v) {
  if (v.size() > 63) return false;
  if (v.empty()) return true;
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (!alnum(v.front()) || !alnum(v.back())) return false;
  return std::all_of(v.begin(), v.end(), [&](char c) { return alnum(c) || c == '-' || c == '_' || c == '.'; });
}

// Environment variable names the API accepts on every version we meet.
bool env_name_ok(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [](char ch) {
    auto c = static_cast<unsigned char>(ch);
    return std::isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return h;
}

// "NVIDIA-A100-SXM4-80GB" -> "nvidia-a100-sxm4-80gb": a Cubeplane GPU type.
std::string gpu_type_of(std::string_view product) {
  std::string t;
  for (char ch : product) {
    auto c = static_cast<unsigned char>(ch);
    t += (std::isalnum(c) || c == '.' || c == '_' || c == '-') ? static_cast<char>(std::tolower(c)) : '-';
  }
  while (!t.empty() && !std::isalnum(static_cast<unsigned char>(t.back()))) t.pop_back();
  std::size_t i = 0;
  while (i < t.size() && !std::isalnum(static_cast<unsigned char>(t[i]))) ++i;
  t = t.substr(i, 63);
  while (!t.empty() && !std::isalnum(static_cast<unsigned char>(t.back()))) t.pop_back();
  return t;
}

Error bad_order(const std::string& field, const std::string& en, const std::string& zh) {
  return errors::invalid(field, en, zh);
}

bool is_failure(const std::string& outcome) {
  return !outcome.empty() && outcome != "exit 0" && outcome != "stopped";
}

std::string stop_message(const std::string& reason) {
  if (reason == kStopCancel) return "cancelled";
  if (reason == kStopPreempt) return "preempted";
  if (reason == kStopSuperseded) return "superseded by a newer attempt";
  if (reason == kStopLost) return "lost: stopped by the agent after losing contact with the server";
  return "stopped: " + reason;
}

const json::value* at_path(const json::value& v, std::initializer_list<std::string_view> keys) {
  const json::value* cur = &v;
  for (auto k : keys) {
    if (!cur->is_object()) return nullptr;
    cur = cur->as_object().if_contains(k);
    if (!cur) return nullptr;
  }
  return cur;
}
std::string str_at(const json::value& v, std::initializer_list<std::string_view> keys) {
  const json::value* p = at_path(v, keys);
  return p && p->is_string() ? std::string(p->as_string()) : std::string();
}

// Only errors about the engine itself (credentials, permissions, the API
// being down) make it unhealthy; a 404 or 409 concerns one object.
bool engine_level(const Error& e) {
  return e.code == "unreachable" || e.code == "kube_unauthorized" || e.code == "kube_forbidden" ||
         e.code == "kube_error" || e.status >= 500;
}

}  // namespace

std::string job_name(const std::string& attempt_id, int replica) {
  std::string body;
  for (char ch : attempt_id) {
    auto c = static_cast<unsigned char>(ch);
    body += std::isalnum(c) ? static_cast<char>(std::tolower(c)) : '-';
  }
  const std::string suffix = "-r" + std::to_string(replica);
  std::string name = "cp-" + body;
  if (name.size() + suffix.size() > 63) {
    // Two long ids that share a prefix stay apart by the hash of the whole id.
    char hash[17];
    std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(fnv1a(attempt_id)));
    name = name.substr(0, 63 - suffix.size() - 9);
    while (name.back() == '-') name.pop_back();
    name += "-" + std::string(hash, 8);
  }
  return name + suffix;
}

Result<json::value> job_manifest(const StartOrder& order, int replica, const KubernetesExecutorConfig& config) {
  ReplicaPlacement placement;
  placement.replica = replica;
  bool found = order.placements.empty() && replica == 0;
  for (const auto& p : order.placements) {
    if (p.replica == replica) {
      placement = p;
      found = true;
    }
  }
  if (!found) {
    return bad_order("placements", "no placement for replica " + std::to_string(replica),
                     "副本 " + std::to_string(replica) + " 没有放置信息");
  }
  if (!label_value_ok(order.attempt_id) || !label_value_ok(order.task_id) || order.attempt_id.empty()) {
    return bad_order("attempt_id", "attempt id \"" + order.attempt_id + "\" or task id \"" + order.task_id +
                                       "\" is not usable as a Kubernetes label value",
                     "尝试 id \"" + order.attempt_id + "\" 或任务 id \"" + order.task_id + "\" 不能用作 Kubernetes 标签值");
  }
  if (order.command.empty() || order.command[0].empty()) return bad_order("command", "empty command", "命令为空");
  const std::string image = order.image.empty() ? config.default_image : order.image;
  if (image.empty()) {
    return bad_order("image", "the order names no image and the agent has no default image (--image)",
                     "任务未指定镜像，agent 也没有默认镜像（--image）");
  }
  for (const auto& [k, v] : order.env) {
    if (!env_name_ok(k)) {
      return bad_order("env", "invalid environment variable name \"" + k + "\"", "无效的环境变量名 \"" + k + "\"");
    }
  }

  // Resources: requests = limits (Guaranteed QoS for what the scheduler counted).
  json::object quantities;
  std::int64_t gpus = 0, migs = 0;
  std::string gpu_type;
  for (const auto& [name, amount] : order.resources.amounts()) {
    if (amount <= 0) continue;
    if (name == kCpu || name == kMemory) {
      quantities[name] = format_quantity(name, amount);
    } else if (name.starts_with(kGpuPrefix)) {
      const std::string type = name.substr(kGpuPrefix.size());
      if (type.starts_with(kMigPrefix)) {
        quantities["nvidia.com/" + type] = std::to_string(amount);
        migs += amount;
      } else {
        gpus += amount;
        gpu_type = type;
      }
    } else {
      quantities[name] = std::to_string(amount);  // an extended resource, e.g. example.com/fpga
    }
  }
  if (gpus > 0) quantities["nvidia.com/gpu"] = std::to_string(gpus);

  std::map<std::string, std::string> env(order.env.begin(), order.env.end());
  // The platform's variables win over the order's, as in the local executor.
  // Inside the container the runtime numbers its devices from 0.
  std::string cuda;
  for (std::int64_t i = 0; i < gpus + migs; ++i) cuda += (i ? "," : "") + std::to_string(i);
  env["CUDA_VISIBLE_DEVICES"] = cuda;
  if (gpus + migs == 0) {
    // CUDA images say NVIDIA_VISIBLE_DEVICES=all: without this a pod that
    // asked for no GPU would see every GPU of the node.
    env["NVIDIA_VISIBLE_DEVICES"] = "void";
  } else if (migs > 0) {
    // The device plugin may hand out "a" MIG slice while the code grabs a
    // whole card's memory; naming the instances the scheduler placed the
    // replica on keeps it inside them (../shared/seeds/002, §5.2).
    auto it = config.mig_instances.find(placement.node);
    if (it != config.mig_instances.end()) {
      std::string names;
      for (int idx : placement.gpu_indices) {
        if (idx < 0 || static_cast<std::size_t>(idx) >= it->second.size()) {
          return bad_order("placements", "MIG instance " + std::to_string(idx) + " of node " + placement.node +
                                             " is not configured",
                           "节点 " + placement.node + " 的 MIG 实例 " + std::to_string(idx) + " 未配置");
        }
        names += (names.empty() ? "" : ",") + it->second[static_cast<std::size_t>(idx)];
      }
      if (!names.empty()) env["NVIDIA_VISIBLE_DEVICES"] = names;
    }
  }
  env["CUBEPLANE_TASK_ID"] = order.task_id;
  env["CUBEPLANE_ATTEMPT"] = std::to_string(order.attempt_number);
  env["CUBEPLANE_ATTEMPT_ID"] = order.attempt_id;
  env["CUBEPLANE_REPLICA"] = std::to_string(replica);
  env["CUBEPLANE_REPLICAS"] = std::to_string(std::max<std::size_t>(1, order.placements.size()));
  env["CUBEPLANE_NODE"] = placement.node;
  if (!config.checkpoint_pvc.empty()) env["CUBEPLANE_CHECKPOINT_DIR"] = std::string(kCheckpointMount);
  if (order.attempt_number > 1) {
    env["CUBEPLANE_RESUME"] = "1";
    env["CUBEPLANE_RESTART_COUNT"] = std::to_string(order.attempt_number - 1);
  }
  json::array env_list;
  for (const auto& [k, v] : env) env_list.push_back(json::object{{"name", k}, {"value", v}});

  json::array command;
  for (const auto& c : order.command) command.push_back(json::string(c));
  json::object container{{"name", "main"}, {"image", image}, {"command", std::move(command)},
                         {"env", std::move(env_list)}};
  if (!quantities.empty()) container["resources"] = json::object{{"requests", quantities}, {"limits", quantities}};

  json::object labels{{std::string(kLabelAttempt), order.attempt_id},
                      {std::string(kLabelTask), order.task_id},
                      {std::string(kLabelReplica), std::to_string(replica)},
                      {std::string(kManagedBy), "cubeplane"}};
  json::object pod_spec{{"restartPolicy", "Never"},
                        {"terminationGracePeriodSeconds", std::max<std::int64_t>(0, order.grace_s)}};
  json::object node_selector;
  if (!placement.node.empty()) node_selector[config.node_label] = placement.node;
  if (gpus > 0) {
    if (auto it = config.gpu_products.find(gpu_type); it != config.gpu_products.end()) {
      node_selector[config.gpu_product_label] = it->second;
    }
  }
  if (!node_selector.empty()) pod_spec["nodeSelector"] = std::move(node_selector);
  if (!config.priority_class_name.empty()) pod_spec["priorityClassName"] = config.priority_class_name;
  if (!config.tolerations.empty()) {
    json::array tols;
    for (const auto& t : config.tolerations) {
      json::object o;
      if (!t.key.empty()) o["key"] = t.key;
      o["operator"] = t.op.empty() ? "Equal" : t.op;
      if (!t.value.empty()) o["value"] = t.value;
      if (!t.effect.empty()) o["effect"] = t.effect;
      if (t.toleration_seconds) o["tolerationSeconds"] = *t.toleration_seconds;
      tols.push_back(std::move(o));
    }
    pod_spec["tolerations"] = std::move(tols);
  }
  if (!config.checkpoint_pvc.empty()) {
    // Not an emptyDir: that dies with the pod, and a resumed attempt (another
    // pod, maybe on another node) must find the checkpoint.
    container["volumeMounts"] = json::array{
        json::object{{"name", "checkpoints"}, {"mountPath", std::string(kCheckpointMount)}, {"subPath", order.task_id}}};
    pod_spec["volumes"] = json::array{json::object{
        {"name", "checkpoints"}, {"persistentVolumeClaim", json::object{{"claimName", config.checkpoint_pvc}}}}};
  }
  pod_spec["containers"] = json::array{std::move(container)};

  json::object job_spec{{"completions", 1},
                        {"parallelism", 1},
                        {"backoffLimit", 0},
                        {"ttlSecondsAfterFinished", config.ttl_seconds_after_finished},
                        {"template", json::object{{"metadata", json::object{{"labels", labels}}},
                                                  {"spec", std::move(pod_spec)}}}};
  json::object metadata{{"name", job_name(order.attempt_id, replica)},
                        {"namespace", config.kube_namespace},
                        {"labels", labels},
                        {"annotations", json::object{{"cubeplane.io/epoch", std::to_string(order.epoch)}}}};
  return json::value(json::object{
      {"apiVersion", "batch/v1"}, {"kind", "Job"}, {"metadata", std::move(metadata)}, {"spec", std::move(job_spec)}});
}

KubernetesExecutor::KubernetesExecutor(KubernetesExecutorConfig config, KubeConfig kube, const Clock& clock)
    : config_(std::move(config)), clock_(clock), kube_(std::move(kube)), api_(kube_) {
  std::error_code ec;
  fs::path abs = fs::absolute(config_.data_dir.empty() ? fs::path(".") : fs::path(config_.data_dir), ec);
  if (!ec) config_.data_dir = abs.lexically_normal().string();
  while (config_.data_dir.size() > 1 && config_.data_dir.back() == '/') config_.data_dir.pop_back();
  if (config_.log_chunk_bytes == 0) config_.log_chunk_bytes = 256 * 1024;
  if (config_.kube_namespace.empty()) config_.kube_namespace = "default";
  if (auto st = agent_files::make_dirs(config_.data_dir + "/attempts"); !st.ok()) note_error("data dir", st.error());
  load_journals();
  watcher_ = std::thread([this] { watch_loop(); });
}

KubernetesExecutor::~KubernetesExecutor() {
  stopping_ = true;
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

std::string KubernetesExecutor::dir_of(const std::string& attempt_id) const {
  return config_.data_dir + "/attempts/" + attempt_id;
}

int KubernetesExecutor::lists() const {
  std::lock_guard lock(mu_);
  return lists_;
}

void KubernetesExecutor::note_error(const std::string& op, const Error& e) {
  if (!engine_level(e) && op != "data dir") return;
  auto [it, fresh] = problems_.insert_or_assign(op, e);
  (void)it;
  if (fresh) spdlog::warn("kubernetes executor: {}: {}", op, e.message);
}

void KubernetesExecutor::note_ok(const std::string& op) { problems_.erase(op); }

void KubernetesExecutor::load_journals() {
  std::error_code ec;
  fs::directory_iterator it(config_.data_dir + "/attempts", ec);
  if (ec) return;
  for (const auto& entry : it) {
    if (!entry.is_directory(ec)) continue;
    std::string id = entry.path().filename().string();
    auto text = agent_files::read_all(entry.path().string() + "/journal.json");
    if (!text) continue;
    auto rec = decode_json<AttemptRecord>(*text);
    if (!rec.ok() || rec->order.attempt_id != id) {
      spdlog::warn("kubernetes executor: ignoring unreadable journal of {}", id);
      continue;
    }
    for (const auto& r : rec->replicas) finish_counter_ = std::max(finish_counter_, r.finished_seq);
    attempts_.emplace(id, std::move(rec).value());
    spdlog::info("kubernetes executor: adopted attempt {} from its journal", id);
  }
  std::vector<std::string> ids;
  for (const auto& [id, a] : attempts_) ids.push_back(id);
  for (const auto& id : ids) maybe_remove(id);
}

Status KubernetesExecutor::save(const AttemptRecord& a) {
  auto st = agent_files::write_atomic(dir_of(a.order.attempt_id) + "/journal.json", dump(to_json(a)));
  if (!st.ok()) spdlog::error("kubernetes executor: journal of {}: {}", a.order.attempt_id, st.error().message);
  return st;
}

Status KubernetesExecutor::start(const StartOrder& order) {
  std::lock_guard lock(mu_);
  if (!safe_name(order.attempt_id)) {
    return errors::invalid("attempt_id", "attempt id \"" + order.attempt_id + "\" is not usable as a directory name",
                           "attempt id \"" + order.attempt_id + "\" 不能用作目录名");
  }
  if (attempts_.count(order.attempt_id) || forgotten_.count(order.attempt_id)) return ok_status();  // idempotent

  AttemptRecord a;
  a.order = order;
  std::vector<ReplicaPlacement> placements = order.placements;
  if (placements.empty()) placements.push_back(ReplicaPlacement{});
  std::string problem;
  std::set<int> seen;
  for (const auto& p : placements) {
    if (p.replica < 0 || !seen.insert(p.replica).second) problem = "invalid replica numbers in the placements";
    ReplicaRecord r;
    r.replica = p.replica;
    r.node = p.node;
    r.job = job_name(order.attempt_id, p.replica);
    a.replicas.push_back(r);
  }
  for (const auto& r : a.replicas) {
    if (!problem.empty()) break;
    auto m = job_manifest(order, r.replica, config_);
    if (!m.ok()) problem = m.error().message;
  }
  if (!problem.empty()) {
    for (auto& r : a.replicas) {
      r.outcome = "error: " + problem;
      r.finished_seq = ++finish_counter_;
    }
  }
  CP_TRY(agent_files::make_dirs(dir_of(order.attempt_id)));
  // Journal first: an agent that dies while creating finds the attempt again
  // and creates what is missing (409 for what is not).
  CP_TRY(save(a));
  auto [it, inserted] = attempts_.emplace(order.attempt_id, std::move(a));
  next_create_at_ = 0;
  refresh(it->second);
  return ok_status();
}

void KubernetesExecutor::resolve_pod(const std::string& attempt_id, ReplicaRecord& r) const {
  if (!r.pod.empty()) return;
  for (const auto& [name, p] : pods_) {
    if (p.attempt == attempt_id && p.replica == r.replica && !p.deleted) r.pod = name;
  }
}

void KubernetesExecutor::delete_jobs(AttemptRecord& a, std::int64_t grace_s) {
  const std::string jobs = kube_namespaced("batch/v1", config_.kube_namespace, "jobs");
  const std::string pods = kube_namespaced("v1", config_.kube_namespace, "pods");
  grace_s = std::max<std::int64_t>(0, grace_s);
  for (auto& r : a.replicas) {
    if (!r.created || !r.outcome.empty()) continue;
    // Foreground: the Job goes once its pod is gone, so nothing outlives it.
    json::object opts{{"apiVersion", "v1"},
                      {"kind", "DeleteOptions"},
                      {"propagationPolicy", "Foreground"},
                      {"gracePeriodSeconds", grace_s}};
    auto res = api_.del(jobs + "/" + r.job, opts, "delete jobs");
    if (!res.ok() && res.error().code != "kube_not_found") {
      note_error("delete jobs", res.error());
      next_delete_at_ = clock_.now_ms() + kCreateRetryMs;  // poll() retries, not at its every call
      continue;
    }
    note_ok("delete jobs");
    r.deleted = true;
    // The garbage collector deletes the pod with the pod's own grace
    // (terminationGracePeriodSeconds = the order's); a stop with less
    // grace (e.g. a preemption) shortens it on the pod itself.
    resolve_pod(a.order.attempt_id, r);
    if (grace_s < a.order.grace_s && !r.pod.empty()) {
      json::object pod_opts{{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"gracePeriodSeconds", grace_s}};
      auto pr = api_.del(pods + "/" + r.pod, pod_opts, "delete pods");
      if (!pr.ok() && pr.error().code != "kube_not_found") note_error("delete pods", pr.error());
    }
  }
}

void KubernetesExecutor::refresh(AttemptRecord& a) {
  if (a.terminal) return;
  bool changed = false;
  const Millis now = clock_.now_ms();
  const bool ending = !a.stop_reason.empty() || a.gang_stop;

  // 1. Create what is not created yet (a failed create is retried here).
  const std::string jobs = kube_namespaced("batch/v1", config_.kube_namespace, "jobs");
  for (auto& r : a.replicas) {
    if (r.created || !r.outcome.empty()) continue;
    if (ending) {
      r.outcome = "stopped";  // never created: nothing to stop
      r.finished_seq = ++finish_counter_;
      changed = true;
      continue;
    }
    if (now < next_create_at_) break;
    auto manifest = job_manifest(a.order, r.replica, config_);
    if (!manifest.ok()) {  // checked in start(); a config change since may still break it
      r.outcome = "error: " + manifest.error().message;
      r.finished_seq = ++finish_counter_;
      changed = true;
      continue;
    }
    auto res = api_.post(jobs, *manifest, "create jobs");
    if (res.ok() || res.error().code == "kube_already_exists") {
      note_ok("create jobs");
      r.created = true;
      if (a.started_at == 0) a.started_at = now;
      changed = true;
      continue;
    }
    const Error& e = res.error();
    if (e.code == "kube_invalid" || e.status == 400) {
      // The order itself is bad for this cluster: retrying cannot help.
      r.outcome = "error: " + e.message;
      r.finished_seq = ++finish_counter_;
      changed = true;
      continue;
    }
    // Credentials, permissions, the API down, a missing namespace: the
    // attempt stays unstarted and is tried again; engine() says why.
    Error shown = e;
    if (!engine_level(e)) shown.code = "kube_error";
    note_error("create jobs", shown);
    next_create_at_ = now + kCreateRetryMs;
    break;
  }

  // 2. What the pods say (once the watch has listed them at least once).
  if (synced_) {
    for (auto& r : a.replicas) {
      if (!r.created || !r.outcome.empty()) continue;
      const PodView* view = nullptr;
      for (const auto& [name, p] : pods_) {
        if (p.attempt != a.order.attempt_id || p.replica != r.replica) continue;
        // The pod journaled first; else a live one over a deleted one.
        if (!view || name == r.pod || (view->deleted && !p.deleted && view->name != r.pod)) view = &p;
      }
      if (view && r.pod != view->name) {
        r.pod = view->name;
        changed = true;
      }
      std::string outcome;
      if (view && view->phase == "Succeeded") {
        outcome = "exit 0";
      } else if (view && view->phase == "Failed") {
        outcome = view->exit_code ? "exit " + std::to_string(*view->exit_code)
                                  : "error: pod failed" + (view->reason.empty() ? "" : ": " + view->reason) +
                                        (view->message.empty() ? "" : ": " + view->message);
        r.detail = view->reason;
      } else if (view && view->deleted) {
        outcome = r.deleted ? "stopped" : "lost";
      } else if (!view && !r.pod.empty()) {
        outcome = r.deleted ? "stopped" : "lost";  // seen before, not in the list now
      } else if (!view && r.deleted) {
        outcome = "stopped";  // deleted before its pod appeared
      }
      if (!outcome.empty()) {
        r.outcome = outcome;
        r.finished_seq = ++finish_counter_;
        changed = true;
      }
    }
  }

  // 3. A stop whose pods never confirm (node down): gone after grace + slack.
  if (a.kill_at != 0 && now >= a.kill_at + config_.stop_slack_s * 1000) {
    for (auto& r : a.replicas) {
      if (!r.outcome.empty()) continue;
      r.outcome = "stopped";
      r.finished_seq = ++finish_counter_;
      changed = true;
    }
  }

  const ReplicaRecord* first_failure = nullptr;
  bool running = false;
  for (const auto& r : a.replicas) {
    if (r.outcome.empty()) running = true;
    if (is_failure(r.outcome) && (!first_failure || r.finished_seq < first_failure->finished_seq)) first_failure = &r;
  }
  if (running) {
    // Gang semantics: one replica failed, the others cannot make progress.
    if (first_failure && !a.gang_stop && a.stop_reason.empty()) {
      a.gang_stop = true;
      a.stop_grace_s = a.order.grace_s;
      a.kill_at = now + std::max<std::int64_t>(0, a.order.grace_s) * 1000;
      changed = true;
    }
    if (a.gang_stop || !a.stop_reason.empty()) {
      bool pending_delete = false;
      for (const auto& r : a.replicas) pending_delete = pending_delete || (r.created && !r.deleted && r.outcome.empty());
      if (pending_delete && now >= next_delete_at_) {
        delete_jobs(a, a.stop_grace_s);
        changed = true;
      }
    }
    // What the pods wait for, shown while the attempt runs.
    std::string waiting;
    for (const auto& r : a.replicas) {
      if (!r.created) {
        auto p = problems_.find("create jobs");
        if (p != problems_.end()) waiting = "not started: " + p->second.message;
        break;
      }
      auto it = pods_.find(r.pod);
      if (it == pods_.end() || it->second.phase != "Pending" || it->second.reason.empty()) continue;
      waiting = "replica " + std::to_string(r.replica) + " waiting: " + it->second.reason +
                (it->second.message.empty() ? "" : ": " + it->second.message);
      break;
    }
    if (waiting != a.message) {
      a.message = waiting;
      changed = true;
    }
  } else {
    std::optional<int> exit_code = 0;
    std::string failure;
    if (first_failure) {
      const auto& o = first_failure->outcome;
      if (o.starts_with("exit ")) {
        exit_code = std::atoi(o.c_str() + 5);
        failure = "exited with code " + o.substr(5);
        if (!first_failure->detail.empty() && first_failure->detail != "Error") {
          failure += " (" + first_failure->detail + ")";
        }
      } else {
        exit_code.reset();
        failure = o == "lost" ? "lost: pod " + first_failure->pod + " disappeared" : o.substr(7);  // "error: "
      }
      if (a.replicas.size() > 1) failure = "replica " + std::to_string(first_failure->replica) + ": " + failure;
    }
    a.exit_code = exit_code;
    if (!a.stop_reason.empty()) {
      a.state = reason_state(a.stop_reason);
      a.message = stop_message(a.stop_reason);
    } else if (first_failure) {
      a.state = first_failure->outcome == "lost" ? AttemptState::Lost : AttemptState::Failed;
      a.message = failure;
    } else {
      a.state = AttemptState::Succeeded;
      a.message.clear();
    }
    a.finished_at = now;
    a.terminal = true;
    a.kill_at = 0;
    changed = true;
    spdlog::info("kubernetes executor: attempt {} ended: {} {}", a.order.attempt_id,
                 boost::describe::enum_to_string(a.state, "?"), a.message);
  }
  if (changed) (void)save(a);
}

void KubernetesExecutor::stop(const std::string& attempt_id, const std::string& reason, std::int64_t grace_s) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end()) return;
  AttemptRecord& a = it->second;
  refresh(a);
  if (a.terminal) return;
  // A gang already failing stays Failed: the failure came first.
  if (a.stop_reason.empty() && !a.gang_stop) a.stop_reason = reason.empty() ? std::string(kStopCancel) : reason;
  grace_s = std::max<std::int64_t>(0, grace_s);
  const Millis deadline = clock_.now_ms() + grace_s * 1000;
  if (a.kill_at == 0 || deadline < a.kill_at) a.kill_at = deadline;
  if (a.stop_grace_s < 0 || grace_s < a.stop_grace_s) {
    // First stop, or a later one in more of a hurry: (re)send the deletes.
    spdlog::info("kubernetes executor: stopping attempt {} ({}, grace {} s)", attempt_id, reason, grace_s);
    a.stop_grace_s = grace_s;
    for (auto& r : a.replicas) r.deleted = false;
    delete_jobs(a, grace_s);
  }
  (void)save(a);
  refresh(a);
}

AttemptReport KubernetesExecutor::report_of(const AttemptRecord& a) const {
  AttemptReport rep;
  rep.attempt_id = a.order.attempt_id;
  rep.epoch = a.order.epoch;
  rep.started_at = a.started_at;
  rep.message = a.message;
  if (a.terminal) {
    rep.state = a.state;
    rep.exit_code = a.exit_code;
    rep.finished_at = a.finished_at;
    return rep;
  }
  bool all_created = true;
  for (const auto& r : a.replicas) all_created = all_created && (r.created || !r.outcome.empty());
  if (!a.stop_reason.empty() || a.gang_stop) {
    rep.state = AttemptState::Stopping;
  } else {
    // Not every Job exists yet (e.g. create forbidden): still Dispatched, so
    // the server does not count the attempt as started.
    rep.state = all_created ? AttemptState::Running : AttemptState::Dispatched;
  }
  return rep;
}

std::vector<AttemptReport> KubernetesExecutor::poll() {
  std::lock_guard lock(mu_);
  std::vector<AttemptReport> out;
  for (auto& [id, a] : attempts_) {
    if (a.acked) continue;
    refresh(a);
    out.push_back(report_of(a));
  }
  return out;
}

void KubernetesExecutor::forget(const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end() || it->second.acked) return;
  if (!it->second.terminal) {
    spdlog::warn("kubernetes executor: ignoring an ack of attempt {}, which is still running", attempt_id);
    return;
  }
  it->second.acked = true;
  (void)save(it->second);
  maybe_remove(attempt_id);
}

void KubernetesExecutor::maybe_remove(const std::string& attempt_id) {
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end() || !it->second.acked) return;
  auto& a = it->second;
  if (!a.logs_refused) {
    for (const auto& r : a.replicas) {
      if (r.pod.empty()) continue;  // no pod: no log
      if (r.log_end < 0 || r.log_shipped < r.log_end) return;
    }
  }
  // The logs are shipped: the Jobs may go now rather than at their TTL.
  const std::string jobs = kube_namespaced("batch/v1", config_.kube_namespace, "jobs");
  for (const auto& r : a.replicas) {
    if (!r.created) continue;
    json::object opts{{"apiVersion", "v1"}, {"kind", "DeleteOptions"}, {"propagationPolicy", "Background"}};
    auto res = api_.del(jobs + "/" + r.job, opts, "delete jobs");
    if (!res.ok() && res.error().code != "kube_not_found") note_error("delete jobs", res.error());
  }
  std::error_code ec;
  fs::remove_all(dir_of(attempt_id), ec);
  if (ec) spdlog::warn("kubernetes executor: cannot remove {}: {}", dir_of(attempt_id), ec.message());
  for (auto p = pods_.begin(); p != pods_.end();) p = p->second.attempt == attempt_id ? pods_.erase(p) : std::next(p);
  attempts_.erase(it);
  forgotten_.insert(attempt_id);
}

std::vector<LogPiece> KubernetesExecutor::read_new_logs(std::size_t max_bytes) {
  std::lock_guard lock(mu_);
  std::vector<LogPiece> out;
  std::size_t budget = max_bytes;
  const std::string pods = kube_namespaced("v1", config_.kube_namespace, "pods");
  for (auto& [id, a] : attempts_) {
    if (a.logs_refused) continue;
    for (auto& r : a.replicas) {
      if (budget == 0) return out;
      resolve_pod(id, r);
      if (r.pod.empty() || (r.log_end >= 0 && r.log_shipped >= r.log_end)) continue;
      auto view = pods_.find(r.pod);
      if (r.outcome.empty() && (view == pods_.end() || view->second.phase == "Pending")) continue;  // no log yet
      const std::size_t want = std::min(config_.log_chunk_bytes, budget);
      // The whole log from its start, cut at what this piece needs.
      const std::int64_t limit = r.log_shipped + static_cast<std::int64_t>(want);
      auto resp = api_.raw("GET", pods + "/" + url_encode(r.pod) + "/log?container=main&limitBytes=" +
                                      std::to_string(limit));
      if (!resp.ok()) {
        note_error("get pods/log", resp.error());
        continue;
      }
      if (resp->status == 404 && !r.outcome.empty()) {
        r.log_end = r.log_shipped;  // the pod is gone and its log with it
        (void)save(a);
        continue;
      }
      if (resp->status != 200) {
        auto e = kube_status_error(resp->status, resp->body, "get pods/log");
        if (e.code == "kube_unauthorized" || e.code == "kube_forbidden") note_error("get pods/log", e);
        continue;
      }
      note_ok("get pods/log");
      const auto size = static_cast<std::int64_t>(resp->body.size());
      const bool at_end = !r.outcome.empty() && size < limit;
      if (at_end && r.log_end != size) {
        r.log_end = size;
        (void)save(a);
      }
      if (size <= r.log_shipped) continue;
      LogPiece piece;
      piece.attempt_id = id;
      piece.task_id = a.order.task_id;
      piece.epoch = a.order.epoch;
      piece.replica = r.replica;
      piece.offset = r.log_shipped;
      piece.data = resp->body.substr(static_cast<std::size_t>(r.log_shipped));
      piece.final = at_end;
      budget -= std::min(budget, piece.data.size());
      out.push_back(std::move(piece));
    }
  }
  return out;
}

void KubernetesExecutor::logs_shipped(const std::string& attempt_id, int replica, std::int64_t new_offset) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end()) return;
  for (auto& r : it->second.replicas) {
    if (r.replica != replica || new_offset <= r.log_shipped) continue;
    r.log_shipped = new_offset;
    (void)save(it->second);
  }
  maybe_remove(attempt_id);
}

void KubernetesExecutor::logs_refused(const std::string& attempt_id) {
  std::lock_guard lock(mu_);
  auto it = attempts_.find(attempt_id);
  if (it == attempts_.end() || it->second.logs_refused) return;
  it->second.logs_refused = true;
  (void)save(it->second);
  maybe_remove(attempt_id);
}

EngineStatus KubernetesExecutor::engine() {
  std::lock_guard lock(mu_);
  EngineStatus st;
  // Credentials and permissions first: they are what a person must fix.
  const Error* worst = nullptr;
  for (const auto& [op, e] : problems_) {
    if (!worst || (e.code == "kube_unauthorized" || e.code == "kube_forbidden")) worst = &e;
  }
  if (worst) {
    st.ok = false;
    st.message = worst->message;
  } else {
    st.message = "kubernetes " + kube_.server + ", namespace " + config_.kube_namespace;
  }
  return st;
}

std::vector<NodeReport> KubernetesExecutor::inventory() {
  std::lock_guard lock(mu_);
  auto list = api_.get("/api/v1/nodes", "list nodes");
  if (!list.ok()) {
    note_error("list nodes", list.error());
    return last_nodes_;
  }
  note_ok("list nodes");
  std::vector<NodeReport> out;
  const json::value* items = at_path(*list, {"items"});
  if (!items || !items->is_array()) return out;
  for (const auto& node : items->as_array()) {
    NodeReport n;
    n.name = str_at(node, {"metadata", "name"});
    if (n.name.empty()) continue;
    if (const auto* labels = at_path(node, {"metadata", "labels"}); labels && labels->is_object()) {
      for (const auto& kv : labels->as_object()) {
        if (kv.value().is_string()) n.labels[std::string(kv.key())] = std::string(kv.value().as_string());
      }
    }
    const std::string product = n.labels.count(config_.gpu_product_label) ? n.labels[config_.gpu_product_label] : "";
    const std::string type = gpu_type_of(product);
    if (!type.empty()) {
      n.labels[std::string(kLabelGpuType)] = type;
      config_.gpu_products[type] = product;
    }
    auto resources = [&](const char* field) {
      Resources r;
      const auto* m = at_path(node, {"status", field});
      if (!m || !m->is_object()) return r;
      for (const auto& kv : m->as_object()) {
        if (!kv.value().is_string()) continue;
        const std::string key(kv.key());
        const std::string q(kv.value().as_string());
        std::string name;
        if (key == "cpu" || key == "memory") {
          name = key;
        } else if (key == "nvidia.com/gpu" && !type.empty()) {
          name = std::string(kGpuPrefix) + type;
        } else if (key.starts_with("nvidia.com/mig-")) {
          name = std::string(kGpuPrefix) + key.substr(std::string("nvidia.com/").size());
        } else {
          continue;  // pods, ephemeral-storage, hugepages-*: not scheduled by Cubeplane
        }
        auto amount = parse_quantity(name, q);
        if (amount.ok() && *amount > 0) r.set(name, *amount);
      }
      return r;
    };
    n.capacity = resources("capacity");
    n.allocatable = resources("allocatable");
    n.ready = false;
    n.reason = "no Ready condition";
    if (const auto* conds = at_path(node, {"status", "conditions"}); conds && conds->is_array()) {
      for (const auto& c : conds->as_array()) {
        if (str_at(c, {"type"}) != "Ready") continue;
        n.ready = str_at(c, {"status"}) == "True";
        n.reason = n.ready ? "" : str_at(c, {"reason"}) + (str_at(c, {"message"}).empty() ? "" : ": " + str_at(c, {"message"}));
      }
    }
    if (const auto* u = at_path(node, {"spec", "unschedulable"}); u && u->is_bool() && u->as_bool()) {
      n.ready = false;
      n.reason = "cordoned (spec.unschedulable)";
    }
    n.facts.kernel = str_at(node, {"status", "nodeInfo", "kernelVersion"});
    n.facts.runtime = str_at(node, {"status", "nodeInfo", "containerRuntimeVersion"});
    n.facts.os = str_at(node, {"status", "nodeInfo", "osImage"});
    // GPU feature discovery labels, when the NVIDIA operator runs.
    auto label = [&](const char* k) { return n.labels.count(k) ? n.labels[k] : std::string(); };
    if (!label("nvidia.com/cuda.driver.major").empty()) {
      n.facts.driver = label("nvidia.com/cuda.driver.major") + "." + label("nvidia.com/cuda.driver.minor") + "." +
                       label("nvidia.com/cuda.driver.rev");
    }
    if (!label("nvidia.com/cuda.runtime.major").empty()) {
      n.facts.cuda = label("nvidia.com/cuda.runtime.major") + "." + label("nvidia.com/cuda.runtime.minor");
    }
    const std::int64_t count = type.empty() ? 0 : n.capacity.get(std::string(kGpuPrefix) + type);
    std::int64_t mem_mib = 0;
    if (auto m = label("nvidia.com/gpu.memory"); !m.empty()) mem_mib = std::atoll(m.c_str());
    for (std::int64_t i = 0; i < count; ++i) {
      GpuDevice g;
      g.index = static_cast<int>(i);
      g.uuid = "k8s-" + n.name + "-" + std::to_string(i);  // the API does not tell device uuids
      g.model = type;
      g.memory_total = mem_mib * 1024 * 1024;
      g.utilization = -1;
      n.gpus.push_back(std::move(g));
    }
    out.push_back(std::move(n));
  }
  last_nodes_ = out;
  return out;
}

// ---- the watch ---------------------------------------------------------------

void KubernetesExecutor::apply_pod(const json::value& pod, bool deleted) {
  PodView v;
  v.name = str_at(pod, {"metadata", "name"});
  v.attempt = str_at(pod, {"metadata", "labels", kLabelAttempt});
  const std::string replica = str_at(pod, {"metadata", "labels", kLabelReplica});
  if (v.name.empty() || v.attempt.empty() || replica.empty()) return;
  v.replica = std::atoi(replica.c_str());
  v.phase = str_at(pod, {"status", "phase"});
  v.deleted = deleted;
  v.reason = str_at(pod, {"status", "reason"});  // Evicted, DeadlineExceeded, ...
  v.message = str_at(pod, {"status", "message"});
  if (const auto* cs = at_path(pod, {"status", "containerStatuses"}); cs && cs->is_array()) {
    for (const auto& c : cs->as_array()) {
      if (const auto* t = at_path(c, {"state", "terminated"}); t && t->is_object()) {
        if (const auto* code = t->as_object().if_contains("exitCode"); code && code->is_int64()) {
          v.exit_code = static_cast<int>(code->as_int64());
        }
        if (!str_at(*t, {"reason"}).empty()) v.reason = str_at(*t, {"reason"});  // OOMKilled, Error, Completed
        if (!str_at(*t, {"message"}).empty()) v.message = str_at(*t, {"message"});
      } else if (const auto* w = at_path(c, {"state", "waiting"}); w && w->is_object()) {
        v.reason = str_at(*w, {"reason"});  // ImagePullBackOff, ErrImagePull, ContainerCreating, ...
        v.message = str_at(*w, {"message"});
      }
    }
  }
  if (v.phase == "Pending" && v.reason.empty()) {
    if (const auto* conds = at_path(pod, {"status", "conditions"}); conds && conds->is_array()) {
      for (const auto& c : conds->as_array()) {
        if (str_at(c, {"type"}) == "PodScheduled" && str_at(c, {"status"}) == "False") {
          v.reason = str_at(c, {"reason"});  // Unschedulable
          v.message = str_at(c, {"message"});
        }
      }
    }
  }
  std::lock_guard lock(mu_);
  if (!attempts_.count(v.attempt)) return;  // another agent's, or forgotten
  pods_[v.name] = std::move(v);
}

bool KubernetesExecutor::relist(KubeClient& client, std::string& rv) {
  auto list = client.get(kube_namespaced("v1", config_.kube_namespace, "pods") + "?labelSelector=" + selector(),
                         "list pods");
  if (!list.ok()) {
    std::lock_guard lock(mu_);
    note_error("list pods", list.error());
    return false;
  }
  rv = str_at(*list, {"metadata", "resourceVersion"});
  std::set<std::string> present;
  if (const auto* items = at_path(*list, {"items"}); items && items->is_array()) {
    for (const auto& p : items->as_array()) {
      apply_pod(p, false);
      present.insert(str_at(p, {"metadata", "name"}));
    }
  }
  std::lock_guard lock(mu_);
  // What the list no longer has was deleted while we did not watch.
  for (auto& [name, p] : pods_) {
    if (!present.count(name)) p.deleted = true;
  }
  synced_ = true;
  ++lists_;
  note_ok("list pods");
  cv_.notify_all();
  return true;
}

KubernetesExecutor::WatchEnd KubernetesExecutor::watch_once(KubeClient& client, std::string& rv) {
  const std::string path = kube_namespaced("v1", config_.kube_namespace, "pods") + "?labelSelector=" + selector() +
                           "&watch=1&allowWatchBookmarks=true&resourceVersion=" + url_encode(rv) +
                           "&timeoutSeconds=" + std::to_string(config_.watch_timeout_s);
  WatchEnd end = WatchEnd::kResume;
  auto on_line = [&](std::string_view line) {
    boost::system::error_code ec;
    json::value ev = json::parse(line, ec);
    if (ec || !ev.is_object()) return true;  // not ours to judge: skip it
    const std::string type = str_at(ev, {"type"});
    const json::value* obj = at_path(ev, {"object"});
    if (type.empty()) {
      // Not an event: a Status answering the watch request itself.
      const auto* code = at_path(ev, {"code"});
      if (code && code->is_int64() && code->as_int64() == 410) {
        end = WatchEnd::kRelist;
      } else {
        std::lock_guard lock(mu_);
        note_error("watch pods", kube_status_error(code && code->is_int64() ? code->as_int64() : 500, line,
                                                   "watch pods"));
        end = WatchEnd::kRelistLater;
      }
      return false;
    }
    if (!obj) return true;
    if (type == "ERROR") {
      const auto* code = at_path(*obj, {"code"});
      // 410: our resourceVersion is older than what etcd keeps; list again.
      if (code && code->is_int64() && code->as_int64() == 410) {
        end = WatchEnd::kRelist;
      } else {
        std::lock_guard lock(mu_);
        note_error("watch pods", kube_status_error(code && code->is_int64() ? code->as_int64() : 500,
                                                   json::serialize(*obj), "watch pods"));
        end = WatchEnd::kRelistLater;
      }
      return false;
    }
    const std::string obj_rv = str_at(*obj, {"metadata", "resourceVersion"});
    if (type == "ADDED" || type == "MODIFIED" || type == "DELETED") apply_pod(*obj, type == "DELETED");
    if (!obj_rv.empty()) rv = obj_rv;  // BOOKMARK carries just this
    return true;
  };
  auto res = client.stream(path, on_line, [this] { return stopping_.load(); },
                           (config_.watch_timeout_s + 30) * 1000);
  if (!res.ok()) {
    if (res.error().code != "aborted") {
      std::lock_guard lock(mu_);
      note_error("watch pods", res.error());
      return WatchEnd::kRelistLater;
    }
    return WatchEnd::kResume;
  }
  if (end == WatchEnd::kResume && (*res < 200 || *res >= 300)) return *res == 410 ? WatchEnd::kRelist : WatchEnd::kRelistLater;
  if (end == WatchEnd::kResume) {
    std::lock_guard lock(mu_);
    note_ok("watch pods");
  }
  return end;
}

void KubernetesExecutor::wait_backoff() {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, std::chrono::milliseconds(config_.relist_backoff_ms), [this] { return stopping_.load(); });
}

void KubernetesExecutor::watch_loop() {
  KubeClient client(kube_);  // its own connection: a watch holds one for minutes
  std::string rv;
  bool need_list = true;
  while (!stopping_) {
    if (need_list) {
      if (!relist(client, rv)) {
        wait_backoff();
        continue;
      }
      need_list = false;
    }
    switch (watch_once(client, rv)) {
      case WatchEnd::kResume:
        break;  // the server ended it (timeoutSeconds): watch on from rv
      case WatchEnd::kRelist:
        need_list = true;
        break;
      case WatchEnd::kRelistLater:
        need_list = true;
        wait_backoff();
        break;
    }
  }
}

}  // namespace cp
