#include "common/server_urls.h"

#include <gtest/gtest.h>

namespace cp {
namespace {

std::vector<std::string> urls(std::string_view list) {
  auto r = parse_server_urls(list, "server");
  EXPECT_TRUE(r.ok()) << list << ": " << r.error().message;
  return r.ok() ? r.value() : std::vector<std::string>{};
}

std::string refusal(std::string_view list) {
  auto r = parse_server_urls(list, "server");
  EXPECT_FALSE(r.ok()) << list;
  if (r.ok()) return "";
  EXPECT_EQ(r.error().code, "invalid_field");
  EXPECT_EQ(r.error().details.at("field"), "server");
  EXPECT_FALSE(r.error().message_zh.empty());
  return r.error().message;
}

TEST(ServerUrls, OneOrSeveralInTheirOrderTrimmed) {
  EXPECT_EQ(urls("http://127.0.0.1:8080"), (std::vector<std::string>{"http://127.0.0.1:8080"}));
  EXPECT_EQ(urls(" http://a:8080/ ,https://b//,http://[::1]:9000/cp"),
            (std::vector<std::string>{"http://a:8080", "https://b", "http://[::1]:9000/cp"}));
  EXPECT_EQ(urls("HTTP://A"), (std::vector<std::string>{"HTTP://A"}));
  EXPECT_EQ(urls("https://user@cp.example"), (std::vector<std::string>{"https://user@cp.example"}));
}

TEST(ServerUrls, EachBadEntryIsNamed) {
  EXPECT_EQ(refusal(""), "server: the server URL is required");
  EXPECT_EQ(refusal(" / "), "server: the server URL is required");
  EXPECT_EQ(refusal("http://a,,http://b"), "server: entry 2 of the server list \"http://a,,http://b\" is empty");
  EXPECT_EQ(refusal("http://a,"), "server: entry 2 of the server list \"http://a,\" is empty");
  EXPECT_EQ(refusal("http://a,b:8080"),
            "server: \"b:8080\" is not a server URL: it must start with http:// or https://");
  EXPECT_EQ(refusal("ftp://a"), "server: \"ftp://a\" is not a server URL: it must start with http:// or https://");
  EXPECT_EQ(refusal("http://"), "server: \"http://\" is not a server URL: it names no host");
  EXPECT_EQ(refusal("http://:8080"), "server: \"http://:8080\" is not a server URL: it names no host");
  EXPECT_EQ(refusal("http://a:"), "server: \"http://a:\" is not a server URL: its port is empty");
  EXPECT_EQ(refusal("http://a:80x"), "server: \"http://a:80x\" is not a server URL: its port is not a number");
  EXPECT_EQ(refusal("http://a b"), "server: \"http://a b\" is not a server URL: it contains a space");
  EXPECT_EQ(refusal("http://[::1"),
            "server: \"http://[::1\" is not a server URL: its IPv6 address lacks the closing ']'");
  EXPECT_EQ(refusal("http://a:1,http://A:1/"), "server: \"http://A:1\" is listed twice in the server list "
                                               "\"http://a:1,http://A:1/\"");
}

TEST(ServerUrls, NormalizingChecksNothing) {
  EXPECT_EQ(normalize_server_urls(" http://a/ , http://b//"), "http://a,http://b");
  EXPECT_EQ(normalize_server_urls("http://h:8080//"), "http://h:8080");
  EXPECT_EQ(normalize_server_urls("x,,y"), "x,,y");
  EXPECT_EQ(normalize_server_urls(""), "");
}

}  // namespace
}  // namespace cp
