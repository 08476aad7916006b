// Alert notifications by email over real SMTP: the control plane's own
// sender (libcurl) mails a local SMTP server (aiosmtpd, tests/support) that
// refuses at first and then recovers, or is gone; and the Server document's
// email settings, refused when they could not work.
#include <gtest/gtest.h>

#include <filesystem>

#include "objstore/object_store.h"
#include "server/alert_rules.h"
#include "server/control_plane.h"
#include "server/fleet_config.h"
#include "store/store.h"
#include "server/offline_alert_fixture.h"
#include "support/smtp_sink.h"

namespace cp {
namespace {

using testing_smtp::SmtpSink;
using testing_smtp::SmtpSinkOptions;

class AlertEmailTest : public testing::OfflineAlertFixture {
 protected:
  // A sink that must start: python3 with aiosmtpd missing fails the test (CI installs it).
  void start_sink(const SmtpSinkOptions& opts = {}) {
    auto s = SmtpSink::start(opts);
    ASSERT_TRUE(s.ok()) << s.error().message;
    sink_ = std::move(s).value();
  }

  // The control plane mailing `emails` through `smtp_url`, with one firing alert.
  void start(const std::vector<std::string>& emails, const std::string& smtp_url) {
    ServerConfig cfg;
    cfg.alert_emails = emails;
    cfg.smtp_url = smtp_url;
    cfg.smtp_from = "cubeplane@cp.example";
    cfg.external_url = "https://cp.example";
    start_with(cfg);
  }

