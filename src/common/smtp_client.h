// Email over SMTP (libcurl) for the alert deliveries: one plain-text message,
// one SMTP transaction, blocking. Like http_client.h, the only place that
// includes curl for it.
//
//   render_mail   the RFC 5322 message: headers (the subject RFC 2047-encoded
//                 when it is not plain ASCII), then the UTF-8 body in base64,
//                 so no line is too long and no server needs 8BITMIME
//   send_mail     connect (smtp:// upgrades with STARTTLS when the server
//                 offers it; smtps:// is TLS from the start), AUTH when a
//                 user is set, MAIL FROM, RCPT TO each, DATA, the message
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "common/result.h"

namespace cp {

struct SmtpSettings {
  std::string url;       // smtp://host[:port] or smtps://host[:port]
  std::string user;      // "" = no AUTH
  std::string password;
  long connect_timeout_ms = 5000;
  long timeout_ms = 20000;  // the whole transaction
};

struct MailMessage {
  std::string from;             // a bare address (is_mail_address)
  std::vector<std::string> to;  // bare addresses, at least one
  std::string subject;          // UTF-8; control characters become spaces
  std::string body;             // UTF-8 text; "\n" or "\r\n" line ends
  Millis date = 0;              // the Date header
  std::string message_id;       // "left@right", without <>; "" = none
  std::string in_reply_to;      // likewise: threads a message under an earlier one
};

// Whether `s` can stand as a bare address in a header and in MAIL FROM /
// RCPT TO: one '@' with something on both sides, printable ASCII or UTF-8,
// and none of space, CR, LF, other controls, or the characters that would
// end the address early (<>(),;:"\[]).
bool is_mail_address(std::string_view s);

// Whether `url` is smtp:// or smtps:// followed by a host, without spaces or controls.
bool is_smtp_url(std::string_view url);

// Header text as RFC 2047 encoded words ("=?UTF-8?B?...?=", folded) when it
// holds anything but printable ASCII; as it is otherwise.
std::string encode_header_text(std::string_view utf8);

// The message as it goes over the wire (CRLF line ends); an error coded
// "invalid_field" for an address that is not one.
Result<std::string> render_mail(const MailMessage& m);

// Sends `m` to all of m.to in one transaction. Any failure (no connection,
// TLS, AUTH, a refused recipient or message, a timeout) is an Error coded
// "smtp_failed" (status 502) whose message names the server, what failed in
// curl's words, and the server's refusal ("451 4.3.0 try again later") when
// there was one: an alert delivery shows it as its last_error.
Status send_mail(const SmtpSettings& s, const MailMessage& m);

}  // namespace cp
