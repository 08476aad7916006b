// resource-groups, project-groups, priority-classes: ls|get|apply|delete, and
// the top-level apply. A file may hold several documents ("---"); each goes
// by its kind to PUT /api/v1/<collection>/<metadata.name>, which creates or
// updates it.
#include <memory>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/views.h"
#include "model/documents.h"

namespace cp::cli {
namespace {

struct Applicable {
  std::string kind;
  std::string name;
  std::string path;
  json::value document;
};

// Every document is checked before any is sent, so a mistake in the third
// document does not leave the first two applied.
Result<std::vector<Applicable>> read_applicable(const std::vector<json::value>& docs) {
  std::vector<Applicable> out;
  for (std::size_t i = 0; i < docs.size(); ++i) {
    const json::value& doc = docs[i];
    if (doc.is_null()) continue;  // an empty document, e.g. after a trailing "---"
    std::string where = "document " + std::to_string(i + 1);
    std::string where_zh = "第 " + std::to_string(i + 1) + " 个文档";
    if (!doc.is_object()) {
      return Error{"invalid_document", 400, where + ": expected a mapping with kind, metadata and spec",
                   where_zh + "：应为包含 kind、metadata 和 spec 的映射", {}};
    }
    std::string kind = str_at(doc, "kind");
    std::string collection = collection_for_kind(kind);
    if (kind == "Pipeline") {
      return Error{"invalid_document", 400, where + ": a Pipeline is submitted with `cubeplane submit -f FILE`",
                   where_zh + "：Pipeline 需用 `cubeplane submit -f FILE` 提交", {}};
    }
    if (kind == "PriceTable") {
      // One table, replaced whole; the server checks its name.
      out.push_back({kind, str_at(doc, "metadata.name"), "/api/v1/price-table", doc});
      continue;
    }
    if (collection.empty()) {
      return Error{"invalid_document", 400,
                   where + ": unknown kind \"" + kind +
                       "\" (one of: ResourceGroup, ProjectGroup, PriorityClass, PriceTable)",
                   where_zh + "：未知的 kind \"" + kind + "\"（可选：ResourceGroup、ProjectGroup、PriorityClass、PriceTable）",
                   {}};
    }
    std::string name = str_at(doc, "metadata.name");
    if (name.empty()) {
      return Error{"invalid_document", 400, where + ": metadata.name is required",
                   where_zh + "：缺少 metadata.name", {}};
    }
    out.push_back({kind, name, "/api/v1/" + collection + "/" + path_segment(name), doc});
  }
  if (out.empty()) return Error{"invalid_document", 400, "the file holds no documents", "文件中没有文档", {}};
  return out;
}

int apply_file(ClientContext& ctx, const std::string& file) {
  auto text = read_input(ctx, file);
  if (!text) return fail(ctx, text.error());
  auto docs = parse_documents(*text);
  if (!docs) return fail(ctx, docs.error());
  auto applicable = read_applicable(*docs);
  if (!applicable) return fail(ctx, applicable.error());
  auto api = connect(ctx);
  if (!api) return fail(ctx, api.error());

  json::array answers;
  for (const auto& a : *applicable) {
    auto answer = (*api)->put(a.path, a.document);
    if (!answer) {
      Error e = answer.error();
      std::string prefix = kind_slug(a.kind) + "/" + a.name + ": ";
      e.message = prefix + e.message;
      e.message_zh = prefix + e.message_zh;
      return fail(ctx, e);
    }
    // In table mode each line is printed as it lands, so a later refusal
    // still shows what was applied before it.
    if (ctx.output == "table") {
      *ctx.out << kind_slug(a.kind) << "/" << a.name << tr(ctx, " applied\n", " 已应用\n");
      ctx.out->flush();
    }
    answers.push_back(std::move(*answer));
  }
  if (ctx.output == "table") return kExitOk;
  return print(ctx, json::object{{"items", std::move(answers)}}, [](const json::value&) { return std::string(); });
}

void add_apply(CLI::App& parent, ClientContext& ctx, const std::string& what) {
  auto* sub = parent.add_subcommand("apply", "Create or update " + what +
                                                 " from a YAML file (several documents separated by ---)");
  auto file = std::make_shared<std::string>();
  sub->add_option("-f,--file", *file, "YAML (or JSON) file; - reads stdin")->required();
  on_run(sub, ctx, [&ctx, file] { return apply_file(ctx, *file); });
}

struct GroupVerbs {
  std::string command;     // "resource-groups"
  std::string kind;        // "ResourceGroup"
  std::string noun;        // "resource group", for help texts
  std::string plural;      // "resource groups"
  bool get_delete = true;  // priority classes are listed and applied only
  std::function<std::string(const json::array&, Millis)> table;
};

void add_group_verbs(CLI::App& app, ClientContext& ctx, const GroupVerbs& g) {
  auto* parent = app.add_subcommand(
      g.command, (g.get_delete ? "List, show, apply and delete " : "List and apply ") + g.plural);
  parent->require_subcommand(1);
  std::string collection = "/api/v1/" + g.command;
  auto table = g.table;

  auto* ls = parent->add_subcommand("ls", "List " + g.plural);
  on_run(ls, ctx, [&ctx, collection, table] {
    return print_list(ctx, collection, {}, true,
                      [&](const json::array& items) { return table(items, ctx.clock->now_ms()); });
  });
  add_apply(*parent, ctx, g.plural);
  if (!g.get_delete) return;

  auto* get = parent->add_subcommand("get", "Show one " + g.noun);
  auto name = std::make_shared<std::string>();
  get->add_option("NAME", *name, "Name")->required();
  on_run(get, ctx, [&ctx, collection, table, name] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto doc = (*api)->get(collection + "/" + path_segment(*name));
    if (!doc) return fail(ctx, doc.error());
    return print(ctx, *doc, [&](const json::value& v) { return table(json::array{v}, ctx.clock->now_ms()); });
  });

  auto* del = parent->add_subcommand("delete", "Delete a " + g.noun + " (admin)");
  auto del_name = std::make_shared<std::string>();
  del->add_option("NAME", *del_name, "Name")->required();
  std::string slug = kind_slug(g.kind);
  on_run(del, ctx, [&ctx, collection, slug, del_name] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto answer = (*api)->del(collection + "/" + path_segment(*del_name));
    if (!answer) return fail(ctx, answer.error());
    if (ctx.output != "table") return print(ctx, *answer, [](const json::value&) { return std::string(); });
    *ctx.out << slug << "/" << *del_name << tr(ctx, " deleted\n", " 已删除\n");
    return kExitOk;
  });
}

}  // namespace

void register_group_commands(CLI::App& app, ClientContext& ctx) {
  add_group_verbs(app, ctx,
                  {"resource-groups", "ResourceGroup", "resource group", "resource groups", true,
                   [](const json::array& items, Millis now) { return resource_groups_table(items, now); }});
  add_group_verbs(app, ctx,
                  {"project-groups", "ProjectGroup", "project group", "project groups", true,
                   [](const json::array& items, Millis now) { return project_groups_table(items, now); }});
  add_group_verbs(app, ctx,
                  {"priority-classes", "PriorityClass", "priority class", "priority classes", false,
                   [](const json::array& items, Millis) { return priority_classes_table(items); }});
  add_apply(app, ctx, "resource groups, project groups, priority classes and the price table");
}

}  // namespace cp::cli
