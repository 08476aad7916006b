// ResourceGroup documents (API.md "Resource group and project group YAML").
#include <boost/describe.hpp>

#include "model/documents.h"
#include "model/documents_internal.h"

namespace cp {
namespace {

using docs::QuantityText;

// The YAML shapes, decoded strictly; the model types hold parsed amounts.

struct QuotaDoc {
  std::optional<QuantityText> guaranteed;
  std::optional<QuantityText> max;
};
BOOST_DESCRIBE_STRUCT(QuotaDoc, (), (guaranteed, max))

struct AlertsDoc {
  std::vector<std::int64_t> thresholds;
  docs::Duration sustained;
  std::string webhook;
};
BOOST_DESCRIBE_STRUCT(AlertsDoc, (), (thresholds, sustained, webhook))

// Omitted alert fields keep the model's defaults.
AlertsDoc default_alerts() {
  AlertPolicy policy;
  return AlertsDoc{{policy.thresholds.begin(), policy.thresholds.end()}, {policy.sustained_s}, policy.webhook};
}

struct ResourceGroupSpecDoc {
  std::vector<std::string> clusters;
  docs::TextMap node_selector;
  std::map<std::string, QuotaDoc> quota;
  std::string cohort;
  docs::TextMap required_labels;
  PlacementPolicy placement = PlacementPolicy::binpack;
  AlertsDoc alerts = default_alerts();
  Resources default_request;
  Resources max_per_task;
};
BOOST_DESCRIBE_STRUCT(ResourceGroupSpecDoc, (),
                      (clusters, node_selector, quota, cohort, required_labels, placement, alerts, default_request,
                       max_per_task))

Result<std::map<std::string, QuotaEntry>> parse_quota(const std::map<std::string, QuotaDoc>& in) {
  std::map<std::string, QuotaEntry> out;
  for (const auto& [resource, doc] : in) {
    const std::string path = "spec.quota." + resource;
    CP_TRY(docs::validate_resource_name(resource, path));
    if (!doc.guaranteed && !doc.max) {
      return errors::invalid(path, "set guaranteed, max, or both", "请设置 guaranteed、max 或两者");
    }
    QuotaEntry entry;
    if (doc.guaranteed) {
      CP_ASSIGN(entry.guaranteed, parse_quantity(resource, doc.guaranteed->text, path + ".guaranteed"));
    }
    if (doc.max) {
      CP_ASSIGN(std::int64_t max, parse_quantity(resource, doc.max->text, path + ".max"));
      if (max < entry.guaranteed) {
        return errors::invalid(path + ".max",
                               "max (" + format_quantity(resource, max) + ") is below guaranteed (" +
                                   format_quantity(resource, entry.guaranteed) + ")",
                               "max（" + format_quantity(resource, max) + "）小于 guaranteed（" +
                                   format_quantity(resource, entry.guaranteed) + "）");
      }
      entry.max = max;
    }
    out.emplace(resource, entry);
  }
  return out;
}

Result<AlertPolicy> parse_alerts(const AlertsDoc& in) {
  AlertPolicy out;
  out.thresholds.clear();
  for (std::size_t i = 0; i < in.thresholds.size(); ++i) {
    std::int64_t t = in.thresholds[i];
    std::string path = docs::index_path("spec.alerts.thresholds", i);
    if (t < 1 || t > 100) {
      return errors::invalid(path, "a threshold is a percentage from 1 to 100, got " + std::to_string(t),
                             "阈值为 1 到 100 的百分比，实际为 " + std::to_string(t));
    }
    if (i > 0 && t <= in.thresholds[i - 1]) {
      return errors::invalid(path, "thresholds must be in ascending order", "阈值必须按升序排列");
    }
    out.thresholds.push_back(static_cast<int>(t));
  }
  out.sustained_s = in.sustained.seconds;
  // Only web URLs: the server will call it, so nothing else (file:, gopher:)
  // may reach the HTTP client.
  const std::string& w = in.webhook;
  bool web = w.starts_with("http://") || w.starts_with("https://");
  bool clean = w.size() <= 2048;
  for (unsigned char c : w) clean = clean && c > 0x20 && c != 0x7f;
  if (!w.empty() && (!web || !clean)) {
    return errors::invalid("spec.alerts.webhook", "must be an http:// or https:// URL without spaces",
                           "必须是不含空格的 http:// 或 https:// 地址");
  }
  out.webhook = w;
  return out;
}

json::object quota_to_json(const std::map<std::string, QuotaEntry>& quota) {
  json::object out;
  for (const auto& [resource, entry] : quota) {
    json::object q;
    q["guaranteed"] = format_quantity(resource, entry.guaranteed);
    if (entry.max) q["max"] = format_quantity(resource, *entry.max);
    out[resource] = std::move(q);
  }
  return out;
}

}  // namespace

Result<ResourceGroup> resource_group_from_document(const json::value& doc) {
  CP_ASSIGN(auto env, docs::open_document(doc, "ResourceGroup"));
  ResourceGroup rg;
  CP_ASSIGN(rg.name, docs::object_name(env.metadata));

  ResourceGroupSpecDoc spec;
  CP_TRY(docs::decode_strict(env.spec, spec, "spec"));
  CP_TRY(docs::validate_name_list(spec.clusters, "spec.clusters"));
  rg.clusters = spec.clusters;
  rg.node_selector = docs::to_string_map(spec.node_selector);
  CP_TRY(validate_labels(rg.node_selector, "spec.node_selector"));
  CP_ASSIGN(rg.quota, parse_quota(spec.quota));
  if (!spec.cohort.empty()) CP_TRY(validate_name(spec.cohort, "spec.cohort"));
  rg.cohort = spec.cohort;
  rg.required_labels = docs::to_string_map(spec.required_labels);
  CP_TRY(validate_labels(rg.required_labels, "spec.required_labels"));
  rg.placement = spec.placement;
  CP_ASSIGN(rg.alerts, parse_alerts(spec.alerts));
  CP_TRY(docs::validate_resources(spec.default_request, "spec.default_request"));
  CP_TRY(docs::validate_resources(spec.max_per_task, "spec.max_per_task"));
  rg.default_request = spec.default_request;
  rg.max_per_task = spec.max_per_task;
  // A default that max_per_task refuses would make every step that omits
  // the resource unschedulable. A resource absent from max_per_task is not
  // limited by it.
  for (const auto& [resource, amount] : rg.default_request.amounts()) {
    std::int64_t limit = rg.max_per_task.get(resource);
    if (limit != 0 && amount > limit) {
      return errors::invalid("spec.default_request." + resource,
                             "is larger than max_per_task (" + format_quantity(resource, limit) + ")",
                             "大于 max_per_task（" + format_quantity(resource, limit) + "）");
    }
  }
  return rg;
}

json::object resource_group_to_document(const ResourceGroup& rg) {
  json::object spec;
  spec["clusters"] = to_json(rg.clusters);
  spec["node_selector"] = to_json(rg.node_selector);
  spec["quota"] = quota_to_json(rg.quota);
  spec["cohort"] = rg.cohort;
  spec["required_labels"] = to_json(rg.required_labels);
  spec["placement"] = to_json(rg.placement);
  json::object alerts;
  alerts["thresholds"] = to_json(rg.alerts.thresholds);
  alerts["sustained"] = docs::format_duration(rg.alerts.sustained_s);
  alerts["webhook"] = rg.alerts.webhook;
  spec["alerts"] = std::move(alerts);
  spec["default_request"] = to_json(rg.default_request);
  spec["max_per_task"] = to_json(rg.max_per_task);
  return docs::make_document("ResourceGroup", docs::object_meta(rg.name, rg.created_at, rg.updated_at),
                             std::move(spec));
}

}  // namespace cp
