// Name rules: object names, label keys and values, resource names. Written
// out by hand rather than with std::regex, which is slow to build, and easy
// to get wrong for untrusted input (backtracking).
#include <set>

#include "model/documents.h"
#include "model/documents_internal.h"

namespace cp {
namespace {

bool is_lower_alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); }
bool is_alnum(char c) { return is_lower_alnum(c) || (c >= 'A' && c <= 'Z'); }

// Shown in messages as-is, but never longer than a line.
std::string quoted(std::string_view s) {
  constexpr std::size_t kMax = 80;
  if (s.size() > kMax) return "\"" + std::string(s.substr(0, kMax)) + "...\"";
  return "\"" + std::string(s) + "\"";
}

// Kubernetes "qualified name" part and label value: [A-Za-z0-9] at both ends,
// [-A-Za-z0-9_.] between, at most 63 characters.
bool is_label_name_part(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  if (!is_alnum(s.front()) || !is_alnum(s.back())) return false;
  for (char c : s) {
    if (!is_alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

// DNS-1123 subdomain: dot-separated DNS labels, at most 253 characters.
bool is_dns_subdomain(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = s.find('.', start);
    std::string_view part = s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start);
    if (!is_valid_name(part)) return false;
    if (dot == std::string_view::npos) return true;
    start = dot + 1;
  }
}

Status validate_label_key(std::string_view key, const std::string& path) {
  std::size_t slash = key.find('/');
  std::string_view name = slash == std::string_view::npos ? key : key.substr(slash + 1);
  if (slash != std::string_view::npos && !is_dns_subdomain(key.substr(0, slash))) {
    return errors::invalid(path, "label key " + quoted(key) + " has an invalid prefix: use a DNS subdomain such as \"example.com/\"",
                           "标签键 " + quoted(key) + " 的前缀无效：应为 DNS 子域名，如 \"example.com/\"");
  }
  if (!is_label_name_part(name)) {
    return errors::invalid(path,
                           "label key " + quoted(key) +
                               " is invalid: at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
                               "letter or digit",
                           "标签键 " + quoted(key) + " 无效：最多 63 个字母、数字、'-'、'_' 或 '.'，且以字母或数字开头和结尾");
  }
  return {};
}

}  // namespace

bool is_valid_name(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  if (!is_lower_alnum(name.front()) || !is_lower_alnum(name.back())) return false;
  for (char c : name) {
    if (!is_lower_alnum(c) && c != '-') return false;
  }
  return true;
}

Status validate_name(std::string_view name, const std::string& field_path) {
  if (name.empty()) return errors::invalid(field_path, "is required", "不能为空");
  if (!is_valid_name(name)) {
    return errors::invalid(field_path,
                           quoted(name) +
                               " is not a valid name: use at most 63 lowercase letters, digits and '-', starting and "
                               "ending with a letter or digit",
                           quoted(name) + " 不是有效的名称：最多 63 个小写字母、数字和 '-'，且以字母或数字开头和结尾");
  }
  return {};
}

Status validate_labels(const Labels& labels, const std::string& field_path) {
  for (const auto& [key, value] : labels) {
    std::string path = field_path.empty() ? key : field_path + "." + key;
    CP_TRY(validate_label_key(key, path));
    if (!value.empty() && !is_label_name_part(value)) {
      return errors::invalid(path,
                             "label value " + quoted(value) +
                                 " is invalid: at most 63 letters, digits, '-', '_' or '.', starting and ending with a "
                                 "letter or digit",
                             "标签值 " + quoted(value) +
                                 " 无效：最多 63 个字母、数字、'-'、'_' 或 '.'，且以字母或数字开头和结尾");
    }
  }
  return {};
}

namespace docs {

Status validate_gpu_type(std::string_view type, const std::string& path) {
  bool ok = is_label_name_part(type);
  for (char c : type) ok = ok && !(c >= 'A' && c <= 'Z');
  if (!ok) {
    return errors::invalid(path,
                           "GPU type " + quoted(type) +
                               " is invalid: use at most 63 lowercase letters, digits, '-', '_' or '.', such as "
                               "\"nvidia-a100-80gb\"",
                           "GPU 类型 " + quoted(type) + " 无效：最多 63 个小写字母、数字、'-'、'_' 或 '.'，如 \"nvidia-a100-80gb\"");
  }
  return {};
}

Status validate_resource_name(std::string_view name, const std::string& path) {
  if (name == "gpu") {
    return errors::invalid(path, "GPUs are counted per type: write \"gpu/<type>\", or \"gpu/any\"",
                           "GPU 按型号计数：请写 \"gpu/<型号>\" 或 \"gpu/any\"");
  }
  if (name.starts_with(kGpuPrefix)) return validate_gpu_type(name.substr(kGpuPrefix.size()), path);
  // Lowercase only, so that "CPU" or "Memory" cannot pass as a new resource.
  bool ok = true;
  for (char c : name) ok = ok && !(c >= 'A' && c <= 'Z');
  if (ok) ok = validate_label_key(name, path).ok();
  if (!ok) {
    return errors::invalid(path,
                           "resource name " + quoted(name) +
                               " is invalid: use cpu, memory, gpu/<type> or a lowercase name such as "
                               "\"example.com/fpga\"",
                           "资源名 " + quoted(name) + " 无效：可用 cpu、memory、gpu/<型号> 或小写名称，如 \"example.com/fpga\"");
  }
  return {};
}

Status validate_resources(const Resources& r, const std::string& path) {
  for (const auto& [name, amount] : r.amounts()) {
    (void)amount;
    CP_TRY(validate_resource_name(name, path.empty() ? name : path + "." + name));
  }
  return {};
}

Status validate_name_list(const std::vector<std::string>& names, const std::string& path) {
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i < names.size(); ++i) {
    CP_TRY(validate_name(names[i], index_path(path, i)));
    if (!seen.insert(names[i]).second) {
      return errors::invalid(index_path(path, i), quoted(names[i]) + " is listed twice",
                             quoted(names[i]) + " 重复出现");
    }
  }
  return {};
}

std::string index_path(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

}  // namespace docs
}  // namespace cp
