// submit, tasks ls|get|explain|logs|cancel
#include <memory>

#include "cli/commands.h"
#include "cli/format.h"
#include "cli/views.h"
#include "common/ids.h"

namespace cp::cli {
namespace {

std::string task_path(const std::string& id, std::string_view suffix = "") {
  return "/api/v1/tasks/" + path_segment(id) + std::string(suffix);
}

void add_submit(CLI::App& app, ClientContext& ctx) {
  auto* sub = app.add_subcommand("submit", "Submit a pipeline; prints the pipeline id and its tasks' ids and names");
  auto file = std::make_shared<std::string>();
  sub->add_option("-f,--file", *file, "Pipeline YAML (or JSON) file; - reads stdin")->required();
  on_run(sub, ctx, [&ctx, file] {
    auto text = read_input(ctx, *file);
    if (!text) return fail(ctx, text.error());
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    // One key for every attempt of this submit: however many of them reach
    // the server, it creates the pipeline once and answers each attempt
    // alike (a replayed answer is printed as a fresh one).
    const std::string key = new_secret("");
    RetryPolicy retry;
    retry.sleep = ctx.sleep;
    retry.on_retry = [&ctx](const Error& why, int attempt, Millis wait) {
      const std::string reason = why.message_for(language(ctx));
      const std::string seconds = std::to_string((wait + 999) / 1000);
      const std::string n = std::to_string(attempt);
      *ctx.err << (is_chinese(language(ctx))
                       ? "提交未得到确定的回答（" + reason + "）；" + seconds + " 秒后用同一幂等键重试（第 " + n + " 次）\n"
                       : "submit got no settled answer (" + reason + "); trying again in " + seconds +
                             "s with the same idempotency key (attempt " + n + ")\n");
    };
    // The server reads the document itself (JSON is YAML too), so its
    // errors name the field paths of the file as written.
    auto answer = (*api)->post_idempotent("/api/v1/pipelines", *text, "application/yaml", key, retry);
    if (!answer) return fail(ctx, answer.error());
    return print(ctx, *answer, [&](const json::value& v) { return submit_summary(v, language(ctx)); });
  });
}

struct ListTasksOptions {
  std::string state, project_group, resource_group, cluster, pipeline;
  int limit = 0;
  bool all = false;
};

void add_tasks_ls(CLI::App& tasks, ClientContext& ctx) {
  auto* sub = tasks.add_subcommand("ls", "List tasks (one page unless --all)");
  auto o = std::make_shared<ListTasksOptions>();
  // transform (not check) so that "queued" is sent as the canonical "Queued".
  sub->add_option("--state", o->state, "Only tasks in this state")
      ->transform(CLI::IsMember({"Queued", "Admitted", "Dispatched", "Running", "Preempting", "Lost", "Succeeded",
                             "Failed", "Cancelled"},
                            CLI::ignore_case));
  sub->add_option("--project-group", o->project_group, "Only tasks of this project group");
  sub->add_option("--resource-group", o->resource_group, "Only tasks of this resource group");
  sub->add_option("--cluster", o->cluster, "Only tasks placed on (or pinned to) this cluster");
  sub->add_option("--pipeline", o->pipeline, "Only tasks of this pipeline");
  sub->add_option("--limit", o->limit, "Tasks per page (server default when 0)")->check(CLI::Range(0, 10000));
  sub->add_flag("--all", o->all, "Follow next_cursor and list every page");
  on_run(sub, ctx, [&ctx, o] {
    Query q{{"state", o->state},
            {"project_group", o->project_group},
            {"resource_group", o->resource_group},
            {"cluster", o->cluster},
            {"pipeline", o->pipeline},
            {"limit", o->limit > 0 ? std::to_string(o->limit) : ""}};
    return print_list(ctx, "/api/v1/tasks", std::move(q), o->all, [&](const json::array& items) {
      return tasks_table(items, ctx.clock->now_ms(), language(ctx));
    });
  });
}

void add_tasks_get(CLI::App& tasks, ClientContext& ctx) {
  auto* sub = tasks.add_subcommand("get", "Show a task with its attempts");
  auto id = std::make_shared<std::string>();
  sub->add_option("ID", *id, "Task id")->required();
  on_run(sub, ctx, [&ctx, id] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto task = (*api)->get(task_path(*id));
    if (!task) return fail(ctx, task.error());
    return print(ctx, *task, [&](const json::value& v) { return task_details(v, ctx.clock->now_ms(), language(ctx)); });
  });
}

void add_tasks_explain(CLI::App& tasks, ClientContext& ctx) {
  auto* sub = tasks.add_subcommand("explain", "Explain why a task waits, or where and how it ran");
  auto id = std::make_shared<std::string>();
  sub->add_option("ID", *id, "Task id")->required();
  on_run(sub, ctx, [&ctx, id] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto explain = (*api)->get(task_path(*id, "/explain"));
    if (!explain) return fail(ctx, explain.error());
    return print(ctx, *explain,
                 [&](const json::value& v) { return explain_text(v, ctx.clock->now_ms(), language(ctx)); });
  });
}

