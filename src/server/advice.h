// Request against use: what a step asks for per replica, what its replicas
// really used (model/resource_use.h), and what it could ask for instead.
// Pure: the figures in, the advice out (ControlPlane::usage_advice reads
// the figures from the store).
//
// The rules, per replica:
//   cpu     suggest p95 + 20 %, rounded up to whole cores (to 250m below
//           one core). Lower when that is at most half the request and
//           frees at least a core; raise when p95 is above the request
//           (processes compete for the node's CPUs beyond it).
//   memory  suggest the peak + 25 %, rounded up to whole GiB (to 256 MiB
//           below one GiB): memory is sized for the peak, not a percentile.
//           Lower when that is at most half the request and frees at least
//           1 GiB; raise when the peak went above the request.
//   gpu     when NVML measured them: idle when p95 utilization is below
//           10 %.
// Fewer than kMinSamples samples give no advice, only "too few samples".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/resource_use.h"
#include "model/resources.h"

namespace cp {

inline constexpr std::int64_t kMinSamples = 12;

struct Advice {
  std::string resource;  // cpu | memory | gpu | samples
  std::string kind;      // lower | raise | idle | few_samples
  std::int64_t suggest = 0;  // cpu: millicores; memory: bytes; 0 when there is no figure to suggest
  std::string message;
  std::string message_zh;
};

std::vector<Advice> advise(const Resources& request, const ResourceUse& use);

}  // namespace cp
