#include "agent/executors/host_probe.h"

#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace cp {

HostFacts probe_host_facts() {
  HostFacts f;
  std::ifstream in("/etc/os-release");
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("PRETTY_NAME=")) {
      std::string v = line.substr(12);
      if (v.size() >= 2 && (v.front() == '"' || v.front() == '\'') && v.back() == v.front()) {
        v = v.substr(1, v.size() - 2);
      }
      f.os = v;
    }
  }
  utsname u{};
  if (::uname(&u) == 0) f.kernel = std::string(u.sysname) + " " + u.release;
  f.runtime = "process";
  f.mounts = real_mount_points("/proc/self/mounts");
  return f;
}

std::vector<std::string> real_mount_points(const std::string& mounts_file) {
  // Pseudo and virtual filesystems say nothing about storage.
  static const std::set<std::string> kSkip = {"proc",    "sysfs",     "cgroup",  "cgroup2",    "devpts",
                                              "mqueue",  "debugfs",   "tracefs", "securityfs", "pstore",
                                              "bpf",     "configfs",  "fusectl", "hugetlbfs",  "autofs",
                                              "binfmt_misc", "devtmpfs", "rpc_pipefs", "nsfs", "efivarfs"};
  std::set<std::string> points;
  std::ifstream in(mounts_file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string device, point, type;
    if (!(fields >> device >> point >> type) || kSkip.count(type)) continue;
    // /proc/mounts escapes space, tab, newline and backslash as \ooo.
    std::string unescaped;
    for (std::size_t i = 0; i < point.size(); ++i) {
      auto octal = [&](std::size_t k) { return k < point.size() && point[k] >= '0' && point[k] <= '7'; };
      if (point[i] == '\\' && octal(i + 1) && octal(i + 2) && octal(i + 3)) {
        unescaped += static_cast<char>(std::stoi(point.substr(i + 1, 3), nullptr, 8));
        i += 3;
      } else {
        unescaped += point[i];
      }
    }
    points.insert(unescaped);
  }
  return {points.begin(), points.end()};
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

std::int64_t host_cpu_millis() {
  unsigned n = std::thread::hardware_concurrency();
  return static_cast<std::int64_t>(n == 0 ? 1 : n) * 1000;
}

std::int64_t host_memory_bytes() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::int64_t kb = 0;
  std::string unit;
  while (in >> key >> kb) {
    std::getline(in, unit);
    if (key == "MemTotal:") return kb * 1024;
  }
  return 0;
}

std::string gpu_type_from_name(std::string_view name) {
  std::string out;
  for (char ch : name) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c)) {
      out += static_cast<char>(std::tolower(c));
    } else if (c == '.' && !out.empty()) {
      out += '.';
    } else if (!out.empty() && out.back() != '-') {
      out += '-';
    }
  }
  while (!out.empty() && (out.back() == '-' || out.back() == '.')) out.pop_back();
  return out.empty() ? "unknown" : out;
}

// The few NVML entry points we use, declared by hand (no nvml.h at build time).
// Layouts are those of nvml.h, stable since NVML 2.285.
struct Nvml::Api {
  using Ret = int;  // nvmlReturn_t; 0 = NVML_SUCCESS
  using Device = void*;
  struct Memory {
    unsigned long long total, free, used;
  };
  struct Utilization {
    unsigned int gpu, memory;
  };
  Ret (*init)() = nullptr;
  Ret (*shutdown)() = nullptr;
  Ret (*count)(unsigned int*) = nullptr;
  Ret (*handle)(unsigned int, Device*) = nullptr;
  Ret (*name)(Device, char*, unsigned int) = nullptr;
  Ret (*uuid)(Device, char*, unsigned int) = nullptr;
  Ret (*memory)(Device, Memory*) = nullptr;
  Ret (*utilization)(Device, Utilization*) = nullptr;
  Ret (*driver)(char*, unsigned int) = nullptr;  // optional
  Ret (*cuda)(int*) = nullptr;                   // optional
};

namespace {
template <class F>
bool bind(void* lib, const char* name, F& out) {
  void* sym = ::dlsym(lib, name);
  out = reinterpret_cast<F>(sym);
  return sym != nullptr;
}
}  // namespace

Nvml::Nvml(const std::string& library) {
  if (library.empty()) {
    problem_ = "disabled";
    return;
  }
  lib_ = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib_) {
    problem_ = "not installed";
    return;
  }
  api_ = new Api();
  bool ok = bind(lib_, "nvmlInit_v2", api_->init) && bind(lib_, "nvmlShutdown", api_->shutdown) &&
            bind(lib_, "nvmlDeviceGetCount_v2", api_->count) &&
            bind(lib_, "nvmlDeviceGetHandleByIndex_v2", api_->handle) && bind(lib_, "nvmlDeviceGetName", api_->name) &&
            bind(lib_, "nvmlDeviceGetUUID", api_->uuid) && bind(lib_, "nvmlDeviceGetMemoryInfo", api_->memory) &&
            bind(lib_, "nvmlDeviceGetUtilizationRates", api_->utilization);
  bind(lib_, "nvmlSystemGetDriverVersion", api_->driver);
  if (!bind(lib_, "nvmlSystemGetCudaDriverVersion_v2", api_->cuda)) {
    bind(lib_, "nvmlSystemGetCudaDriverVersion", api_->cuda);
  }
  if (!ok) {
    problem_ = "libnvidia-ml lacks the expected symbols";
    return;
  }
  int rc = api_->init();
  if (rc != 0) {
    problem_ = "nvmlInit failed with code " + std::to_string(rc);
    return;
  }
  ready_ = true;
}

Nvml::~Nvml() {
  if (ready_) api_->shutdown();
  delete api_;
  if (lib_) ::dlclose(lib_);
}

std::string Nvml::driver_version() const {
  if (!ready_ || !api_->driver) return "";
  char buf[96] = {};
  if (api_->driver(buf, sizeof(buf)) != 0) return "";
  return buf;
}

std::string Nvml::cuda_version() const {
  if (!ready_ || !api_->cuda) return "";
  int v = 0;
  if (api_->cuda(&v) != 0 || v <= 0) return "";
  return std::to_string(v / 1000) + "." + std::to_string((v % 1000) / 10);
}

std::vector<GpuDevice> Nvml::devices() const {
  std::vector<GpuDevice> out;
  if (!ready_) return out;
  unsigned int n = 0;
  if (api_->count(&n) != 0) return out;
  for (unsigned int i = 0; i < n; ++i) {
    Api::Device dev = nullptr;
    if (api_->handle(i, &dev) != 0) continue;
    GpuDevice g;
    g.index = static_cast<int>(i);
    char buf[128] = {};
    if (api_->name(dev, buf, sizeof(buf)) == 0) g.model = gpu_type_from_name(buf);
    char ubuf[128] = {};
    if (api_->uuid(dev, ubuf, sizeof(ubuf)) == 0) g.uuid = ubuf;
    Api::Memory mem{};
    if (api_->memory(dev, &mem) == 0) {
      g.memory_total = static_cast<std::int64_t>(mem.total);
      g.memory_used = static_cast<std::int64_t>(mem.used);
    }
    Api::Utilization util{};
    g.utilization = -1;  // unless NVML tells
    if (api_->utilization(dev, &util) == 0) g.utilization = static_cast<int>(util.gpu > 100 ? 100 : util.gpu);
    out.push_back(std::move(g));
  }
  return out;
}

}  // namespace cp
