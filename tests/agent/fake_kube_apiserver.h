// A fake kube-apiserver for the Kubernetes executor's tests: plain POSIX
// sockets on 127.0.0.1, port 0, answering the few endpoints the executor
// uses the way the real one does:
//   - every object carries metadata.resourceVersion from one global counter;
//     lists carry the list's resourceVersion;
//   - watches stream chunked JSON lines (ADDED, MODIFIED, DELETED, BOOKMARK,
//     ERROR) from a resourceVersion; one older than the compacted history
//     gets an ERROR event with a 410 Expired Status, as etcd compaction causes;
//   - failures are Status objects (kind Status, reason, message, code,
//     details), with the real API's wording for 401, 403, 404, 409, 422;
//   - a created Job gets its pod at once (the Job controller's part) unless
//     auto_pods is off; deleting a Job (Foreground) ends its pods with 143
//     and deletes them, the kubelet's and garbage collector's part.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/json.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace cp::testing {

namespace kjson = boost::json;

struct KubeRequest {
  std::string method;
  std::string path;  // without the query
  std::map<std::string, std::string> query;
  std::map<std::string, std::string> headers;
  std::string body;
};

class FakeKubeApiServer {
 public:
  explicit FakeKubeApiServer(std::string token = "good-token",
                             std::string user = "system:serviceaccount:cubeplane:agent")
      : token_(std::move(token)), user_(std::move(user)) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    ::listen(listen_fd_, 64);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    acceptor_ = std::thread([this] { accept_loop(); });
  }
  ~FakeKubeApiServer() {
    stopping_ = true;
    cv_.notify_all();
    acceptor_.join();
    std::vector<std::thread> conns;
    {
      std::lock_guard lock(mu_);
      conns.swap(connections_);
    }
    for (auto& t : conns) t.join();
    ::close(listen_fd_);
  }
  FakeKubeApiServer(const FakeKubeApiServer&) = delete;
  FakeKubeApiServer& operator=(const FakeKubeApiServer&) = delete;

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // ---- what the test controls -------------------------------------------------

  void set_token(std::string t) {
    std::lock_guard lock(mu_);
    token_ = std::move(t);
  }
  // verb: create | get | list | watch | delete; resource: jobs | pods | pods/log | nodes.
  void forbid(const std::string& verb, const std::string& resource) {
    std::lock_guard lock(mu_);
    forbidden_.insert(verb + " " + resource);
  }
  void allow(const std::string& verb, const std::string& resource) {
    std::lock_guard lock(mu_);
    forbidden_.erase(verb + " " + resource);
  }
  void set_auto_pods(bool on) {
    std::lock_guard lock(mu_);
    auto_pods_ = on;
  }
  void add_node(kjson::object node) {
    std::lock_guard lock(mu_);
    node["metadata"].as_object()["resourceVersion"] = std::to_string(++rv_);
    nodes_.push_back(std::move(node));
  }

  // The pod the Job controller made for `job` ("" when none).
  std::string pod_of(const std::string& job) {
    std::lock_guard lock(mu_);
    for (const auto& [name, p] : pods_) {
      if (label(p, "job-name") == job) return name;
    }
    return "";
  }
  std::optional<kjson::object> job(const std::string& name) {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(name);
    if (it == jobs_.end()) return std::nullopt;
    return it->second;
  }
  std::size_t job_count() {
    std::lock_guard lock(mu_);
    return jobs_.size();
  }

  // Pod state changes, each a MODIFIED event.
  void pod_running(const std::string& pod) {
    set_status(pod, "Running", kjson::object{{"running", kjson::object{{"startedAt", "2026-01-01T00:00:00Z"}}}});
  }
  void pod_waiting(const std::string& pod, const std::string& reason, const std::string& message) {
    set_status(pod, "Pending", kjson::object{{"waiting", kjson::object{{"reason", reason}, {"message", message}}}});
  }
  void pod_exited(const std::string& pod, int code, const std::string& reason = "") {
    kjson::object t{{"exitCode", code}, {"reason", reason.empty() ? (code == 0 ? "Completed" : "Error") : reason}};
    set_status(pod, code == 0 ? "Succeeded" : "Failed", kjson::object{{"terminated", t}});
  }
  void set_log(const std::string& pod, std::string text) {
    std::lock_guard lock(mu_);
    logs_[pod] = std::move(text);
  }
  void delete_pod(const std::string& pod) {
    std::lock_guard lock(mu_);
    erase_pod(pod);
  }
  // etcd compaction: every resourceVersion so far is too old to watch from;
  // open watches get ERROR 410 and end.
  void compact() {
    std::lock_guard lock(mu_);
    floor_ = rv_;
    history_.clear();
    ++compactions_;
    cv_.notify_all();
  }
  // The connection of every open watch drops without a word.
  void drop_watches() {
    std::lock_guard lock(mu_);
    ++drops_;
    cv_.notify_all();
  }
  void bookmark() {
    std::lock_guard lock(mu_);
    ++rv_;
    history_.push_back(Event{rv_, "BOOKMARK",
                             kjson::object{{"kind", "Pod"},
                                           {"apiVersion", "v1"},
                                           {"metadata", kjson::object{{"resourceVersion", std::to_string(rv_)}}}}});
    cv_.notify_all();
  }

  std::vector<KubeRequest> requests() {
    std::lock_guard lock(mu_);
    return requests_;
  }
  std::vector<KubeRequest> requests(const std::string& method, const std::string& path_part) {
    std::vector<KubeRequest> out;
    for (auto& r : requests()) {
      if (r.method == method && r.path.find(path_part) != std::string::npos) out.push_back(r);
    }
    return out;
  }
  int watches_started() const { return watches_started_; }
  int open_watches() const { return open_watches_; }

 private:
  struct Event {
    long rv;
    std::string type;
    kjson::object object;
  };
  struct Answer {
    int status = 200;
    std::string body;
    std::string content_type = "application/json";
    bool watch = false;
    long from_rv = 0;
    long timeout_s = 300;
    int drops = 0;  // drop_watches() and compact() calls before the watch began
    int compactions = 0;
  };

  static std::string label(const kjson::object& obj, const std::string& key) {
    const auto* md = obj.if_contains("metadata");
    if (!md || !md->is_object()) return "";
    const auto* labels = md->as_object().if_contains("labels");
    if (!labels || !labels->is_object()) return "";
    const auto* v = labels->as_object().if_contains(key);
    return v && v->is_string() ? std::string(v->as_string()) : "";
  }

  static std::string status_body(int code, const std::string& reason, const std::string& message,
                                 kjson::object details = {}) {
    kjson::object s{{"kind", "Status"},       {"apiVersion", "v1"}, {"metadata", kjson::object{}},
                    {"status", "Failure"},    {"message", message}, {"reason", reason},
                    {"code", code}};
    if (!details.empty()) s["details"] = std::move(details);
    return kjson::serialize(s);
  }
  static std::string group_of(const std::string& resource) { return resource == "jobs" ? "batch" : ""; }
  static std::string qualified(const std::string& resource) {
    return resource == "jobs" ? "jobs.batch" : resource.substr(0, resource.find('/'));
  }

  // ---- state changes (mu_ held) ----------------------------------------------

  void emit(const std::string& type, const kjson::object& obj) {
    history_.push_back(Event{rv_, type, obj});
    cv_.notify_all();
  }
  void set_status(const std::string& pod, const std::string& phase, kjson::object state) {
    std::lock_guard lock(mu_);
    auto it = pods_.find(pod);
    if (it == pods_.end()) return;
    auto& p = it->second;
    p["status"] = kjson::object{
        {"phase", phase},
        {"containerStatuses",
         kjson::array{kjson::object{{"name", "main"}, {"state", std::move(state)}, {"ready", phase == "Running"}}}}};
    p["metadata"].as_object()["resourceVersion"] = std::to_string(++rv_);
    emit("MODIFIED", p);
  }
  void erase_pod(const std::string& pod) {
    auto it = pods_.find(pod);
    if (it == pods_.end()) return;
    it->second["metadata"].as_object()["resourceVersion"] = std::to_string(++rv_);
    emit("DELETED", it->second);
    pods_.erase(it);
  }
  void make_pod(const std::string& job_name, const kjson::object& job) {
    const auto& tmpl = job.at("spec").at("template").as_object();
    kjson::object labels = tmpl.at("metadata").at("labels").as_object();
    labels["job-name"] = job_name;
    labels["batch.kubernetes.io/job-name"] = job_name;
    labels["controller-uid"] = job.at("metadata").at("uid");
    char suffix[16];
    std::snprintf(suffix, sizeof suffix, "%05d", ++pod_counter_);
    std::string name = job_name + "-x" + suffix;
    kjson::object spec = tmpl.at("spec").as_object();
    kjson::object p{{"kind", "Pod"},
                    {"apiVersion", "v1"},
                    {"metadata", kjson::object{{"name", name},
                                               {"namespace", job.at("metadata").at("namespace")},
                                               {"labels", labels},
                                               {"resourceVersion", std::to_string(++rv_)}}},
                    {"spec", spec},
                    {"status", kjson::object{{"phase", "Pending"}}}};
    pods_[name] = p;
    emit("ADDED", p);
  }

  // ---- requests ---------------------------------------------------------------

  std::optional<Answer> check_access(const KubeRequest& req, const std::string& verb, const std::string& resource,
                                     const std::string& ns, const std::string& name) {
    auto auth = req.headers.find("authorization");
    if (auth == req.headers.end() || auth->second != "Bearer " + token_) {
      return Answer{401, status_body(401, "Unauthorized", "Unauthorized")};
    }
    if (!forbidden_.count(verb + " " + resource)) return std::nullopt;
    std::string msg = qualified(resource) + (name.empty() ? "" : " \"" + name + "\"") + " is forbidden: User \"" +
                      user_ + "\" cannot " + verb + " resource \"" + resource + "\" in API group \"" +
                      group_of(resource) + "\"" + (ns.empty() ? " at the cluster scope" : " in the namespace \"" + ns + "\"");
    kjson::object details{{"kind", resource}};
    if (!name.empty()) details["name"] = name;
    if (!group_of(resource).empty()) details["group"] = group_of(resource);
    return Answer{403, status_body(403, "Forbidden", msg, details)};
  }

  static bool dns_label(const std::string& s) {
    if (s.empty() || s.size() > 63) return false;
    auto ok = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
    if (!ok(s.front()) || !ok(s.back())) return false;
    return std::all_of(s.begin(), s.end(), [&](char c) { return ok(c) || c == '-'; });
  }

  Answer handle(const KubeRequest& req) {
    std::lock_guard lock(mu_);
    requests_.push_back(req);
    std::vector<std::string> seg;
    for (std::size_t pos = 1; pos <= req.path.size();) {
      auto e = req.path.find('/', pos);
      if (e == std::string::npos) e = req.path.size();
      seg.push_back(req.path.substr(pos, e - pos));
      pos = e + 1;
    }
    auto q = [&](const std::string& k) {
      auto it = req.query.find(k);
      return it == req.query.end() ? std::string() : it->second;
    };
    // /api/v1/nodes
    if (seg.size() == 3 && seg[0] == "api" && seg[2] == "nodes") {
      if (auto a = check_access(req, "list", "nodes", "", "")) return *a;
      kjson::array items;
      for (const auto& n : nodes_) items.push_back(n);
      return Answer{200, kjson::serialize(kjson::object{{"kind", "NodeList"},
                                                         {"apiVersion", "v1"},
                                                         {"metadata", kjson::object{{"resourceVersion", std::to_string(rv_)}}},
                                                         {"items", items}})};
    }
    // /apis/batch/v1/namespaces/<ns>/jobs[/<name>]
    if (seg.size() >= 6 && seg[0] == "apis" && seg[1] == "batch" && seg[3] == "namespaces" && seg[5] == "jobs") {
      const std::string ns = seg[4];
      const std::string name = seg.size() > 6 ? seg[6] : "";
      if (req.method == "POST" && name.empty()) {
        boost::system::error_code ec;
        kjson::value body = kjson::parse(req.body, ec);
        std::string jname = ec ? "" : std::string(body.at("metadata").at("name").as_string());
        if (auto a = check_access(req, "create", "jobs", ns, "")) return *a;
        if (!dns_label(jname)) {
          return Answer{422, status_body(422, "Invalid",
                                         "Job.batch \"" + jname + "\" is invalid: metadata.name: Invalid value: \"" +
                                             jname + "\": a lowercase RFC 1123 label must consist of lower case "
                                                     "alphanumeric characters or '-'",
                                         kjson::object{{"name", jname}, {"group", "batch"}, {"kind", "Job"}})};
        }
        if (jobs_.count(jname)) {
          return Answer{409, status_body(409, "AlreadyExists", "jobs.batch \"" + jname + "\" already exists",
                                         kjson::object{{"name", jname}, {"group", "batch"}, {"kind", "jobs"}})};
        }
        kjson::object job = body.as_object();
        auto& md = job["metadata"].as_object();
        md["uid"] = "uid-" + std::to_string(++uid_counter_);
        md["resourceVersion"] = std::to_string(++rv_);
        md["creationTimestamp"] = "2026-01-01T00:00:00Z";
        job["status"] = kjson::object{};
        jobs_[jname] = job;
        if (auto_pods_) make_pod(jname, job);
        return Answer{201, kjson::serialize(job)};
      }
      if (req.method == "DELETE" && !name.empty()) {
        if (auto a = check_access(req, "delete", "jobs", ns, name)) return *a;
        auto it = jobs_.find(name);
        if (it == jobs_.end()) {
          return Answer{404, status_body(404, "NotFound", "jobs.batch \"" + name + "\" not found",
                                         kjson::object{{"name", name}, {"group", "batch"}, {"kind", "jobs"}})};
        }
        kjson::object job = it->second;
        // The kubelet ends the containers (SIGTERM: 143), then the pods go.
        std::vector<std::string> mine;
        for (const auto& [pname, p] : pods_) {
          if (label(p, "job-name") == name) mine.push_back(pname);
        }
        for (const auto& pname : mine) {
          auto& p = pods_[pname];
          std::string phase(p["status"].as_object()["phase"].as_string());
          if (phase != "Succeeded" && phase != "Failed") {
            p["status"] = kjson::object{
                {"phase", "Failed"},
                {"containerStatuses",
                 kjson::array{kjson::object{
                     {"name", "main"},
                     {"state", kjson::object{{"terminated", kjson::object{{"exitCode", 143}, {"reason", "Error"}}}}}}}}};
            p["metadata"].as_object()["resourceVersion"] = std::to_string(++rv_);
            emit("MODIFIED", p);
          }
          erase_pod(pname);
        }
        jobs_.erase(it);
        return Answer{200, kjson::serialize(job)};
      }
      if (req.method == "GET" && !name.empty()) {
        if (auto a = check_access(req, "get", "jobs", ns, name)) return *a;
        auto it = jobs_.find(name);
        if (it == jobs_.end()) return Answer{404, status_body(404, "NotFound", "jobs.batch \"" + name + "\" not found")};
        return Answer{200, kjson::serialize(it->second)};
      }
    }
    // /api/v1/namespaces/<ns>/pods[/<name>[/log]]
    if (seg.size() >= 5 && seg[0] == "api" && seg[2] == "namespaces" && seg[4] == "pods") {
      const std::string ns = seg[3];
      const std::string name = seg.size() > 5 ? seg[5] : "";
      if (seg.size() == 7 && seg[6] == "log" && req.method == "GET") {
        if (auto a = check_access(req, "get", "pods/log", ns, name)) return *a;
        auto it = pods_.find(name);
        if (it == pods_.end()) {
          return Answer{404, status_body(404, "NotFound", "pods \"" + name + "\" not found",
                                         kjson::object{{"name", name}, {"kind", "pods"}})};
        }
        std::string phase(it->second["status"].as_object()["phase"].as_string());
        if (phase == "Pending") {
          return Answer{400, status_body(400, "BadRequest",
                                         "container \"main\" in pod \"" + name + "\" is waiting to start: "
                                         "ContainerCreating")};
        }
        std::string log = logs_[name];
        if (!q("limitBytes").empty()) log = log.substr(0, std::min<std::size_t>(log.size(), std::stoul(q("limitBytes"))));
        return Answer{200, log, "text/plain"};
      }
      if (req.method == "DELETE" && !name.empty()) {
        if (auto a = check_access(req, "delete", "pods", ns, name)) return *a;
        return Answer{200, "{}"};
      }
      if (req.method == "GET" && name.empty()) {
        const bool watch = q("watch") == "1" || q("watch") == "true";
        if (auto a = check_access(req, watch ? "watch" : "list", "pods", ns, "")) return *a;
        if (watch) {
          Answer a;
          a.watch = true;
          a.from_rv = q("resourceVersion").empty() ? rv_ : std::stol(q("resourceVersion"));
          if (!q("timeoutSeconds").empty()) a.timeout_s = std::stol(q("timeoutSeconds"));
          // Counted here, under the lock: a test that sees the watch open
          // knows that a later drop or compaction reaches it.
          a.drops = drops_;
          a.compactions = compactions_;
          ++watches_started_;
          ++open_watches_;
          return a;
        }
        kjson::array items;
        for (const auto& [pname, p] : pods_) {
          if (selected(p, q("labelSelector"))) items.push_back(p);
        }
        return Answer{200, kjson::serialize(kjson::object{{"kind", "PodList"},
                                                           {"apiVersion", "v1"},
                                                           {"metadata", kjson::object{{"resourceVersion", std::to_string(rv_)}}},
                                                           {"items", items}})};
      }
    }
    return Answer{404, status_body(404, "NotFound", "the server could not find the requested resource")};
  }

  static bool selected(const kjson::object& p, const std::string& sel) {
    if (sel.empty()) return true;
    auto eq = sel.find('=');
    return eq != std::string::npos && label(p, sel.substr(0, eq)) == sel.substr(eq + 1);
  }

  // ---- HTTP -------------------------------------------------------------------

  static std::string url_decode(const std::string& s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '%' && i + 2 < s.size()) {
        out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
        i += 2;
      } else {
        out += s[i] == '+' ? ' ' : s[i];
      }
    }
    return out;
  }

  void accept_loop() {
    while (!stopping_) {
      pollfd p{listen_fd_, POLLIN, 0};
      if (::poll(&p, 1, 20) <= 0) continue;
      int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      std::lock_guard lock(mu_);
      connections_.emplace_back([this, fd] { serve(fd); });
    }
  }

  bool read_more(int fd, std::string& buf) {
    char chunk[8192];
    while (!stopping_) {
      pollfd p{fd, POLLIN, 0};
      int rc = ::poll(&p, 1, 20);
      if (rc == 0) continue;
      if (rc < 0) return false;
      ssize_t n = ::recv(fd, chunk, sizeof(chunk), 0);
      if (n <= 0) return false;
      buf.append(chunk, static_cast<std::size_t>(n));
      return true;
    }
    return false;
  }

  static bool send_all(int fd, const std::string& out) {
    std::size_t sent = 0;
    while (sent < out.size()) {
      ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL);
      if (n <= 0) return false;
      sent += static_cast<std::size_t>(n);
    }
    return true;
  }

  static std::string chunk(const std::string& line) {
    char hex[20];
    std::snprintf(hex, sizeof hex, "%zx\r\n", line.size() + 1);
    return hex + line + "\n\r\n";
  }

  static std::string event_line(const std::string& type, const kjson::object& obj) {
    return kjson::serialize(kjson::object{{"type", type}, {"object", obj}});
  }

  // Streams events after `from_rv` until the watch ends; the connection closes then.
  void stream_watch(int fd, const Answer& a) {
    std::string head = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n"
                       "Connection: close\r\n\r\n";
    bool ok = send_all(fd, head);
    long seen = a.from_rv;
    std::unique_lock lock(mu_);
    const int drops = a.drops, compactions = a.compactions;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(a.timeout_s);
    if (a.from_rv < floor_) {
      std::string err = event_line("ERROR", kjson::parse(status_body(410, "Expired",
                                                                      "too old resource version: " +
                                                                          std::to_string(a.from_rv) + " (" +
                                                                          std::to_string(floor_) + ")"))
                                                .as_object());
      lock.unlock();
      ok = ok && send_all(fd, chunk(err)) && send_all(fd, "0\r\n\r\n");
      --open_watches_;
      ::close(fd);
      return;
    }
    while (ok && !stopping_ && std::chrono::steady_clock::now() < deadline) {
      if (drops_ != drops) {
        lock.unlock();
        --open_watches_;
        ::close(fd);  // no final chunk: a dropped connection
        return;
      }
      if (compactions_ != compactions) {
        std::string err = event_line(
            "ERROR", kjson::parse(status_body(410, "Expired", "too old resource version: " + std::to_string(seen)))
                         .as_object());
        lock.unlock();
        ok = send_all(fd, chunk(err)) && send_all(fd, "0\r\n\r\n");
        --open_watches_;
        ::close(fd);
        return;
      }
      std::string out;
      for (const auto& e : history_) {
        if (e.rv <= seen) continue;
        seen = e.rv;
        if (e.type != "BOOKMARK" && !selected(e.object, "app.kubernetes.io/managed-by=cubeplane")) continue;
        out += chunk(event_line(e.type, e.object));
      }
      if (!out.empty()) {
        lock.unlock();
        ok = send_all(fd, out);
        lock.lock();
        continue;
      }
      cv_.wait_for(lock, std::chrono::milliseconds(20));
    }
    lock.unlock();
    if (ok) send_all(fd, "0\r\n\r\n");
    --open_watches_;
    ::close(fd);
  }

  void serve(int fd) {
    std::string buf;
    while (!stopping_) {
      std::size_t head_end;
      while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
        if (!read_more(fd, buf)) {
          ::close(fd);
          return;
        }
      }
      KubeRequest req;
      std::string head = buf.substr(0, head_end);
      std::size_t line_end = head.find("\r\n");
      std::string first = head.substr(0, line_end);
      auto sp1 = first.find(' ');
      auto sp2 = first.find(' ', sp1 + 1);
      req.method = first.substr(0, sp1);
      std::string target = first.substr(sp1 + 1, sp2 - sp1 - 1);
      auto qm = target.find('?');
      req.path = target.substr(0, qm);
      if (qm != std::string::npos) {
        std::string qs = target.substr(qm + 1);
        for (std::size_t pos = 0; pos <= qs.size();) {
          auto amp = qs.find('&', pos);
          if (amp == std::string::npos) amp = qs.size();
          std::string kv = qs.substr(pos, amp - pos);
          auto eq = kv.find('=');
          if (!kv.empty()) req.query[url_decode(kv.substr(0, eq))] = eq == std::string::npos ? "" : url_decode(kv.substr(eq + 1));
          pos = amp + 1;
        }
      }
      std::size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
      while (pos < head.size()) {
        auto e = head.find("\r\n", pos);
        if (e == std::string::npos) e = head.size();
        std::string line = head.substr(pos, e - pos);
        auto colon = line.find(':');
        if (colon != std::string::npos) {
          std::string name = line.substr(0, colon);
          std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
          std::string value = line.substr(colon + 1);
          while (!value.empty() && value.front() == ' ') value.erase(0, 1);
          req.headers[name] = value;
        }
        pos = e + 2;
      }
      std::size_t length = 0;
      if (auto it = req.headers.find("content-length"); it != req.headers.end()) length = std::stoul(it->second);
      buf.erase(0, head_end + 4);
      while (buf.size() < length) {
        if (!read_more(fd, buf)) {
          ::close(fd);
          return;
        }
      }
      req.body = buf.substr(0, length);
      buf.erase(0, length);

      Answer a = handle(req);
      if (a.watch) {
        stream_watch(fd, a);
        return;
      }
      std::string out = "HTTP/1.1 " + std::to_string(a.status) + " X\r\nContent-Type: " + a.content_type +
                        "\r\nContent-Length: " + std::to_string(a.body.size()) + "\r\n\r\n" + a.body;
      if (!send_all(fd, out)) {
        ::close(fd);
        return;
      }
    }
    ::close(fd);
  }

  std::string token_;
  std::string user_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::thread> connections_;

  long rv_ = 100;
  long floor_ = 0;  // watches from before this get 410
  int drops_ = 0;
  int compactions_ = 0;
  int pod_counter_ = 0;
  int uid_counter_ = 0;
  bool auto_pods_ = true;
  std::set<std::string> forbidden_;
  std::map<std::string, kjson::object> jobs_;
  std::map<std::string, kjson::object> pods_;
  std::map<std::string, std::string> logs_;
  std::vector<kjson::object> nodes_;
  std::vector<Event> history_;
  std::vector<KubeRequest> requests_;
  std::atomic<int> watches_started_{0};
  std::atomic<int> open_watches_{0};
};

}  // namespace cp::testing
