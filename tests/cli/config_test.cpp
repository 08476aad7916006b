#include "cli/config.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <map>

#include "cli/temp_dir.h"

namespace cp::cli {
namespace {

using testing::TempDir;

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](std::string_view name) -> std::optional<std::string> {
    auto it = vars.find(std::string(name));
    if (it == vars.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_mode & 0777;
}

TEST(ConfigPath, HomeByDefaultAndCubeplaneConfigWhenSet) {
  EXPECT_EQ(config_path(env_of({{"HOME", "/home/alice"}})), "/home/alice/.config/cubeplane/config.yaml");
  EXPECT_EQ(config_path(env_of({{"HOME", "/home/alice"}, {"CUBEPLANE_CONFIG", "/etc/cp.yaml"}})), "/etc/cp.yaml");
}

TEST(ConfigFile, SaveThenLoadRoundTripsWithAPrivateMode) {
  // login writes a secret: the file is 0600 and the directories it creates 0700.
  TempDir home;
  std::string path = config_path(env_of({{"HOME", home.path()}}));
  ASSERT_TRUE(save_config(path, {"http://cp.example:8080", "cpt_secret"}).ok());

  auto loaded = load_config(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().message;
  EXPECT_EQ(loaded->server, "http://cp.example:8080");
  EXPECT_EQ(loaded->token, "cpt_secret");
  EXPECT_EQ(mode_of(path), 0600u);
  EXPECT_EQ(mode_of(home.path() + "/.config/cubeplane"), 0700u);
}

TEST(ConfigFile, SavingAgainReplacesTheFileAndTightensItsMode) {
  TempDir dir;
  std::string path = dir.path() + "/config.yaml";
  {
    std::ofstream old(path);
    old << "server: http://old\ntoken: old\n";
  }
  ::chmod(path.c_str(), 0644);
  ASSERT_TRUE(save_config(path, {"http://new", "new-token"}).ok());
  auto loaded = load_config(path);
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->server, "http://new");
  EXPECT_EQ(loaded->token, "new-token");
  EXPECT_EQ(mode_of(path), 0600u);
}

TEST(ConfigFile, AMissingFileIsAnEmptyConfig) {
  TempDir dir;
  auto loaded = load_config(dir.path() + "/nothing/here.yaml");
  ASSERT_TRUE(loaded.ok());
  EXPECT_EQ(loaded->server, "");
  EXPECT_EQ(loaded->token, "");
}

TEST(ConfigFile, AMalformedFileIsAnErrorNamingIt) {
  TempDir dir;
  std::string path = dir.path() + "/config.yaml";
  std::ofstream(path) << "server: [unclosed\n";
  auto loaded = load_config(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.error().message.find(path), std::string::npos);

  std::ofstream(path) << "- a list\n- not a map\n";
  EXPECT_FALSE(load_config(path).ok());
}

TEST(ConfigFile, OddCharactersInTheTokenSurvive) {
  TempDir dir;
  std::string path = dir.path() + "/c.yaml";
  ASSERT_TRUE(save_config(path, {"http://h:1/", "a: b # not a comment"}).ok());
  EXPECT_EQ(load_config(path)->token, "a: b # not a comment");
}

TEST(Resolution, FlagsWinOverEnvironmentOverSavedFile) {
  ConnectionSources s;
  s.saved = {"http://saved:8080", "saved-token"};
  s.env_server = "http://env:8080";
  s.env_token = "env-token";
  s.flag_server = "http://flag:8080";
  s.flag_token = "flag-token";
  Connection c = resolve_connection(s);
  EXPECT_EQ(c.server, "http://flag:8080");
  EXPECT_EQ(c.token, "flag-token");

  s.flag_server.reset();
  s.flag_token.reset();
  c = resolve_connection(s);
  EXPECT_EQ(c.server, "http://env:8080");
  EXPECT_EQ(c.token, "env-token");

  s.env_server.reset();
  s.env_token.reset();
  c = resolve_connection(s);
  EXPECT_EQ(c.server, "http://saved:8080");
  EXPECT_EQ(c.token, "saved-token");
}

TEST(Resolution, EachSettingResolvesOnItsOwn) {
  ConnectionSources s;
  s.saved = {"http://saved:8080", "saved-token"};
  s.flag_token = "flag-token";
  Connection c = resolve_connection(s);
  EXPECT_EQ(c.server, "http://saved:8080");
  EXPECT_EQ(c.token, "flag-token");
}

TEST(Resolution, DefaultServerWhenNothingIsSet) {
  Connection c = resolve_connection({});
  EXPECT_EQ(c.server, "http://127.0.0.1:8080");
  EXPECT_EQ(c.token, "");
}

TEST(Resolution, TheSavedTokenGoesOnlyToTheSavedServer) {
  // --server elsewhere must not leak the token saved for another server.
  ConnectionSources s;
  s.saved = {"http://saved:8080/", "saved-token"};
  s.flag_server = "http://other:8080";
  EXPECT_EQ(resolve_connection(s).token, "");
  s.flag_server = "http://saved:8080";  // the same server, trailing "/" aside
  EXPECT_EQ(resolve_connection(s).token, "saved-token");
}

TEST(Resolution, TheSavedTokenGoesToAnyOfTheSavedServers) {
  // A saved list: the token goes with it, or with some of its servers.
  ConnectionSources s;
  s.saved = {"http://a:8080/, http://b:8080", "saved-token"};
  EXPECT_EQ(resolve_connection(s).server, "http://a:8080,http://b:8080");
  EXPECT_EQ(resolve_connection(s).token, "saved-token");
  s.flag_server = "http://b:8080/";
  EXPECT_EQ(resolve_connection(s).token, "saved-token");
  s.flag_server = "http://b:8080,http://a:8080";
  EXPECT_EQ(resolve_connection(s).token, "saved-token");
  s.flag_server = "http://b:8080,http://c:8080";
  EXPECT_EQ(resolve_connection(s).token, "") << "c was not saved";
}

TEST(Resolution, TrailingSlashesAreDropped) {
  ConnectionSources s;
  s.flag_server = "http://h:8080//";
  EXPECT_EQ(resolve_connection(s).server, "http://h:8080");
}

TEST(AcceptLanguage, FromLocaleNames) {
  EXPECT_EQ(locale_to_language_tag("zh_CN.UTF-8"), "zh-CN");
  EXPECT_EQ(locale_to_language_tag("en_US.UTF-8"), "en-US");
  EXPECT_EQ(locale_to_language_tag("zh_TW@stroke"), "zh-TW");
  EXPECT_EQ(locale_to_language_tag("zh"), "zh-CN");
  EXPECT_EQ(locale_to_language_tag("C.UTF-8"), "");
  EXPECT_EQ(locale_to_language_tag("POSIX"), "");
  EXPECT_EQ(locale_to_language_tag(""), "");
}

TEST(AcceptLanguage, FlagThenLcAllThenLcMessagesThenLang) {
  auto env = env_of({{"LANG", "zh_CN.UTF-8"}});
  EXPECT_EQ(accept_language("", env), "zh-CN");
  EXPECT_EQ(accept_language("en", env), "en");
  EXPECT_EQ(accept_language("zh", env_of({})), "zh-CN");
  EXPECT_EQ(accept_language("", env_of({})), "en");
  EXPECT_EQ(accept_language("", env_of({{"LANG", "zh_CN.UTF-8"}, {"LC_MESSAGES", "en_GB.UTF-8"}})), "en-GB");
  EXPECT_EQ(accept_language("", env_of({{"LC_ALL", "zh_CN.UTF-8"}, {"LC_MESSAGES", "en_GB.UTF-8"}})), "zh-CN");
  // LC_ALL=C says "the default language" even when LANG says otherwise.
  EXPECT_EQ(accept_language("", env_of({{"LC_ALL", "C"}, {"LANG", "zh_CN.UTF-8"}})), "en");
}

}  // namespace
}  // namespace cp::cli
