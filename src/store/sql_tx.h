// The part of a SQL transaction that is the same on every backend: methods
// whose SQL comes from shared_sql and whose rows decode the same way. A
// backend (SqliteTx, PostgresTx) derives from SqlTx and gives it three
// things: a way to run a modifying statement, a way to read rows, and its
// dialect. What differs between the backends stays in them.
#pragma once

#include <functional>

#include "store/shared_sql.h"
#include "store/store.h"

namespace cp {

class SqlTx : public Tx {
 public:
  // One row of a result, columns by index (what a backend's run_query gives).
  class Row {
   public:
    virtual ~Row() = default;
    virtual std::string text(int col) const = 0;
    virtual std::int64_t int64(int col) const = 0;
  };
  using SqlRowFn = std::function<Status(const Row&)>;

  // Tasks and attempts by id, in batches.
  Result<std::vector<Task>> get_tasks(const std::vector<std::string>& ids) override;
  Result<std::vector<Attempt>> get_attempts(const std::vector<std::string>& ids) override;
  Result<std::vector<Attempt>> attempts_in_state(AttemptState state,
                                                 const std::vector<std::string>& cluster_ids) override;

  // The usage ledger.
  Status add_usage(const std::vector<UsageRow>& rows) override;
  Result<std::vector<UsageRow>> usage_totals(const UsageQuery& q) override;
  Result<std::int64_t> delete_usage_months(Millis from_month, Millis to_month) override;

  // Nodes.
  Result<std::vector<Node>> get_nodes(const std::string& cluster_id, const std::vector<std::string>& names) override;
  Result<NodePage> list_nodes_page(const NodeQuery& q) override;

  // Events.
  Result<std::vector<Event>> list_events(const EventQuery& q) override;
  Result<std::int64_t> first_event_since(Millis at) override;

  // Measured use.
  Status add_resource_use(const ResourceUseRow& row) override;
  Result<std::vector<ResourceUseRow>> resource_use(Millis from_day, Millis to_day,
                                                   const std::string& project_group) override;
  Result<std::int64_t> delete_resource_use_before(Millis day, int limit) override;

  // Retention.
  Result<std::int64_t> delete_events_before(Millis before, int limit) override;
  Result<std::vector<std::string>> finished_tasks_before(Millis before, int limit) override;

  // Monitoring.
  Status add_cluster_samples(const std::vector<ClusterSample>& rows) override;
  Result<std::vector<ClusterSample>> cluster_samples(std::int64_t width_s, Millis from, Millis to) override;
  Result<std::int64_t> delete_cluster_samples_before(std::int64_t width_s, Millis before, int limit) override;
  Status upsert_alert(const Alert& a) override;
  Result<std::vector<Alert>> open_alerts() override;
  Result<AlertPage> list_alerts(const AlertQuery& q) override;
  Status delete_alert(const std::string& id) override;
  Result<std::int64_t> delete_alerts_resolved_before(Millis before, int limit) override;
  Status append_audit(const AuditEntry& e) override;
  Result<AuditPage> list_audit(const AuditQuery& q) override;
  Result<std::int64_t> delete_audit_before(Millis before, int limit) override;
  Status upsert_approval(const Approval& a) override;
  Result<std::optional<Approval>> get_approval(const std::string& id) override;
  Result<ApprovalPage> list_approvals(const ApprovalQuery& q) override;
  Status insert_idempotency(const IdempotencyRecord& r) override;
  Result<std::optional<IdempotencyRecord>> get_idempotency(const std::string& user, const std::string& key) override;
  Result<std::int64_t> delete_idempotency_before(Millis before, int limit) override;

 protected:
  // INSERT, UPDATE or DELETE; the number of rows it changed.
  virtual Result<std::int64_t> run_modify(const sql::Statement& s) = 0;
  // An INSERT of a new row whose count nobody needs: a backend that holds
  // writes (Tx::hold_writes) may send it later; a unique violation is then
  // already_exists(kind, key).
  virtual Status run_insert(const sql::Statement& s, std::string_view kind, const std::string& key) {
    (void)kind;
    (void)key;
    CP_TRY(run_modify(s));
    return {};
  }
  // An INSERT ... ON CONFLICT DO NOTHING of a row whose key may be taken:
  // already_exists(kind, key) when no row went in. A backend that holds
  // writes may send it later without the ON CONFLICT clause; the unique
  // violation then fails the transaction with the same error.
  virtual Status run_insert_unique(const sql::Statement& s, std::string_view kind, const std::string& key) {
    CP_ASSIGN(std::int64_t inserted, run_modify(s));
    if (inserted == 0) return errors::already_exists(std::string(kind), key);
    return {};
  }
  // Calls on_row for every row of a SELECT.
  virtual Status run_query(const sql::Statement& s, const SqlRowFn& on_row) = 0;
  virtual const sql::Dialect& dialect() const = 0;

 private:
  template <class T>
  Result<std::vector<T>> by_ids(std::string_view table, const std::vector<std::string>& ids);
};

}  // namespace cp
