// The SMTP client against a real SMTP server (aiosmtpd, tests/support): what
// arrives is read back by Python's own email parser, so the headers, the
// RFC 2047 subject and the base64 body are checked by code that is not ours.
#include "common/smtp_client.h"

#include <gtest/gtest.h>

#include "support/smtp_sink.h"

namespace cp {
namespace {

using testing_smtp::SmtpSink;
using testing_smtp::SmtpSinkOptions;

constexpr Millis kJan1 = 1'767'225'600'000;  // 2026-01-01T00:00:00Z, a Thursday

std::unique_ptr<SmtpSink> start_sink(const SmtpSinkOptions& opts = {}) {
  auto s = SmtpSink::start(opts);
  // A failure, not a skip: CI installs python3-aiosmtpd.
  EXPECT_TRUE(s.ok()) << s.error().message;
  return s.ok() ? std::move(s).value() : nullptr;
}

MailMessage message() {
  MailMessage m;
  m.from = "cubeplane@cp.example";
  m.to = {"oncall@example.com"};
  m.subject = "[FIRING] quota_watermark critical: 资源组 rg-a 已使用 100%";
  m.body = "resource group rg-a uses 100%\n资源组 rg-a 已使用 100%\n.a line that starts with a dot\n";
  m.date = kJan1 + 5'000;
  m.message_id = "alert-1.firing@cp.example";
  return m;
}

std::string without_cr(std::string s) {
  std::erase(s, '\r');
  return s;
}

TEST(SmtpClient, ARealServerGetsTheMessageWithItsHeadersAndBody) {
  auto sink = start_sink();
  ASSERT_TRUE(sink);
  auto m = message();
  auto st = send_mail(SmtpSettings{sink->url()}, m);
  ASSERT_TRUE(st.ok()) << st.error().message;

  auto got = sink->accepted();
  ASSERT_EQ(got.size(), 1u);
  const auto& mail = got[0];
  EXPECT_EQ(mail.defects(), "[]") << mail.message();
  EXPECT_EQ(mail.mail_from(), "cubeplane@cp.example");
  EXPECT_EQ(mail.rcpt_tos(), std::vector<std::string>{"oncall@example.com"});
  EXPECT_EQ(mail.header("from"), "cubeplane@cp.example");
  EXPECT_EQ(mail.header("to"), "oncall@example.com");
  EXPECT_EQ(mail.header("subject"), m.subject);  // decoded back from RFC 2047
  EXPECT_EQ(mail.header("date"), "Thu, 01 Jan 2026 00:00:05 +0000");
  EXPECT_EQ(mail.header("message-id"), "<alert-1.firing@cp.example>");
  EXPECT_EQ(mail.header("mime-version"), "1.0");
  EXPECT_EQ(mail.header("auto-submitted"), "auto-generated");
  EXPECT_EQ(mail.parsed.at("content_type").as_string(), "text/plain");
  EXPECT_EQ(mail.parsed.at("charset").as_string(), "utf-8");
  EXPECT_EQ(without_cr(mail.body()), m.body);

  // On the wire: the subject as encoded words, every line CRLF-ended and
  // short, so no server rewraps or refuses it.
  const std::string raw = mail.message();
  EXPECT_NE(raw.find("\r\nSubject: =?UTF-8?B?"), std::string::npos) << raw;
  EXPECT_NE(raw.find("Content-Transfer-Encoding: base64\r\n"), std::string::npos);
  for (std::size_t at = 0, eol; (eol = raw.find('\n', at)) != std::string::npos; at = eol + 1) {
    ASSERT_GT(eol, at) << "bare LF in " << raw;
    EXPECT_EQ(raw[eol - 1], '\r') << "bare LF in " << raw;
    EXPECT_LE(eol - at, 78u) << raw.substr(at, eol - at);
  }
}

TEST(SmtpClient, AnAsciiSubjectStaysAsItIsAndALongChineseOneIsFoldedIntoWholeCharacters) {
  EXPECT_EQ(encode_header_text("[FIRING] cluster_offline critical: cluster c1 is offline"),
            "[FIRING] cluster_offline critical: cluster c1 is offline");
  EXPECT_EQ(encode_header_text("告警"), "=?UTF-8?B?5ZGK6K2m?=");
  // A line break someone put in a summary does not start a header of its own.
  EXPECT_EQ(encode_header_text("a\r\nBcc: x@y"), "a  Bcc: x@y");

  std::string subject;
  for (int i = 0; i < 20; ++i) subject += "节点未就绪 node-" + std::to_string(i) + " ";
  const std::string encoded = encode_header_text(subject);
  for (std::size_t at = 0; at < encoded.size();) {
    std::size_t eol = encoded.find("\r\n ", at);
    if (eol == std::string::npos) eol = encoded.size();
    const std::string word = encoded.substr(at, eol - at);
    EXPECT_LE(word.size(), 75u) << word;  // RFC 2047's limit for one encoded word
    EXPECT_TRUE(word.starts_with("=?UTF-8?B?") && word.ends_with("?=")) << word;
    at = eol + 3;
  }

  auto sink = start_sink();
  ASSERT_TRUE(sink);
  auto m = message();
  m.subject = subject;
  ASSERT_TRUE(send_mail(SmtpSettings{sink->url()}, m).ok());
  auto got = sink->accepted();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].defects(), "[]");
  EXPECT_EQ(got[0].header("subject"), subject);  // each word decodes on its own: no character was split
}

