// Checks that an OpenAPI document and a route table describe the same API:
// every route under paths with its method and path parameters, and no
// operation in the document without a route.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <set>
#include <string>

#include "common/json.h"
#include "http/router.h"

namespace cp::http::testing {

inline std::string lower_method(std::string m) {
  std::transform(m.begin(), m.end(), m.begin(), [](unsigned char c) { return std::tolower(c); });
  return m;
}

inline void expect_document_matches_routes(const json::value& doc, const Router& router) {
  const auto& paths = doc.at("paths").as_object();
  std::set<std::pair<std::string, std::string>> in_table;
  for (const auto& r : router.routes()) {
    in_table.emplace(r.pattern, lower_method(r.method));
    auto item = paths.find(r.pattern);
    ASSERT_NE(item, paths.end()) << r.pattern << " missing from the document";
    const auto& ops = item->value().as_object();
    auto op = ops.find(lower_method(r.method));
    ASSERT_NE(op, ops.end()) << r.method << " " << r.pattern << " missing from the document";
    std::set<std::string> documented_path_params;
    if (auto params = op->value().as_object().find("parameters"); params != op->value().as_object().end()) {
      for (const auto& p : params->value().as_array()) {
        if (p.at("in") == "path") documented_path_params.insert(std::string(p.at("name").as_string()));
      }
    }
    auto names = r.param_names();
    EXPECT_EQ(documented_path_params, std::set<std::string>(names.begin(), names.end())) << r.pattern;
    for (const auto& n : names) {
      EXPECT_NE(r.pattern.find("{" + n + "}"), std::string::npos);
    }
    EXPECT_TRUE(op->value().as_object().contains("responses")) << r.pattern;
  }
  for (const auto& [path, item] : paths) {
    for (const auto& [method, op] : item.as_object()) {
      EXPECT_TRUE(in_table.count({std::string(path), std::string(method)}))
          << method << " " << path << " documented but not routed";
    }
  }
}

}  // namespace cp::http::testing
