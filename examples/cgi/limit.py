#!/usr/bin/env python3
"""examples/cgi/limit.py: a CGI page guarded by frsd, with frs_client.

Put this script and clients/python/frs_client.py in the same CGI directory
(or run it from the source tree, where it finds ../../clients/python). Every
request acquires one use of FRS_BIZ for its key:

  * the form's `user` parameter ("login attempts per user name"), as key
    "user:NAME" (any characters: the client escapes them), else
  * the client's address, as key "ip:REMOTE_ADDR".

Allowed: the page (200). Denied: 429 Too Many Requests, with Retry-After
when waiting cures it. frsd down or too slow (FRS_TIMEOUT), or an answer
that is not frsd's (a proxy's page): FRS_FAIL=open serves the page,
FRS_FAIL=closed answers 503 with Retry-After: 1. A key
frsd refuses (a user name too long, a control character): 400, which no
wait cures; any other refusal (an unknown FRS_BIZ): 500, the page's
configuration. The error goes to stderr (the server's error log).

Settings, from the environment (nginx: fastcgi_param; Apache: SetEnv):
  FRS_SERVERS   "host:port" or shards "h1:p1,h2:p2 weight=2" (default 127.0.0.1:8300)
  FRS_BIZ       the biz of map.xml (default login)
  FRS_FAIL      open | closed (default open)
  FRS_TIMEOUT   seconds (default 0.5)
"""

import os
import re
import sys
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "..", "clients", "python")]

from frs_client import Client  # noqa: E402


def respond(status, headers, text):
    out = sys.stdout.buffer
    out.write(("Status: %s\r\n" % status).encode("ascii"))
    for name, value in headers:
        out.write(("%s: %s\r\n" % (name, value)).encode("ascii"))
    out.write(b"Content-Type: text/plain; charset=utf-8\r\n\r\n")
    out.write(text.encode("utf-8"))
    out.flush()


def main():
    query = os.environ.get("QUERY_STRING", "")
    # The first user= of the query, as limit.sh takes it (an empty one too:
    # the visitor's address then), and only it decoded: another parameter's
    # bytes are none of this page's business.
    raw = next((p[5:] for p in query.split("&") if p.startswith("user=")), "")
    # A user name is counted as sent: a malformed %-escape or bytes that are
    # no UTF-8 are refused (decoded leniently, every bad byte would become
    # U+FFFD and distinct names would share one count).
    if re.search(r"%(?![0-9A-Fa-f]{2})", raw):
        respond("400 Bad Request", [], "This request cannot be counted: the user parameter has a bad %-escape\n")
        return
    try:
        user = urllib.parse.unquote_plus(raw, errors="strict")
    except UnicodeDecodeError:
        respond("400 Bad Request", [], "This request cannot be counted: the user parameter is not UTF-8\n")
        return
    key = "user:" + user if user else "ip:" + os.environ.get("REMOTE_ADDR", "unknown")

    try:
        frs = Client(
            os.environ.get("FRS_SERVERS", "127.0.0.1:8300"),
            timeout=float(os.environ.get("FRS_TIMEOUT", "0.5")),
            fail=os.environ.get("FRS_FAIL", "open"),
        )
    except ValueError as e:  # FRS_TIMEOUT, FRS_FAIL or FRS_SERVERS: the page's configuration
        sys.stderr.write("limit.py: %s\n" % e)
        respond("500 Internal Server Error", [], "The rate limiter is misconfigured.\n")
        return
    d = frs.acquire(os.environ.get("FRS_BIZ", "login"), key)
    frs.close()

    if d.error:
        sys.stderr.write("limit.py: frs: %s\n" % d.error)
    if d.allowed:
        respond("200 OK", [], "Hello, %s\n" % (user or "visitor"))
    # frsd did not decide (no answer, a 421 outside the ring, a 5xx, or an
    # answer that is not frsd's, such as a proxy's 200, 404 or 429 page):
    # fail closed.
    elif d.unanswered:
        respond("503 Service Unavailable", [("Retry-After", "1")], "Try again in a moment.\n")
    # frsd, or the client before it, refused the key itself: not a denial,
    # and no wait cures it. Why goes to the log above; the visitor's page
    # names no internal address (frsd's error starts with the server that
    # answered).
    elif d.error and (d.status == 400 or d.server is None):
        respond("400 Bad Request", [], "This request cannot be counted.\n")
    elif d.error:
        respond("500 Internal Server Error", [], "The rate limiter is misconfigured.\n")
    else:
        headers = [("Retry-After", str(max(1, d.retry_after)))] if d.retry_after >= 0 else []
        respond("429 Too Many Requests", headers, "Too many requests: slow down.\n")


if __name__ == "__main__":
    main()