TEST(SmtpClient, EveryRecipientGetsTheMessageInOneTransaction) {
  auto sink = start_sink();
  ASSERT_TRUE(sink);
  auto m = message();
  m.to = {"a@example.com", "b@example.com"};
  ASSERT_TRUE(send_mail(SmtpSettings{sink->url()}, m).ok());
  auto got = sink->accepted();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].rcpt_tos(), (std::vector<std::string>{"a@example.com", "b@example.com"}));
  EXPECT_EQ(got[0].header("to"), "a@example.com, b@example.com");
}

TEST(SmtpClient, ARefusalComesBackWithTheServersReplyAndCode) {
  auto sink = start_sink({.fail_first = 1});
  ASSERT_TRUE(sink);
  auto st = send_mail(SmtpSettings{sink->url()}, message());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, "smtp_failed");
  EXPECT_NE(st.error().message.find(sink->url()), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message.find("451 4.3.0 try again later"), std::string::npos) << st.error().message;
  EXPECT_NE(st.error().message_zh.find("451 4.3.0 try again later"), std::string::npos);
  EXPECT_EQ(st.error().details.at("smtp_code").as_int64(), 451);
  EXPECT_EQ(sink->rejected().size(), 1u);
  EXPECT_TRUE(sink->accepted().empty());

  ASSERT_TRUE(send_mail(SmtpSettings{sink->url()}, message()).ok());  // the next try is taken
  EXPECT_EQ(sink->accepted().size(), 1u);
}

TEST(SmtpClient, AClosedPortIsAReadableFailure) {
  auto sink = start_sink();
  ASSERT_TRUE(sink);
  const std::string url = sink->url();
  sink->stop();  // listening a moment ago, closed now
  auto st = send_mail(SmtpSettings{url}, message());
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code, "smtp_failed");
  EXPECT_NE(st.error().message.find("sending mail through " + url + " failed: "), std::string::npos)
      << st.error().message;
  EXPECT_NE(st.error().message.find("onnect"), std::string::npos) << st.error().message;  // "Failed to connect ..."
}

TEST(SmtpClient, TheLoginIsSentWhenAUserIsSet) {
  auto sink = start_sink({.auth = "alerts:s3cret pass"});
  ASSERT_TRUE(sink);
  SmtpSettings s{sink->url()};
  auto st = send_mail(s, message());
  ASSERT_FALSE(st.ok());  // the server requires AUTH
  EXPECT_NE(st.error().message.find("530"), std::string::npos) << st.error().message;

  s.user = "alerts";
  s.password = "wrong";
  st = send_mail(s, message());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("535"), std::string::npos) << st.error().message;

  s.password = "s3cret pass";
  st = send_mail(s, message());
  ASSERT_TRUE(st.ok()) << st.error().message;
  auto got = sink->accepted();
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].parsed.at("login").as_string(), "alerts");
}

TEST(SmtpClient, AddressesAndUrlsThatCouldNotBeSentAreRefusedBeforeConnecting) {
  for (const char* ok : {"oncall@example.com", "a.b+alerts@sub.example.org", "运维@example.cn"}) {
    EXPECT_TRUE(is_mail_address(ok)) << ok;
  }
  for (const char* bad : {"", "oncall", "@example.com", "oncall@", "a@b@c", "on call@example.com",
                          "oncall@example.com\r\nRCPT TO:<x@y>", "<oncall@example.com>", "a,b@example.com"}) {
    EXPECT_FALSE(is_mail_address(bad)) << bad;
  }
  for (const char* ok : {"smtp://127.0.0.1:2525", "smtps://mail.example.com:465", "smtp://mail.example.com"}) {
    EXPECT_TRUE(is_smtp_url(ok)) << ok;
  }
  for (const char* bad : {"", "http://mail.example.com", "smtp://", "smtp:///x", "smtp://mail example.com",
                          "smtp://user:pw@mail.example.com", "mailto:a@b", "file:///etc/passwd"}) {
    EXPECT_FALSE(is_smtp_url(bad)) << bad;
  }

  auto m = message();
  m.to = {"oncall@example.com\r\nBcc: x@y"};
  auto r = render_mail(m);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().details.at("field").as_string(), "to");
  auto st = send_mail(SmtpSettings{"http://127.0.0.1:1"}, message());
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message.find("smtp://"), std::string::npos) << st.error().message;
}

}  // namespace
}  // namespace cp
