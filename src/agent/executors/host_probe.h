// What this machine has: CPUs, memory, OS facts, and NVIDIA GPUs through
// NVML. NVML is loaded with dlopen("libnvidia-ml.so.1") at run time, so the
// agent builds and runs on machines without a driver; there it reports no
// GPUs, which is normal.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/types.h"

namespace cp {

// OS facts: os (PRETTY_NAME of /etc/os-release), kernel (uname), runtime
// "process", mounts (of /proc/self/mounts). Driver and CUDA are left for the
// GPU probe.
HostFacts probe_host_facts();
// The mount points of real filesystems in a mounts file (/proc/self/mounts
// format), sorted, without proc, sysfs, cgroup and other virtual ones.
std::vector<std::string> real_mount_points(const std::string& mounts_file);
std::string host_name();
std::int64_t host_cpu_millis();    // hardware threads x 1000
std::int64_t host_memory_bytes();  // MemTotal of /proc/meminfo; 0 when unknown

// "NVIDIA A100-SXM4-80GB" -> "nvidia-a100-sxm4-80gb": the form of a gpu type
// in resource names ("gpu/<type>") and in the gpu-type node label.
std::string gpu_type_from_name(std::string_view name);

// NVML, bound with dlsym. Holds the library (and nvmlInit) for its lifetime.
class Nvml {
 public:
  // library "" disables the probe.
  explicit Nvml(const std::string& library = "libnvidia-ml.so.1");
  ~Nvml();
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  bool available() const { return ready_; }
  // Why not available: "" when it is, "not installed" when the library is absent.
  const std::string& problem() const { return problem_; }
  std::string driver_version() const;  // "550.54.15"
  std::string cuda_version() const;    // "12.4"
  // Devices with model (gpu_type_from_name), uuid, memory and utilization.
  std::vector<GpuDevice> devices() const;

 private:
  struct Api;
  void* lib_ = nullptr;
  Api* api_ = nullptr;
  bool ready_ = false;
  std::string problem_;
};

}  // namespace cp