  std::unique_ptr<SmtpSink> sink_;
};

bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

TEST_F(AlertEmailTest, EachAddressGetsTheAlertInBothLanguagesAndThenItsResolution) {
  start_sink();
  start({"oncall@example.com", "lead@example.com"}, sink_->url());
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  auto a = the_alert();
  ASSERT_EQ(a.state, AlertState::firing);
  ASSERT_EQ(a.deliveries.size(), 2u);
  EXPECT_EQ(a.deliveries[0].receiver, "email:oncall@example.com");
  EXPECT_EQ(a.deliveries[1].receiver, "email:lead@example.com");
  for (const auto& d : a.deliveries) {
    EXPECT_EQ(d.state, "ok") << d.receiver << ": " << d.last_error;
    EXPECT_EQ(d.attempts, 1);
    EXPECT_EQ(d.delivered_at, clock_.now_ms());
  }

  auto mails = sink_->accepted();
  ASSERT_EQ(mails.size(), 2u);  // one each: a failure at one address does not hold up the other
  EXPECT_EQ(mails[0].rcpt_tos(), std::vector<std::string>{"oncall@example.com"});
  EXPECT_EQ(mails[1].rcpt_tos(), std::vector<std::string>{"lead@example.com"});
  const auto& m = mails[0];
  EXPECT_EQ(m.defects(), "[]") << m.message();
  EXPECT_EQ(m.mail_from(), "cubeplane@cp.example");
  EXPECT_EQ(m.header("from"), "cubeplane@cp.example");
  EXPECT_EQ(m.header("to"), "oncall@example.com");
  EXPECT_EQ(m.header("subject"), "[FIRING] cluster_offline critical: " + a.summary);
  EXPECT_EQ(m.header("date"), "Thu, 01 Jan 2026 00:00:00 +0000");  // the injected clock
  EXPECT_EQ(m.header("message-id"), "<" + a.id + ".firing@cp.example>");
  const std::string body = m.body();
  EXPECT_TRUE(contains(body, a.summary)) << body;
  EXPECT_TRUE(contains(body, a.summary_zh)) << body;
  EXPECT_TRUE(contains(body, "集群 c1 离线")) << body;
  EXPECT_TRUE(contains(body, "cluster=c1")) << body;
  EXPECT_TRUE(contains(body, "Started / 开始:      " + format_time(a.started_at))) << body;
  EXPECT_FALSE(contains(body, "Resolved")) << body;
  EXPECT_TRUE(contains(body, "https://cp.example/alerts")) << body;

  // The cluster goes: the alert resolves and each address hears so, in a
  // reply to the first message, so mail clients show the two together.
  clock_.advance_ms(60'000);
  ASSERT_TRUE(cp_->delete_cluster(admin_, "c1").ok());
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  mails = sink_->accepted();
  ASSERT_EQ(mails.size(), 4u);
  const auto& r = mails[2];
  EXPECT_EQ(r.header("subject"), "[RESOLVED] cluster_offline critical: " + a.summary);
  EXPECT_EQ(r.header("message-id"), "<" + a.id + ".resolved@cp.example>");
  EXPECT_EQ(r.header("in-reply-to"), "<" + a.id + ".firing@cp.example>");
  EXPECT_TRUE(contains(r.body(), "Resolved / 恢复:     " + format_time(clock_.now_ms()))) << r.body();
  EXPECT_TRUE(contains(r.body(), "[已恢复]")) << r.body();
}

TEST_F(AlertEmailTest, AServerThatRefusesTwiceGetsTheAlertOnTheThirdTryOnTheBackoffSchedule) {
  start_sink({.fail_first = 2});
  start({"oncall@example.com"}, sink_->url());
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(sink_->rejected().size(), 1u);
  auto a = the_alert();
  ASSERT_EQ(a.deliveries.size(), 1u);
  EXPECT_EQ(a.deliveries[0].state, "pending");
  EXPECT_EQ(a.deliveries[0].attempts, 1);
  EXPECT_TRUE(contains(a.deliveries[0].last_error, "451 4.3.0 try again later")) << a.deliveries[0].last_error;
  EXPECT_TRUE(contains(a.deliveries[0].last_error, sink_->url())) << a.deliveries[0].last_error;
  EXPECT_EQ(a.deliveries[0].next_at, clock_.now_ms() + 10'000);

  clock_.advance_ms(9'999);  // the first backoff is 10 s: not yet
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(sink_->rejected().size(), 1u);
  clock_.advance_ms(1);
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(sink_->rejected().size(), 2u);
  a = the_alert();
  EXPECT_EQ(a.deliveries[0].attempts, 2);
  EXPECT_EQ(a.deliveries[0].next_at, clock_.now_ms() + 20'000);
  clock_.advance_ms(19'000);  // the second is 20 s
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(sink_->rejected().size(), 2u);
  EXPECT_TRUE(sink_->accepted().empty());
  clock_.advance_ms(1'000);
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  a = the_alert();
  EXPECT_EQ(a.deliveries[0].state, "ok");
  EXPECT_EQ(a.deliveries[0].attempts, 3);
  EXPECT_EQ(a.deliveries[0].last_error, "");
  EXPECT_EQ(a.deliveries[0].delivered_at, clock_.now_ms());
  auto mails = sink_->accepted();
  ASSERT_EQ(mails.size(), 1u);
  // Every try is the same message: a server that kept an earlier copy can tell.
  EXPECT_EQ(mails[0].header("message-id"), sink_->rejected()[0].header("message-id"));
  // Delivered once: later passes send nothing.
  clock_.advance_ms(3'600'000);
  ASSERT_TRUE(cp_->evaluate_alerts().ok());
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  EXPECT_EQ(sink_->accepted().size(), 1u);
}

TEST_F(AlertEmailTest, AClosedPortIsAFailedTryWithAReadableErrorAndGivesUpAfterTheLastTry) {
  start_sink();
  const std::string url = sink_->url();
  sink_->stop();  // listening a moment ago, closed now
  start({"oncall@example.com"}, url);
  ASSERT_TRUE(cp_->deliver_alerts().ok());
  auto a = the_alert();
  ASSERT_EQ(a.deliveries.size(), 1u);
  EXPECT_EQ(a.deliveries[0].state, "pending");
  EXPECT_EQ(a.deliveries[0].attempts, 1);
  EXPECT_TRUE(contains(a.deliveries[0].last_error, "sending mail through " + url + " failed: "))
      << a.deliveries[0].last_error;
  EXPECT_TRUE(contains(a.deliveries[0].last_error, "Couldn't connect")) << a.deliveries[0].last_error;
  EXPECT_EQ(a.deliveries[0].next_at, clock_.now_ms() + 10'000);
  for (int i = 1; i < kMaxDeliveryAttempts; ++i) {
    clock_.advance_ms(delivery_backoff_ms(i));
    ASSERT_TRUE(cp_->deliver_alerts().ok());
  }
  a = the_alert();
  EXPECT_EQ(a.deliveries[0].state, "failed");
  EXPECT_EQ(a.deliveries[0].attempts, kMaxDeliveryAttempts);
  auto m = cp_->metrics();
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->alert_deliveries_failed, 1);
}

// ------------------------------------------------------ the Server document

Result<FleetConfig> server_doc(const std::string& spec) {
  return parse_fleet_config("apiVersion: cubeplane/v1\nkind: Server\nspec:\n" + spec);
}

TEST(AlertEmailConfig, TheServerDocumentSetsTheAddressesAndTheServer) {
  auto ok = server_doc(
      "  alert_emails: [oncall@example.com, lead@example.com]\n  smtp_url: smtps://mail.example.com:465\n"
      "  smtp_from: cubeplane@cp.example\n");
  ASSERT_TRUE(ok.ok()) << ok.error().message;
  EXPECT_EQ(ok->server.control.alert_emails, (std::vector<std::string>{"oncall@example.com", "lead@example.com"}));
  EXPECT_EQ(ok->server.control.smtp_url, "smtps://mail.example.com:465");
  EXPECT_EQ(ok->server.control.smtp_from, "cubeplane@cp.example");
  auto defaults = server_doc("  smtp_url: smtp://127.0.0.1:2525\n");
  ASSERT_TRUE(defaults.ok()) << defaults.error().message;
  EXPECT_EQ(defaults->server.control.smtp_from, "cubeplane@localhost");
  EXPECT_TRUE(defaults->server.control.alert_emails.empty());
}

TEST(AlertEmailConfig, SettingsThatCouldNotWorkAreRefusedWithTheFieldInBothLanguages) {
  struct Case {
    std::string spec, field;
  };
  const std::vector<Case> cases = {
      {"  alert_emails: [oncall]\n  smtp_url: smtp://m\n", "spec.alert_emails[0]"},
      {"  alert_emails: [a@x.org, \"on call@example.com\"]\n  smtp_url: smtp://m\n", "spec.alert_emails[1]"},
      {"  alert_emails: [\"oncall@example.com\\r\\nBcc: x@y\"]\n  smtp_url: smtp://m\n", "spec.alert_emails[0]"},
      {"  alert_emails: [oncall@example.com]\n  smtp_url: http://mail.example.com\n", "spec.smtp_url"},
      {"  smtp_url: \"smtp://alerts:secret@mail.example.com\"\n", "spec.smtp_url"},  // the login is not for files
      {"  alert_emails: [oncall@example.com]\n", "spec.smtp_url"},                     // no server to send through
      {"  smtp_url: smtp://m\n  smtp_from: cubeplane\n", "spec.smtp_from"},
  };
  for (const auto& c : cases) {
    auto bad = server_doc(c.spec);
    ASSERT_FALSE(bad.ok()) << c.spec;
    EXPECT_EQ(bad.error().code, "invalid_field") << c.spec;
    EXPECT_EQ(bad.error().details.at("field").as_string(), c.field) << c.spec << bad.error().message;
    EXPECT_TRUE(contains(bad.error().message, c.field)) << bad.error().message;
    EXPECT_TRUE(contains(bad.error().message_zh, c.field) && bad.error().message_zh != bad.error().message)
        << bad.error().message_zh;
  }
  auto missing = server_doc("  alert_emails: [oncall@example.com]\n");
  EXPECT_TRUE(contains(missing.error().message, "required when spec.alert_emails is set")) << missing.error().message;
  // The password lives in CUBEPLANE_SMTP_PASSWORD; the file has no field for it.
  auto password = server_doc("  smtp_url: smtp://m\n  smtp_password: hunter2\n");
  ASSERT_FALSE(password.ok());
  EXPECT_TRUE(contains(password.error().message, "smtp_password")) << password.error().message;
}

}  // namespace
}  // namespace cp
