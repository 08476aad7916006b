#!/usr/bin/python3
"""A real SMTP server for the tests: Debian's aiosmtpd on 127.0.0.1.

    smtp_sink.py --directory DIR [--port 0] [--fail-first N]
                 [--fail-reply "451 4.3.0 try again later"] [--auth USER:PASSWORD]

Listens on a port the OS picks (a socket bound to port 0, handed to the
server, so there is no window in which another process can take it) and
prints "smtp sink listening on 127.0.0.1:<port>" on stdout once it accepts
connections; nothing else is printed there.

Every message that ends its DATA is written to DIR, numbered in arrival
order (0001, 0002, ...):
  msg-NNNN.eml / rejected-NNNN.eml   "envelope-from: ...", one "envelope-to: ..."
                                     a recipient, a blank line, then the message
                                     exactly as received
  msg-NNNN.json / rejected-NNNN.json the same message read by Python's own
                                     email parser (headers decoded, RFC 2047
                                     included; body decoded), with any defects
                                     the parser found
The .json is written last, each file under a temporary name then renamed,
so a test that sees a .json sees both files whole. The first N messages
(--fail-first) are answered with --fail-reply instead of 250: a temporary
failure, for tests of retries.

With --auth the server requires AUTH (PLAIN or LOGIN, allowed without TLS:
it only listens on the loopback) with exactly that user and password.

It stops on SIGTERM/SIGINT, and when its stdin, if a pipe, is closed: a test
that dies without stopping it does not leave it behind.
"""
import argparse
import asyncio
import json
import logging
import os
import signal
import socket
import stat
import sys
import warnings

try:
    from email import policy
    from email.parser import BytesParser

    from aiosmtpd.smtp import SMTP, AuthResult, LoginPassword
except ImportError as e:  # said on stdout, where the test reads
    print(f"error: cannot import aiosmtpd ({e}); install Debian's python3-aiosmtpd", flush=True)
    sys.exit(3)


def write_atomically(path, data):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def parsed(raw):
    msg = BytesParser(policy=policy.default).parsebytes(raw)
    defects = [repr(d) for d in msg.defects]
    headers = {}
    for name, value in msg.items():  # values decoded (RFC 2047), folding undone
        defects += [repr(d) for d in getattr(value, "defects", ())]
        headers.setdefault(name.lower(), str(value))
    body = ""
    try:
        body = msg.get_content()  # the text, its transfer encoding and charset undone
    except Exception as e:  # a defect of its own: the test shows it
        defects.append("get_content: " + repr(e))
    return {
        "headers": headers,
        "content_type": msg.get_content_type(),
        "charset": msg.get_content_charset() or "",
        "transfer_encoding": msg.get("Content-Transfer-Encoding", ""),
        "body": body,
        "defects": defects,
    }


class Sink:
    def __init__(self, directory, fail_first, fail_reply):
        self.directory = directory
        self.fail_first = fail_first
        self.fail_reply = fail_reply
        self.count = 0

    async def handle_DATA(self, server, session, envelope):
        self.count += 1
        refuse = self.count <= self.fail_first
        name = os.path.join(self.directory, "%s-%04d" % ("rejected" if refuse else "msg", self.count))
        head = "envelope-from: %s\r\n" % envelope.mail_from
        head += "".join("envelope-to: %s\r\n" % r for r in envelope.rcpt_tos)
        raw = envelope.original_content or envelope.content
        write_atomically(name + ".eml", head.encode() + b"\r\n" + raw)
        record = parsed(raw)
        record["mail_from"] = envelope.mail_from
        record["rcpt_tos"] = list(envelope.rcpt_tos)
        record["login"] = session.auth_data.login.decode() if isinstance(session.auth_data, LoginPassword) else ""
        write_atomically(name + ".json", json.dumps(record, ensure_ascii=False).encode())
        return self.fail_reply if refuse else "250 2.0.0 OK"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--directory", required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--fail-first", type=int, default=0)
    ap.add_argument("--fail-reply", default="451 4.3.0 try again later")
    ap.add_argument("--auth", default="")
    args = ap.parse_args()
    os.makedirs(args.directory, exist_ok=True)
    # AUTH without TLS is what --auth asks for, on the loopback: no warnings
    # about it in the test's output.
    warnings.simplefilter("ignore")
    logging.getLogger("mail.log").setLevel(logging.ERROR)

    authenticator = None
    if args.auth:
        user, _, password = args.auth.partition(":")

        def authenticator(server, session, envelope, mechanism, data):
            ok = isinstance(data, LoginPassword) and data.login.decode() == user and data.password.decode() == password
            return AuthResult(success=ok, handled=False, auth_data=data if ok else None)

    sink = Sink(args.directory, args.fail_first, args.fail_reply)

    async def serve():
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", args.port))
        sock.listen(16)

        def protocol():
            return SMTP(sink, hostname="smtp-sink.test", loop=loop, authenticator=authenticator,
                        auth_required=bool(args.auth), auth_require_tls=False)

        server = await loop.create_server(protocol, sock=sock)
        stop = asyncio.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        if stat.S_ISFIFO(os.fstat(0).st_mode):
            def on_stdin():
                if not os.read(0, 4096):
                    stop.set()
            loop.add_reader(0, on_stdin)
        print("smtp sink listening on 127.0.0.1:%d" % sock.getsockname()[1], flush=True)
        await stop.wait()
        server.close()
        await server.wait_closed()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
