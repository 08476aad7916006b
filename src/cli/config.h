// Where the CLI sends its requests and as whom: flags > environment
// (CUBEPLANE_SERVER, CUBEPLANE_TOKEN) > the file `login` saved. Also the
// language the server should answer in (Accept-Language).
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include "common/result.h"

namespace cp::cli {

inline constexpr std::string_view kDefaultServer = "http://127.0.0.1:8080";

// Reads an environment variable; tests pass a map instead of the process
// environment. An unset or empty variable is std::nullopt.
using EnvLookup = std::function<std::optional<std::string>(std::string_view name)>;
EnvLookup process_env();

// What `login` saves.
struct SavedConfig {
  std::string server;
  std::string token;
};

// $CUBEPLANE_CONFIG, else $HOME/.config/cubeplane/config.yaml.
std::string config_path(const EnvLookup& env);
// A missing file is an empty config; a malformed one is an error naming the file.
Result<SavedConfig> load_config(const std::string& path);
// Writes the file with mode 0600 (created directories 0700) by writing a
// temporary file beside it and renaming, so a reader never sees half a file.
Status save_config(const std::string& path, const SavedConfig& config);

struct Connection {
  std::string server;  // one URL or a comma list (normalized), not yet checked: see ApiClient
  std::string token;   // may be empty: the server then answers 401
};

struct ConnectionSources {
  std::optional<std::string> flag_server, flag_token;
  std::optional<std::string> env_server, env_token;
  SavedConfig saved;
};

// Each of server and token from the first source that has it. The saved token
// is used only with the saved server (or servers: every one chosen must be
// among those saved): `--server other` must not send the token of the server
// one logged in to elsewhere.
Connection resolve_connection(const ConnectionSources& sources);

// "http://host:8080/" -> "http://host:8080"; " http://a/ ,http://b" ->
// "http://a,http://b" (common/server_urls.h, nothing checked).
std::string normalize_server(std::string_view server);

// A POSIX locale name as a language tag: "zh_CN.UTF-8" -> "zh-CN",
// "en_US" -> "en-US", "zh" -> "zh-CN"; "C", "POSIX" and "" -> "".
std::string locale_to_language_tag(std::string_view locale);

// Accept-Language: --lang (en | zh | a locale) if given, else LC_ALL,
// LC_MESSAGES, LANG in the order POSIX reads them, else "en".
std::string accept_language(std::string_view lang_flag, const EnvLookup& env);

}  // namespace cp::cli
