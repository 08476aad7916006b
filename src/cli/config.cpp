#include "cli/config.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/server_urls.h"

namespace cp::cli {
namespace {

Error file_error(const std::string& what, const std::string& path, int err) {
  std::string reason = std::strerror(err);
  return Error{"config_file", 500, "cannot " + what + " " + path + ": " + reason,
               "无法" + (what == "read" ? std::string("读取") : std::string("写入")) + " " + path + "：" + reason, {}};
}

std::string home_dir(const EnvLookup& env) {
  if (auto home = env("HOME")) return *home;
  if (const passwd* pw = getpwuid(getuid()); pw != nullptr && pw->pw_dir != nullptr) return pw->pw_dir;
  return ".";
}

// mkdir -p, creating missing directories with mode 0700 (they hold a secret).
Status make_private_dirs(const std::filesystem::path& dir) {
  if (dir.empty()) return {};
  std::filesystem::path cur;
  for (const auto& part : dir) {
    cur /= part;
    if (::mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) return file_error("create", cur.string(), errno);
  }
  return {};
}

}  // namespace

EnvLookup process_env() {
  return [](std::string_view name) -> std::optional<std::string> {
    const char* v = std::getenv(std::string(name).c_str());
    if (v == nullptr || *v == '\0') return std::nullopt;
    return std::string(v);
  };
}

std::string config_path(const EnvLookup& env) {
  if (auto p = env("CUBEPLANE_CONFIG")) return *p;
  return home_dir(env) + "/.config/cubeplane/config.yaml";
}

Result<SavedConfig> load_config(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 && errno == ENOENT) return SavedConfig{};
  std::ifstream in(path);
  if (!in) return file_error("read", path, errno != 0 ? errno : EIO);
  std::stringstream text;
  text << in.rdbuf();
  SavedConfig config;
  try {
    YAML::Node root = YAML::Load(text.str());
    if (root.IsNull()) return config;
    if (!root.IsMap()) throw YAML::Exception(YAML::Mark::null_mark(), "expected a map of settings");
    if (root["server"] && root["server"].IsScalar()) config.server = root["server"].as<std::string>();
    if (root["token"] && root["token"].IsScalar()) config.token = root["token"].as<std::string>();
  } catch (const YAML::Exception& e) {
    return Error{"config_file", 400, path + " is not a valid config file: " + e.what(),
                 path + " 不是有效的配置文件：" + e.what(), {}};
  }
  return config;
}

Status save_config(const std::string& path, const SavedConfig& config) {
  std::filesystem::path target(path);
  CP_TRY(make_private_dirs(target.parent_path()));

  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "server" << YAML::Value << config.server;
  out << YAML::Key << "token" << YAML::Value << config.token;
  out << YAML::EndMap;
  std::string text = std::string(out.c_str()) + "\n";

  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return file_error("write", tmp, errno);
  // The umask cannot widen 0600, but an old file of that name may have another mode.
  bool ok = ::fchmod(fd, 0600) == 0;
  for (std::size_t done = 0; ok && done < text.size();) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  ok = ok && ::fsync(fd) == 0;
  int err = errno;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) {
    if (ok) err = errno;
    ::unlink(tmp.c_str());
    return file_error("write", path, err);
  }
  return {};
}

std::string normalize_server(std::string_view server) { return normalize_server_urls(server); }

namespace {

std::vector<std::string_view> entries(std::string_view normalized) {
  std::vector<std::string_view> out;
  for (;;) {
    const auto comma = normalized.find(',');
    out.push_back(normalized.substr(0, comma));
    if (comma == std::string_view::npos) return out;
    normalized.remove_prefix(comma + 1);
  }
}

// Every server of `chosen` is one of `saved`'s.
bool among(std::string_view chosen, std::string_view saved) {
  const auto allowed = entries(saved);
  for (auto server : entries(chosen)) {
    if (std::find(allowed.begin(), allowed.end(), server) == allowed.end()) return false;
  }
  return true;
}

}  // namespace

Connection resolve_connection(const ConnectionSources& s) {
  Connection c;
  if (s.flag_server) {
    c.server = *s.flag_server;
  } else if (s.env_server) {
    c.server = *s.env_server;
  } else if (!s.saved.server.empty()) {
    c.server = s.saved.server;
  } else {
    c.server = std::string(kDefaultServer);
  }
  c.server = normalize_server(c.server);

  bool saved_matches = s.saved.server.empty() || among(c.server, normalize_server(s.saved.server));
  if (s.flag_token) {
    c.token = *s.flag_token;
  } else if (s.env_token) {
    c.token = *s.env_token;
  } else if (saved_matches) {
    c.token = s.saved.token;
  }
  return c;
}

std::string locale_to_language_tag(std::string_view locale) {
  locale = locale.substr(0, locale.find_first_of(".@"));
  if (locale.empty() || locale == "C" || locale == "POSIX") return "";
  std::string tag(locale);
  for (auto& ch : tag) {
    if (ch == '_') ch = '-';
  }
  if (tag == "zh") return "zh-CN";
  return tag;
}

std::string accept_language(std::string_view lang_flag, const EnvLookup& env) {
  if (!lang_flag.empty()) {
    if (lang_flag == "en") return "en";
    std::string tag = locale_to_language_tag(lang_flag);
    if (!tag.empty()) return tag;
  }
  for (const char* name : {"LC_ALL", "LC_MESSAGES", "LANG"}) {
    if (auto v = env(name)) {
      std::string tag = locale_to_language_tag(*v);
      if (!tag.empty()) return tag;
      // "C"/"POSIX" set explicitly still decides: it means the default language.
      return "en";
    }
  }
  return "en";
}

}  // namespace cp::cli
