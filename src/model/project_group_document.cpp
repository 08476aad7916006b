// ProjectGroup documents (API.md "Resource group and project group YAML").
#include <boost/describe.hpp>

#include <set>

#include "model/documents.h"
#include "model/documents_internal.h"

namespace cp {
namespace {

BOOST_DEFINE_ENUM_CLASS(Approval, none, required)

struct GrantDoc {
  std::string name;
  Approval approval = Approval::none;
};
BOOST_DESCRIBE_STRUCT(GrantDoc, (), (name, approval))

struct BudgetDoc {
  std::optional<std::int64_t> gpu_hours;
  std::optional<docs::QuantityText> cost;  // money: 5000, "1234.50"
};
BOOST_DESCRIBE_STRUCT(BudgetDoc, (), (gpu_hours, cost))

struct ProjectGroupSpecDoc {
  std::vector<Member> members;  // {user, role}: the model's shape is the document's
  std::string default_resource_group;
  std::vector<GrantDoc> resource_groups;
  BudgetDoc monthly_budget;
};
BOOST_DESCRIBE_STRUCT(ProjectGroupSpecDoc, (), (members, default_resource_group, resource_groups, monthly_budget))

constexpr std::int64_t kMaxGpuHours = 1'000'000'000;
// 10^13 cents: every amount up to it has at most 15 significant digits, so
// it survives a trip through a JSON double (cents / 100.0) exactly.
constexpr std::int64_t kMaxCostCents = 10'000'000'000'000;

// "1234.5" -> 123450 cents. Exact decimal arithmetic: money is no float.
Result<std::int64_t> parse_cost_cents(std::string_view text, const std::string& path) {
  auto bad = [&] {
    return errors::invalid(path,
                           "invalid amount \"" + std::string(text) +
                               "\": write a non-negative number with at most two decimals, such as 5000 or 1234.50",
                           "无效的金额 \"" + std::string(text) + "\"：应为最多两位小数的非负数，如 5000 或 1234.50");
  };
  std::size_t dot = text.find('.');
  std::string_view whole = text.substr(0, dot);
  std::string_view frac = dot == std::string_view::npos ? std::string_view{} : text.substr(dot + 1);
  if (whole.empty() || whole.size() > 15 || frac.size() > 2 || (dot != std::string_view::npos && frac.empty())) {
    return bad();
  }
  std::int64_t cents = 0;
  for (char c : whole) {
    if (c < '0' || c > '9') return bad();
    cents = cents * 10 + (c - '0');
  }
  for (std::size_t i = 0; i < 2; ++i) {
    char c = i < frac.size() ? frac[i] : '0';
    if (c < '0' || c > '9') return bad();
    cents = cents * 10 + (c - '0');
  }
  if (cents > kMaxCostCents) return errors::invalid(path, "amount is too large", "金额过大");
  return cents;
}

json::value cost_to_json(std::int64_t cents) {
  if (cents % 100 == 0) return json::value(cents / 100);
  return json::value(static_cast<double>(cents) / 100.0);
}

Status validate_members(const std::vector<Member>& members) {
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i < members.size(); ++i) {
    std::string path = docs::index_path("spec.members", i);
    CP_TRY(validate_name(members[i].user, path + ".user"));
    if (!seen.insert(members[i].user).second) {
      return errors::invalid(path + ".user", "\"" + members[i].user + "\" is listed twice",
                             "\"" + members[i].user + "\" 重复出现");
    }
  }
  return {};
}

Result<std::vector<ResourceGroupGrant>> parse_grants(const std::vector<GrantDoc>& grants,
                                                     const std::string& default_rg) {
  std::vector<ResourceGroupGrant> out;
  std::set<std::string_view> seen;
  for (std::size_t i = 0; i < grants.size(); ++i) {
    std::string path = docs::index_path("spec.resource_groups", i) + ".name";
    CP_TRY(validate_name(grants[i].name, path));
    if (grants[i].name == default_rg) {
      return errors::invalid(path, "\"" + default_rg + "\" is already the default resource group",
                             "\"" + default_rg + "\" 已是默认资源组");
    }
    if (!seen.insert(grants[i].name).second) {
      return errors::invalid(path, "\"" + grants[i].name + "\" is listed twice", "\"" + grants[i].name + "\" 重复出现");
    }
    out.push_back(ResourceGroupGrant{grants[i].name, boost::describe::enum_to_string(grants[i].approval, "none")});
  }
  return out;
}

Result<Budget> parse_budget(const BudgetDoc& in) {
  Budget out;
  if (in.gpu_hours) {
    if (*in.gpu_hours < 0 || *in.gpu_hours > kMaxGpuHours) {
      return errors::invalid("spec.monthly_budget.gpu_hours", "must be between 0 and 1000000000",
                             "必须在 0 到 1000000000 之间");
    }
    out.gpu_hours = *in.gpu_hours;
  }
  if (in.cost) {
    CP_ASSIGN(out.cost_cents, parse_cost_cents(in.cost->text, "spec.monthly_budget.cost"));
  }
  return out;
}

}  // namespace

Result<ProjectGroup> project_group_from_document(const json::value& doc) {
  CP_ASSIGN(auto env, docs::open_document(doc, "ProjectGroup"));
  ProjectGroup pg;
  CP_ASSIGN(pg.name, docs::object_name(env.metadata));

  ProjectGroupSpecDoc spec;
  CP_TRY(docs::decode_strict(env.spec, spec, "spec"));
  CP_TRY(validate_members(spec.members));
  pg.members = spec.members;
  if (!spec.default_resource_group.empty()) {
    CP_TRY(validate_name(spec.default_resource_group, "spec.default_resource_group"));
  }
  pg.default_resource_group = spec.default_resource_group;
  CP_ASSIGN(pg.resource_groups, parse_grants(spec.resource_groups, spec.default_resource_group));
  CP_ASSIGN(pg.monthly_budget, parse_budget(spec.monthly_budget));
  return pg;
}

json::object project_group_to_document(const ProjectGroup& pg) {
  json::object spec;
  spec["members"] = to_json(pg.members);
  spec["default_resource_group"] = pg.default_resource_group;
  spec["resource_groups"] = to_json(pg.resource_groups);
  json::object budget;
  if (pg.monthly_budget.gpu_hours) budget["gpu_hours"] = *pg.monthly_budget.gpu_hours;
  if (pg.monthly_budget.cost_cents) budget["cost"] = cost_to_json(*pg.monthly_budget.cost_cents);
  spec["monthly_budget"] = std::move(budget);
  return docs::make_document("ProjectGroup", docs::object_meta(pg.name, pg.created_at, pg.updated_at),
                             std::move(spec));
}

}  // namespace cp