struct LogsOptions {
  std::string id;
  bool follow = false;
  int attempt = 0;
};

void add_tasks_logs(CLI::App& tasks, ClientContext& ctx) {
  auto* sub = tasks.add_subcommand("logs", "Print a task's logs (the latest attempt unless --attempt)");
  auto o = std::make_shared<LogsOptions>();
  sub->add_option("ID", o->id, "Task id")->required();
  sub->add_flag("-f,--follow", o->follow, "Keep streaming until the attempt ends");
  sub->add_option("--attempt", o->attempt, "Attempt number (1, 2, ...)")->check(CLI::PositiveNumber);
  on_run(sub, ctx, [&ctx, o] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    Query q{{"attempt", o->attempt > 0 ? std::to_string(o->attempt) : ""}};
    if (o->follow) {
      q.emplace_back("follow", "true");
      Status s = (*api)->stream(task_path(o->id, "/logs"), q, [&ctx](std::string_view chunk) {
        ctx.out->write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
        ctx.out->flush();
        return ctx.out->good();
      });
      if (!s.ok()) return fail(ctx, s.error());
      return kExitOk;
    }
    auto text = (*api)->get_text(task_path(o->id, "/logs"), q, "text/plain");
    if (!text) return fail(ctx, text.error());
    *ctx.out << *text;
    ctx.out->flush();
    return kExitOk;
  });
}

void add_tasks_cancel(CLI::App& tasks, ClientContext& ctx) {
  auto* sub = tasks.add_subcommand("cancel", "Cancel a task (a running one is stopped after its grace period)");
  auto id = std::make_shared<std::string>();
  sub->add_option("ID", *id, "Task id")->required();
  on_run(sub, ctx, [&ctx, id] {
    auto api = connect(ctx);
    if (!api) return fail(ctx, api.error());
    auto task = (*api)->post(task_path(*id, "/cancel"), json::object{});
    if (!task) return fail(ctx, task.error());
    return print(ctx, *task, [&](const json::value& v) {
      std::string state = str_at(v, "state");
      return std::string(tr(ctx, "task ", "任务 ")) + *id + tr(ctx, ": cancel requested", "：已请求取消") +
             (state.empty() ? "" : std::string(tr(ctx, " (state ", "（状态 ")) + state + tr(ctx, ")", "）")) + "\n";
    });
  });
}

}  // namespace

void register_task_commands(CLI::App& app, ClientContext& ctx) {
  add_submit(app, ctx);
  auto* tasks = app.add_subcommand("tasks", "List, inspect and cancel tasks");
  tasks->require_subcommand(1);
  add_tasks_ls(*tasks, ctx);
  add_tasks_get(*tasks, ctx);
  add_tasks_explain(*tasks, ctx);
  add_tasks_logs(*tasks, ctx);
  add_tasks_cancel(*tasks, ctx);
}

}  // namespace cp::cli
