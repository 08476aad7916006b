#include "common/smtp_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>

namespace cp {
namespace {

void global_init() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

std::string base64(std::string_view in) {
  static constexpr char abc[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((in.size() + 2) / 3 * 4);
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const unsigned v = static_cast<unsigned char>(in[i]) << 16 | static_cast<unsigned char>(in[i + 1]) << 8 |
                       static_cast<unsigned char>(in[i + 2]);
    out += abc[v >> 18 & 63];
    out += abc[v >> 12 & 63];
    out += abc[v >> 6 & 63];
    out += abc[v & 63];
  }
  if (i < in.size()) {
    unsigned v = static_cast<unsigned char>(in[i]) << 16;
    if (i + 1 < in.size()) v |= static_cast<unsigned char>(in[i + 1]) << 8;
    out += abc[v >> 18 & 63];
    out += abc[v >> 12 & 63];
    out += i + 1 < in.size() ? abc[v >> 6 & 63] : '=';
    out += '=';
  }
  return out;
}

// "Thu, 01 Jan 2026 00:00:00 +0000" (RFC 5322 section 3.3), in UTC.
std::string mail_date(Millis t) {
  static constexpr const char* days[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
  static constexpr const char* months[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                           "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  const std::time_t secs = static_cast<std::time_t>(t / 1000);
  std::tm g{};
  ::gmtime_r(&secs, &g);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s, %02d %s %04d %02d:%02d:%02d +0000", days[g.tm_wday % 7], g.tm_mday,
                months[g.tm_mon % 12], g.tm_year + 1900, g.tm_hour, g.tm_min, g.tm_sec);
  return buf;
}

Error bad_address(const std::string& field, const std::string& value) {
  return errors::invalid(field, "\"" + value + "\" is not an email address (name@domain, no spaces)",
                         "\"" + value + "\" 不是电子邮件地址（name@domain，不含空格）");
}

struct Upload {
  std::string_view rest;
};

size_t read_cb(char* buf, size_t size, size_t nitems, void* userdata) {
  auto* up = static_cast<Upload*>(userdata);
  const std::size_t n = std::min(size * nitems, up->rest.size());
  up->rest.copy(buf, n);
  up->rest.remove_prefix(n);
  return n;
}

// libcurl hands every SMTP reply line to the header callback. The last one
// coded 4xx or 5xx is the refusal, in the server's own words, which curl's
// error ("Weird server reply", "RCPT failed: 550") does not carry.
size_t reply_cb(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* refusal = static_cast<std::string*>(userdata);
  std::string_view line(ptr, size * nmemb);
  while (!line.empty() && (line.back() == '\r' || line.back() == '\n')) line.remove_suffix(1);
  if (line.size() >= 3 && (line[0] == '4' || line[0] == '5') && std::isdigit(static_cast<unsigned char>(line[1])) &&
      std::isdigit(static_cast<unsigned char>(line[2]))) {
    std::string clean(line.substr(0, 300));
    for (char& ch : clean) {
      if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';
    }
    if (clean.size() > 3 && clean[3] == '-') clean[3] = ' ';  // a line of a multi-line reply
    *refusal = std::move(clean);
  }
  return size * nmemb;
}

}  // namespace

bool is_mail_address(std::string_view s) {
  const auto at = s.find('@');
  if (s.size() > 254 || at == std::string_view::npos || at == 0 || at + 1 == s.size() || s.rfind('@') != at) {
    return false;
  }
  for (unsigned char ch : s) {
    if (ch <= 0x20 || ch == 0x7f) return false;
    if (std::string_view("<>(),;:\"\\[]").find(static_cast<char>(ch)) != std::string_view::npos) return false;
  }
  return true;
}

bool is_smtp_url(std::string_view url) {
  std::string_view rest;
  if (url.starts_with("smtp://")) rest = url.substr(7);
  else if (url.starts_with("smtps://")) rest = url.substr(8);
  else return false;
  if (rest.empty() || rest.front() == '/' || rest.front() == ':' || url.size() > 2048) return false;
  for (unsigned char ch : rest) {
    if (ch <= 0x20 || ch == 0x7f) return false;
  }
  // A login in the URL would end up in logs and in every delivery's
  // last_error; it comes from the environment instead.
  return rest.substr(0, rest.find('/')).find('@') == std::string_view::npos;
}

std::string encode_header_text(std::string_view utf8) {
  std::string text(utf8);
  for (char& ch : text) {
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = ' ';  // no header may end early
  }
  bool plain = text.size() <= 900 && text.find("=?") == std::string::npos;
  for (unsigned char ch : text) plain = plain && ch < 0x7f;
  if (plain) return text;
  // A line holding encoded words has at most 76 characters (RFC 2047
  // section 2), the header's name included: 39 bytes make 52 of base64, 64
  // with "=?UTF-8?B?" and "?=", 73 after "Subject: ". A word ends on a
  // character boundary, since each must decode on its own. The folding
  // white space between words is not part of the text.
  std::string out;
  std::size_t i = 0;
  while (i < text.size()) {
    std::size_t end = std::min(i + 39, text.size());
    while (end < text.size() && end > i + 1 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
    if (!out.empty()) out += "\r\n ";
    out += "=?UTF-8?B?" + base64(std::string_view(text).substr(i, end - i)) + "?=";
    i = end;
  }
  return out;
}

Result<std::string> render_mail(const MailMessage& m) {
  if (!is_mail_address(m.from)) return bad_address("from", m.from);
  if (m.to.empty()) return errors::invalid("to", "a message needs at least one recipient", "邮件至少需要一个收件人");
  std::string to;
  for (const auto& r : m.to) {
    if (!is_mail_address(r)) return bad_address("to", r);
    to += (to.empty() ? "" : ", ") + r;
  }
  for (const auto* id : {&m.message_id, &m.in_reply_to}) {
    if (!id->empty() && !is_mail_address(*id)) {
      return errors::invalid("message_id", "\"" + *id + "\" is not a message id (left@right)",
                             "\"" + *id + "\" 不是邮件标识（left@right）");
    }
  }
  std::string out;
  out += "Date: " + mail_date(m.date) + "\r\n";
  out += "From: " + m.from + "\r\n";
  out += "To: " + to + "\r\n";
  out += "Subject: " + encode_header_text(m.subject) + "\r\n";
  if (!m.message_id.empty()) out += "Message-ID: <" + m.message_id + ">\r\n";
  if (!m.in_reply_to.empty()) {
    out += "In-Reply-To: <" + m.in_reply_to + ">\r\nReferences: <" + m.in_reply_to + ">\r\n";
  }
  // Machine-sent (RFC 3834): vacation responders and the like stay quiet.
  out += "Auto-Submitted: auto-generated\r\n";
  out += "MIME-Version: 1.0\r\n";
  out += "Content-Type: text/plain; charset=UTF-8\r\n";
  out += "Content-Transfer-Encoding: base64\r\n";
  out += "\r\n";
  std::string body;
  body.reserve(m.body.size() + m.body.size() / 32);
  for (std::size_t i = 0; i < m.body.size(); ++i) {
    if (m.body[i] == '\n' && (i == 0 || m.body[i - 1] != '\r')) body += '\r';
    body += m.body[i];
  }
  const std::string encoded = base64(body);
  for (std::size_t i = 0; i < encoded.size(); i += 76) out += encoded.substr(i, 76) + "\r\n";
  return out;
}

Status send_mail(const SmtpSettings& s, const MailMessage& m) {
  auto failed = [&](const std::string& what, const std::string& what_zh) {
    return Error{"smtp_failed", 502, "sending mail through " + s.url + " failed: " + what,
                 "通过 " + s.url + " 发送邮件失败：" + what_zh, {}};
  };
  if (!is_smtp_url(s.url)) {
    return failed("not an smtp:// or smtps:// URL (without a login)", "不是 smtp:// 或 smtps:// 地址（不可含登录信息）");
  }
  CP_ASSIGN(auto text, render_mail(m));
  global_init();
  std::unique_ptr<CURL, void (*)(CURL*)> handle(curl_easy_init(), curl_easy_cleanup);
  CP_CHECK(handle != nullptr, "curl_easy_init failed");
  CURL* c = handle.get();
  const std::string from = "<" + m.from + ">";
  std::unique_ptr<curl_slist, void (*)(curl_slist*)> rcpt(nullptr, curl_slist_free_all);
  for (const auto& r : m.to) {
    curl_slist* longer = curl_slist_append(rcpt.get(), ("<" + r + ">").c_str());
    CP_CHECK(longer != nullptr, "curl_slist_append failed");
    (void)rcpt.release();  // `longer` holds it now
    rcpt.reset(longer);
  }
  Upload upload{text};
  std::string refusal;
  char errbuf[CURL_ERROR_SIZE] = {0};

  curl_easy_setopt(c, CURLOPT_URL, s.url.c_str());
#if LIBCURL_VERSION_NUM >= 0x075500
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "smtp,smtps");
#else
  curl_easy_setopt(c, CURLOPT_PROTOCOLS, static_cast<long>(CURLPROTO_SMTP | CURLPROTO_SMTPS));
#endif
  // smtp:// goes on in the clear only where the server offers no STARTTLS;
  // smtps:// is TLS from the first byte.
  const long use_ssl = s.url.starts_with("smtps://") ? CURLUSESSL_ALL : CURLUSESSL_TRY;
  curl_easy_setopt(c, CURLOPT_USE_SSL, use_ssl);
  if (!s.user.empty()) {
    curl_easy_setopt(c, CURLOPT_USERNAME, s.user.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, s.password.c_str());
  }
  curl_easy_setopt(c, CURLOPT_MAIL_FROM, from.c_str());
  curl_easy_setopt(c, CURLOPT_MAIL_RCPT, rcpt.get());
  curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
  curl_easy_setopt(c, CURLOPT_READFUNCTION, read_cb);
  curl_easy_setopt(c, CURLOPT_READDATA, &upload);
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, reply_cb);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &refusal);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, s.connect_timeout_ms);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, s.timeout_ms);
  const CURLcode rc = curl_easy_perform(c);
  if (rc == CURLE_OK) return {};

  long code = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
  std::string what = errbuf[0] ? errbuf : curl_easy_strerror(rc);
  std::string what_zh = what;
  if (!refusal.empty()) {
    what += " (server replied \"" + refusal + "\")";
    what_zh += "（服务器回复 \"" + refusal + "\"）";
  } else if (code >= 400) {
    what += " (SMTP " + std::to_string(code) + ")";
    what_zh += "（SMTP " + std::to_string(code) + "）";
  }
  Error e = failed(what, what_zh);
  e.details["curl_code"] = static_cast<std::int64_t>(rc);
  e.details["smtp_code"] = static_cast<std::int64_t>(code);
  return e;
}

}  // namespace cp
