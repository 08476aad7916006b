// Table and text views of the server's JSON (docs/rest-shapes.md), one per
// noun, for the default `-o table`. Pure: JSON and `now` in, text out.
// Fields are read loosely (a missing member prints as "-"), so a server that
// adds or lacks a field never breaks a listing.
#pragma once

#include <string>
#include <string_view>

#include "common/clock.h"
#include "common/json.h"

namespace cp::cli {

// ID, NAME, STATE, PROJECT GROUP, RESOURCE GROUP, CLUSTER, AGE, REASON
std::string tasks_table(const json::array& tasks, Millis now, std::string_view lang);
// One task (GET /tasks/{id}: Task plus "attempts": [Attempt]) as details.
std::string task_details(const json::value& task, Millis now, std::string_view lang);
// GET /tasks/{id}/explain as sentences: the state, each reason, the attempts.
std::string explain_text(const json::value& explain, Millis now, std::string_view lang);
// POST /pipelines answer: the pipeline id and each task's id, name and state.
std::string submit_summary(const json::value& answer, std::string_view lang);

// ID, EXECUTOR, STATE, REASON, POOL, LAST CONTACT, CREDENTIAL EXPIRES
std::string clusters_table(const json::array& clusters, Millis now);
std::string cluster_details(const json::value& cluster, Millis now);
// CLUSTER, NAME, READY, MAINT, GPUS, CPU, MEMORY, LABELS
std::string nodes_table(const json::array& nodes);

// NAME, CLUSTERS, QUOTA, COHORT, QUEUED, RUNNING, AGE
std::string resource_groups_table(const json::array& documents, Millis now);
// NAME, DEFAULT RESOURCE GROUP, RESOURCE GROUPS, MEMBERS, BUDGET, AGE
std::string project_groups_table(const json::array& documents, Millis now);
// NAME, VALUE, PREEMPTIBLE, MAY PREEMPT, PREEMPT AFTER, GRACE, DESCRIPTION
std::string priority_classes_table(const json::array& documents);

// NAME, ROLE, AGE
std::string users_table(const json::array& users, Millis now);
// TIME, ACTOR, OBJECT, TYPE, CHANGE, MESSAGE
std::string events_table(const json::array& events);
// The group_by keys present, then GPU HOURS, CPU CORE HOURS, MEMORY GIB HOURS, ATTEMPTS.
std::string usage_table(const json::array& rows);
// GET /api/v1/usage/advice: a step a row, request against use, the advice
// in the language asked for.
std::string advice_table(const json::array& steps, std::string_view lang);
// Alerts: state, severity, rule, what it is about, since when, summary, and
// how its latest notification went.
std::string alerts_table(const json::array& alerts, Millis now);
// The price table document: resource, price an hour, from, in its currency.
std::string prices_table(const json::value& document);
// Approvals: id, pair, state (active or expired), who asked and decided, until when.
std::string approvals_table(const json::array& approvals, Millis now);
// The audit log: time, user, address, request, status, and the error of a refusal.
std::string audit_table(const json::array& entries);

// A one-time secret (bootstrap token, API token): the token and when it expires.
std::string secret_text(const json::value& answer, std::string_view lang);
// POST /clusters/{id}/confirm-lost: the server's message, then each attempt
// confirmed, its task and whether it was requeued.
std::string confirm_lost_text(const json::value& answer, std::string_view lang);

// The kind of a document as `apply` prints it: "ResourceGroup" -> "resourcegroup".
std::string kind_slug(std::string_view kind);
// The REST collection a document kind is applied to: "ResourceGroup" ->
// "resource-groups", "ProjectGroup" -> "project-groups", "PriorityClass" ->
// "priority-classes"; "" for any other kind.
std::string collection_for_kind(std::string_view kind);

}  // namespace cp::cli
