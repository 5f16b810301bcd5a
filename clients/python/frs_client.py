"""frs_client: a small Python client for frsd (FRS, the rate-limit counter server).

One file, Python 3 standard library only: copy it next to a CGI script (or
anywhere on sys.path) and import it.

    from frs_client import Client

    frs = Client("127.0.0.1:8300", timeout=0.5, fail="open")
    d = frs.acquire("login", "user:42")
    if not d.allowed:
        print("Status: 429 Too Many Requests")
        if d.retry_after >= 0:  # -1: no wait helps (n above the limit), so no Retry-After
            print("Retry-After: %d" % max(1, d.retry_after))

API
---

Client(servers="127.0.0.1:8300", timeout=0.5, fail="open", token=None, failover=True, skip_failed=10.0)
    servers: one "host:port" string, or a list of shards. A shard is
        "host:port", "host:port weight=N" (nginx's spelling) or a
        ("host:port", N) pair; a string holding several shards separated
        by commas is accepted too. With several shards the client picks the
        owner of each request itself, exactly as nginx's
        `hash $route consistent;` does over `server` lines that are these
        strings, in this order, with these weights (the `<shard>` lines of
        frsd's `<cluster>`).
    timeout: seconds, the most one call may take: one deadline covers the
        whole exchange (the connect, the send, the read of the whole
        answer, the one resend on a stale keep-alive connection and a
        followed 421), like the C++ client's deadline per exchange; each
        socket operation waits only for what is left of it, so a server
        that trickles its answer cannot hold the call longer. A batch split
        over shards has one such deadline per shard it is sent to (one
        exchange each). On the deadline the call decides by `fail`, with
        error="frsd ... timed out ...". Not covered: the name lookup of a
        shard given by host name (the resolver's own time-outs); give
        addresses. Above 0 (ValueError otherwise); None: no deadline (a
        call waits as long as the server does).
    fail: what a request decides when frsd cannot answer (time-out,
        connection refused or reset, an HTTP 5xx, a 421 not followed, an
        answer over the 64 MiB cap, a 200 whose body is not FRS XML or
        lacks what a decision needs: <response code="0"> with allowed="0|1",
        found="0|1" for delete, one per member in a <batch allowed="0|1">):
        "open" allows, "closed" denies. Either way the Decision carries
        error="...". release, renew and settle admit nothing: one that
        failed is allowed=False whatever `fail` says, so that
        `if client.settle(...)` never reads a dead server as done.
    token: srv.xml's <admin token>, sent with the admin commands (set,
        delete) only.
    failover: with several shards, a call whose route's owner cannot
        answer (refused, reset, no whole answer within half the time left,
        a 5xx) is asked of the route's successor with the rest of the time;
        with <cluster replicas="1"> it holds the owner's counts and serves
        them, without replicas it answers 421 and `fail` decides. An
        acquire the owner took but did not answer then counts on both
        (denied sooner, never granted more). False: the owner only.
        Client.failovers counts the calls the other holder answered.
    skip_failed: seconds a shard that could not answer is asked second
        (nginx's fail_timeout), so a dead machine costs one call half its
        time-out, not every call.
    One keep-alive HTTP/1.1 connection per server (http.client), opened on
    first use and re-opened after an error; an idle connection that frsd
    closed meanwhile is re-opened and the request sent again, once. An
    answer body is read up to 64 MiB (MAX_ANSWER_BYTES, the C++ client's
    cap): a larger Content-Length is refused unread, and a body that grows
    past it is not read further; either is a failed exchange. A
    Client may be shared by threads and survives os.fork(): each thread,
    and each process, uses connections of its own (a forked child opens
    new ones; the parent's stay the parent's). close() (or a `with`
    block) closes every thread's connections.

Decisions (every call returns one; none raises on a denial, an HTTP error
or a network failure):

    acquire(biz, key, n=1, route=None, reserve=None)
                                        atomic: records n uses if every rule allows them; with
                                        reserve=S, holds n as an estimate for S seconds and answers
                                        Decision.reservation (settle it with the real amount)
    query(biz, key, n=1, route=None)    read-only: would n more uses be allowed now
    update(biz, key, n=1, route=None)   records n uses unconditionally
    get(biz, key, route=None)           the node's state (Decision.found)
    set(biz, key, count, route=None)    admin (needs token)
    delete(biz, key, route=None)        admin (needs token); Decision.found
    release(biz, key, lease, route=None) ends a lease a concurrency rule granted; Decision.released
    renew(biz, key, lease, route=None)   the lease holds again, until now + its `lease` + 1 s
    settle(biz, key, reservation, n, route=None)
                                        charges n (the real amount) in the reservation's window and
                                        gives back the rest of its estimate; Decision.settled

Decision fields: allowed (bool; also the truth value of the Decision),
count, limit, remaining, reset (unix seconds), retry_after (seconds; 0 when
allowed, -1 when no wait can cure the denial), rules (list of Rule: algo,
interval, count, limit, remaining, reset, allowed, debt), shadow (bool: the
biz is in shadow mode, counted and never denied), would_deny (bool), found
(None, or bool for get/set/delete), error (None, or a sentence), status (the
HTTP status, 0 when no answer came or the client refused the request
itself), unanswered (bool: frsd did not decide, the fail policy did: no
answer, a time-out, a 5xx, or an answer that is not frsd's, such as a
proxy's page; a page may then answer 503 whatever `fail` says), server (the
shard that answered; None when the client refused the request itself, as
for a key that is not valid UTF-8),
lease and lease_expires (an acquire or renew of a biz with a concurrency rule:
the lease's id and the unix second it ends; None and 0 otherwise), released
(release: the lease was held and is now free). A release or renew of an id
this key never granted is an error with status 409, of a lease that ended 410.
reservation and reservation_expires (an acquire with reserve: the id and the
unix second it expires, charged its estimate, if not settled), settled,
returned and overrun (settle: applied, what it gave back, what it charged
beyond the estimate), reservations_full (an acquire with reserve denied
because the key holds all the reservations its biz allows; retry_after says
until the first of them expires). A settle of an id this key never issued is
an error with status 409; one settled already or expired, 410 (it was applied
once).

An answer frsd refuses (400 bad key or attribute, 403, 404 unknown biz, ...)
is a Decision with allowed=False and error="HTTP 404: unknown biz ...",
whatever `fail` says: it is the request that is wrong, not the service that
is down, and failing open on it would let a key frsd rejects (say, one with
a control character in it) bypass its limit.

batch(items, route=None) -> BatchResult
    items: [(cmd, biz, key), (cmd, biz, key, n), ...]. The result is a list
    of Decisions, one per item in order, with .allowed (the overall
    verdict: every member allowed) and .error (the first error of any
    member, or the whole batch's; None when none failed). An empty list
    answers allowed=False, error="the batch is empty", sending nothing.
    frsd runs one batch all-or-nothing for its acquires. With one server,
    or with route=R (sent as POST /frs?route=R to R's owner), the batch is
    sent whole. With several shards and no route, the members are grouped
    by route (members with the same route, in the order of their first
    member) and each group goes to its route's owner as one batch: a shard
    of a cluster refuses a batch whose members route differently, and
    every node must live at its own route's owner. All-or-nothing then
    holds per group only: once a group with an acquire is denied (or
    fails closed), the groups after it are not sent (their members answer
    allowed=False, error="not sent: ..."), but the groups before it have
    already recorded their uses.

Routing
-------

A request's route is the `route` argument, else the part of the key inside
its first {...} (when non-empty: Redis Cluster's hash tags), else the key.
owner(route) names the shard nginx's consistent hash picks for a route
given as the bytes hashed (a str is hashed as its UTF-8 bytes), the same
answer as `frsctl -c srv.xml owner ROUTE`. route_of(key, route=None) gives
the bytes a request is routed by:

  * the key's route is hashed as the UTF-8 bytes of the key, because the
    key travels in the XML body and frsd hashes the key it decoded;
  * a `route` argument travels in the query string (POST /frs?route=R),
    percent-encoded with urllib.parse.quote(route, safe=""), and frsd (as a
    proxy would) hashes the query bytes as sent, still encoded: the client
    hashes the encoded string too. For routes of unreserved characters
    (A-Z a-z 0-9 - . _ ~) both are the same; keep routes to those.

A 421 answer (the shard is not the route's owner: the client's shard list
and the cluster's differ) is followed once to the `owner` it names when
that owner is one of the client's own shards (spelled as in its list), as
the C++ client does; Client.redirects counts the 421 answers followed. A
421 naming any other server is not followed (a misrouted request, or a
hostile answer, must not send requests and the admin token wherever it
says): it is a failed exchange, decided by `fail`, with error="... not in
this client's shard list ...".

The ring, as nginx builds it: every shard contributes weight x 160 points;
point j of "HOST:PORT" is CRC-32(HOST, b"\\0", PORT, point j-1 as 4
little-endian bytes, 0 for the first), the string split at its last ':'
only when digits follow; the points are sorted (stably) and of equal
hashes the first is kept; a route goes to the first point >= CRC-32(route),
wrapping around. CRC-32 is zlib's (IEEE 802.3), the one nginx uses.

Everything goes over POST /frs with XML (attributes escaped with
xml.sax.saxutils.quoteattr); the GET forms are not used.
"""

import bisect
import http.client
import ipaddress
import operator
import os
import socket
import threading
import time
import urllib.parse
import weakref
import xml.etree.ElementTree as ET
import zlib
from xml.sax.saxutils import quoteattr

__all__ = ["Client", "Decision", "Rule", "BatchResult", "Ring", "parse_shards", "route_of"]

POINTS_PER_WEIGHT = 160
MAX_WEIGHT = 1000
MAX_ANSWER_BYTES = 64 * 1024 * 1024  # the C++ client's body_limit: no answer of frsd's comes near it


# ---------------------------------------------------------------- answers


class _Record(object):
    """Named fields (the subclass's __slots__), set from its __init__'s
    arguments and listed by repr()."""

    __slots__ = ()

    def _set(self, args):
        """Each field from `args` (the __init__'s locals())."""
        for k in self.__slots__:
            setattr(self, k, args[k])

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, ", ".join("%s=%r" % (k, getattr(self, k)) for k in self.__slots__))


class _Verdict(object):
    """True when allowed: `if client.acquire(...)` reads as the answer."""

    __slots__ = ()

    def __bool__(self):
        return bool(self.allowed)

    __nonzero__ = __bool__


class Rule(_Record):
    """One <rule> of a decision, in map.xml order; `name` is the rule's
    (map.xml's name=, else BIZ_N): which rule denied, by name."""

    __slots__ = ("algo", "interval", "count", "limit", "remaining", "reset", "allowed", "debt", "name")

    def __init__(self, algo="", interval=0, count=0, limit=0, remaining=0, reset=0, allowed=False, debt=0, name=""):
        self._set(locals())


class Decision(_Verdict, _Record):
    """What frsd decided (or what the fail policy decided when it could not)."""

    __slots__ = (
        "allowed",
        "count",
        "limit",
        "remaining",
        "reset",
        "retry_after",
        "rules",
        "shadow",
        "would_deny",
        "found",
        "error",
        "status",
        "server",
        "lease",
        "lease_expires",
        "released",
        "reservation",
        "reservation_expires",
        "settled",
        "returned",
        "overrun",
        "reservations_full",
        "unanswered",
    )

    def __init__(
        self,
        allowed=False,
        count=0,
        limit=0,
        remaining=0,
        reset=0,
        retry_after=0,
        rules=None,
        shadow=False,
        would_deny=False,
        found=None,
        error=None,
        status=0,
        server=None,
        lease=None,
        lease_expires=0,
        released=False,
        reservation=None,
        reservation_expires=0,
        settled=False,
        returned=0,
        overrun=0,
        reservations_full=False,
        unanswered=False,
    ):
        rules = rules if rules is not None else []
        self._set(locals())


class BatchResult(_Verdict, list):
    """The Decisions of a batch, in order, plus the overall verdict."""

    def __init__(self, decisions=(), allowed=False, error=None):
        list.__init__(self, decisions)
        self.allowed = allowed
        self.error = error

    def __repr__(self):
        return "BatchResult(allowed=%r, error=%r, %s)" % (self.allowed, self.error, list.__repr__(self))


def _int(attrs, name, default=0):
    v = attrs.get(name)
    if v is None:
        return default
    try:
        return int(v)
    except ValueError:
        return default


class _Unusable(Exception):
    """An answer a decision cannot rest on: frsd, or whatever answered in its
    place, did not answer the request (the fail policy decides)."""


def _decision_from(elem, status, server, cmd):
    """The Decision of one <response code="0">; None for an FRS refusal (a
    non-zero code: the caller reports its msg). Raises _Unusable when the
    element is no FRS answer or lacks what the decision rests on: a missing
    `allowed` must not read as an allowance (nor as a denial: frsd did not
    say), so it is the fail policy's call."""
    if elem.tag != "response":
        raise _Unusable("a <%s> element where a <response> belongs" % elem.tag[:40])
    a = elem.attrib
    try:
        code = int(a["code"])
    except (KeyError, ValueError):
        raise _Unusable("a <response> without a numeric code")
    if code != 0:
        return None
    # delete answers found="0|1" only; every other command allowed="0|1".
    need = "found" if cmd == "delete" else "allowed"
    if a.get(need) not in ("0", "1"):
        raise _Unusable('a <response code="0"> without %s="0" or "1"' % need)
    rules = [
        Rule(
            algo=r.get("algo", ""),
            interval=_int(r.attrib, "interval"),
            count=_int(r.attrib, "count"),
            limit=_int(r.attrib, "limit"),
            remaining=_int(r.attrib, "remaining"),
            reset=_int(r.attrib, "reset"),
            allowed=r.get("allowed") == "1",
            debt=_int(r.attrib, "debt"),
            name=r.get("name", ""),
        )
        for r in elem.findall("rule")
    ]
    found = None
    if "found" in a:
        found = a["found"] == "1"
    return Decision(
        allowed=a.get("allowed", "1") == "1",
        count=_int(a, "count"),
        limit=_int(a, "limit"),
        remaining=_int(a, "remaining"),
        reset=_int(a, "reset"),
        retry_after=_int(a, "retry_after"),
        rules=rules,
        shadow=a.get("shadow") == "1",
        would_deny=a.get("would_deny") == "1",
        found=found,
        status=status,
        server=server,
        lease=a.get("lease"),
        lease_expires=_int(a, "expires") if a.get("lease") else 0,
        released=a.get("released") == "1",
        reservation=a.get("reservation"),
        reservation_expires=_int(a, "reservation_expires" if a.get("lease") else "expires")
        if a.get("reservation")
        else 0,
        settled=a.get("settled") == "1",
        returned=_int(a, "returned"),
        overrun=_int(a, "overrun"),
        reservations_full=a.get("reservations_full") == "1",
    )


# ------------------------------------------------------------------ ring


def _split_host_port(name):
    """nginx's split of a server string: at the last ':' when only digits follow."""
    if name[:5] in ("unix:", "UNIX:"):
        return name[5:], ""
    i = len(name) - 1
    while i >= 0 and name[i] in "0123456789":
        i -= 1
    if i >= 0 and name[i] == ":":
        return name[:i], name[i + 1 :]
    return name, ""


def check_address(name):
    """Why `name` is not "host:port" (as frsd's <shard> lines and the C++
    client judge it), or None. A port of 1..65535 in digits (socket would
    take "http" for 80), a DNS name or IPv4 address, or an IPv6 one in
    brackets: a shard that is none would fail every call it owns, which
    fail="open" would answer allowed without a word."""
    if name[:5] in ("unix:", "UNIX:"):
        return "a unix: socket, which this client (TCP only) cannot reach"
    host, colon, port = name.rpartition(":")
    if not colon or (name.startswith("[") and "]:" not in name):
        return "it has no :port"
    if not port or len(port) > 5 or not all("0" <= c <= "9" for c in port):
        return 'its port "%s" is not a number 1..65535' % port
    if not 1 <= int(port) <= 65535:
        return "its port %s is outside 1..65535" % port
    if not host:
        return "its host is empty"
    if host.startswith("["):
        try:
            ok = host.endswith("]") and len(host) > 2 and ipaddress.ip_address(host[1:-1]).version == 6
        except ValueError:
            ok = False
        return None if ok else 'its host "%s" is not an IPv6 address in brackets' % host
    if not all(c.isascii() and (c.isalnum() or c in ".-_") for c in host):
        return 'its host "%s" is not a DNS name or IP address (an IPv6 address goes in brackets: [::1]:8300)' % host
    if len(host) > 253:
        return "its host is longer than a DNS name can be (253 bytes)"
    return None


def parse_shards(servers):
    """[(name, weight), ...] from a Client's `servers` argument."""
    if isinstance(servers, (str, bytes)):
        if isinstance(servers, bytes):
            servers = servers.decode("utf-8")
        servers = [s for s in (p.strip() for p in servers.split(",")) if s]
    out = []
    for s in servers:
        weight = 1
        if isinstance(s, (tuple, list)):
            if len(s) != 2:
                raise ValueError('a shard is ("host:port", weight), not %r' % (s,))
            name, weight = s[0], s[1]
        else:
            parts = str(s).split()
            if not parts:
                raise ValueError("a shard's name is empty")
            name = parts[0]
            for extra in parts[1:]:
                if not extra.startswith("weight="):
                    raise ValueError("shard %r: only weight=N may follow the address" % (s,))
                try:
                    weight = int(extra[len("weight=") :])
                except ValueError:
                    raise ValueError("shard %r: weight must be a whole number" % (s,))
        name = str(name).strip()
        if not name:
            raise ValueError("a shard's name is empty")
        why = check_address(name)
        if why:
            raise ValueError('shard "%s" is not host:port: %s' % (name, why))
        if isinstance(weight, bool) or not isinstance(weight, int) or not 1 <= weight <= MAX_WEIGHT:
            raise ValueError("shard %s: weight %r is outside 1..%d" % (name, weight, MAX_WEIGHT))
        if any(name == n for n, _ in out):
            raise ValueError("shard %s is listed twice" % name)
        out.append((name, weight))
    if not out:
        raise ValueError("no servers given")
    return out


class Ring(object):
    """nginx's `hash ... consistent` ring over (name, weight) shards."""

    def __init__(self, shards):
        self.shards = list(shards)
        points = []
        for index, (name, weight) in enumerate(self.shards):
            host, port = _split_host_port(name)
            base = zlib.crc32(host.encode("utf-8") + b"\0" + port.encode("utf-8"))
            prev = 0
            for _ in range(weight * POINTS_PER_WEIGHT):
                prev = zlib.crc32(prev.to_bytes(4, "little"), base) & 0xFFFFFFFF
                points.append((prev, index))
        points.sort(key=lambda p: p[0])  # stable: the earlier shard first among equals
        self._hashes = []
        self._owners = []
        for h, index in points:
            if self._hashes and self._hashes[-1] == h:
                continue  # nginx keeps the first of equal hashes
            self._hashes.append(h)
            self._owners.append(index)

    @staticmethod
    def hash(route):
        if isinstance(route, str):
            route = route.encode("utf-8")
        return zlib.crc32(route) & 0xFFFFFFFF

    def owner_index(self, route):
        i = bisect.bisect_left(self._hashes, Ring.hash(route))
        if i == len(self._hashes):
            i = 0
        return self._owners[i]

    def owner(self, route):
        return self.shards[self.owner_index(route)][0]

    def successor_index(self, route):
        """The shard nginx falls over to when the owner of `route` fails (and,
        with <cluster replicas="1">, the one holding its copy): that of the
        next point on the continuum that belongs to another shard, as
        Ring::SuccessorOfHash; None when the ring has one shard."""
        i = bisect.bisect_left(self._hashes, Ring.hash(route))
        owner = self._owners[i % len(self._owners)]
        for k in range(1, len(self._owners)):
            other = self._owners[(i + k) % len(self._owners)]
            if other != owner:
                return other
        return None

    def __len__(self):
        return len(self._hashes)


def _key_route(key):
    """The route inside a key (bytes): its first {...} when non-empty, else the key."""
    open_ = key.find(b"{")
    if open_ >= 0:
        close = key.find(b"}", open_ + 1)
        if close > open_ + 1:
            return key[open_ + 1 : close]
    return key


def _encode_route(route):
    if isinstance(route, bytes):
        return urllib.parse.quote_from_bytes(route, safe="")
    return urllib.parse.quote(str(route), safe="")


def route_of(key, route=None):
    """The bytes a request for `key` (with an optional `route` argument) is routed by."""
    if route is not None and route != "" and route != b"":
        return _encode_route(route).encode("ascii")
    if isinstance(key, str):
        key = key.encode("utf-8", "surrogatepass")
    return _key_route(key)


# ---------------------------------------------------------------- client

_COUNTED = ("acquire", "query", "update")  # the commands that take n
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest)


class _AnswerTooBig(http.client.HTTPException):
    """An answer body over MAX_ANSWER_BYTES: not read (the exchange failed)."""


class _Socket(socket.socket):
    """A socket whose every connect, send and receive ends by .deadline (a
    time.monotonic() value): each waits only for what is left of it. A
    per-operation time-out alone lets a server that sends one byte now and
    then hold the caller for as long as it likes."""

    deadline = None

    def _arm(self):
        if self.deadline is not None:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise socket.timeout("timed out")
            self.settimeout(left)

    def connect(self, address):
        self._arm()
        return socket.socket.connect(self, address)

    def recv(self, *args):
        self._arm()
        return socket.socket.recv(self, *args)

    def recv_into(self, *args):  # what http.client's buffered reads call
        self._arm()
        return socket.socket.recv_into(self, *args)

    def send(self, *args):
        self._arm()
        return socket.socket.send(self, *args)

    def sendall(self, *args):  # its time-out bounds the whole send (Python >= 3.5)
        self._arm()
        return socket.socket.sendall(self, *args)


def _connect(host, port, deadline):
    """A connected _Socket bound to `deadline`, trying each address in turn."""
    err = None
    for family, type_, proto, _, sockaddr in socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM):
        sock = _Socket(family, type_, proto)
        sock.deadline = deadline
        try:
            sock.connect(sockaddr)
            return sock
        except OSError as e:
            sock.close()
            err = e
    raise err if err is not None else OSError("no address for %s" % host)


class _Connection(http.client.HTTPConnection):
    """http.client's connection over a _Socket: set .deadline before each
    exchange (the connection's socket, kept alive, takes it too)."""

    deadline = None

    def connect(self):
        self.sock = _connect(self.host, self.port, self.deadline)
        try:
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass


def _read_body(resp):
    """The whole body of `resp`, up to MAX_ANSWER_BYTES; raises _AnswerTooBig
    beyond it without reading further (a body is read in pieces, so memory
    grows with what came, never with what is announced)."""
    if resp.length is not None and resp.length > MAX_ANSWER_BYTES:
        raise _AnswerTooBig(
            "its answer announces %d bytes (Content-Length), over the 64 MiB cap (%d bytes); "
            "not read" % (resp.length, MAX_ANSWER_BYTES)
        )
    parts = []
    size = 0
    while True:
        part = resp.read(65536)
        if not part:
            break
        size += len(part)
        if size > MAX_ANSWER_BYTES:
            raise _AnswerTooBig(
                "its answer grew past the 64 MiB cap (%d bytes); the rest was not read" % MAX_ANSWER_BYTES
            )
        parts.append(part)
    data = b"".join(parts)
    if resp.length:  # read(amt) returns b"" at an early EOF instead of raising
        raise http.client.IncompleteRead(data, resp.length)
    return data


class _Server(object):
    def __init__(self, name):
        self.name = name
        self.conn = None
        self.used = False  # the connection has answered a request

    def close(self):
        if self.conn is not None:
            try:
                self.conn.close()
            except Exception:
                pass
        self.conn = None
        self.used = False

    def _drop(self, conn):
        """Closes `conn`, and forgets it if it is still this server's."""
        try:
            conn.close()
        except Exception:
            pass
        if self.conn is conn:
            self.conn = None
            self.used = False

    def post(self, path, body, deadline):
        """(status, body bytes), done by `deadline` (time.monotonic()); raises
        OSError (socket.timeout past the deadline) / HTTPException on failures."""
        for attempt in (0, 1):
            # A local reference: Client.close() in another thread may drop
            # self.conn meanwhile; this call then fails on a closed socket
            # (the fail policy), never on a missing object.
            conn = self.conn
            if conn is None:
                conn = self.conn = _Connection(self.name)
                self.used = False
            # The resend below shares the deadline: one per exchange.
            conn.deadline = deadline
            if conn.sock is not None:
                conn.sock.deadline = deadline
            reused = self.used
            try:
                conn.request("POST", path, body=body, headers={"Content-Type": "application/xml"})
                resp = conn.getresponse()
                data = _read_body(resp)
            except _STALE:
                # frsd closes idle keep-alive connections: such a request was
                # never read, so it is sent again on a new connection, once.
                self._drop(conn)
                if reused and attempt == 0:
                    continue
                raise
            except BaseException:
                self._drop(conn)
                raise
            self.used = True
            if resp.will_close:
                self._drop(conn)
            return resp.status, data
        raise http.client.HTTPException("unreachable")


class _ServerMap(object):
    """One thread's connections, by server name (an object, not a dict, so
    that a WeakSet holds it and drops it with its thread)."""

    __slots__ = ("by_name", "__weakref__")

    def __init__(self):
        self.by_name = {}


class Client(object):
    """A client of one frsd, or of a cluster of frsd shards (see the module doc)."""

    def __init__(self, servers="127.0.0.1:8300", timeout=0.5, fail="open", token=None, failover=True, skip_failed=10.0):
        if fail not in ("open", "closed"):
            raise ValueError('fail must be "open" or "closed", not %r' % (fail,))
        if isinstance(skip_failed, bool) or not isinstance(skip_failed, (int, float)) or not 0 <= skip_failed < 1e9:
            raise ValueError("skip_failed must be a number of seconds, 0 or more, not %r" % (skip_failed,))
        # 0 or less would fail every call before it is sent (and, fail open,
        # count nothing ever); None means no deadline at all.
        if timeout is not None and (
            isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < float("inf")
        ):
            raise ValueError("timeout must be a number of seconds above 0, or None (no deadline), not %r" % (timeout,))
        self.shards = parse_shards(servers)
        self.ring = Ring(self.shards)
        self._names = frozenset(name for name, _ in self.shards)  # where a 421 may send a request
        self.timeout = timeout
        self.fail = fail
        self.token = token
        self._pid = os.getpid()
        self._local = threading.local()
        self._maps = weakref.WeakSet()  # every thread's connections, for close()
        self._maps_lock = threading.Lock()
        self.redirects = 0  # 421 answers followed
        self.failover = bool(failover)
        self.skip_failed = skip_failed
        self.failovers = 0  # calls (and batch parts) answered by a route's other holder
        # The two counters are bumped by every thread sharing the client: a
        # lock, so that none is lost (taken only when one changes).
        self._counts_lock = threading.Lock()
        # name -> time.monotonic() until which that shard, which could not
        # answer, is asked second (a plain dict: one assignment is atomic).
        self._skip_until = {}

    # -- plumbing

    def _connections(self):
        """This thread's connections (name -> _Server): each thread has its
        own, and a forked child none of its parent's, so that two callers
        never read each other's answers off one socket."""
        if os.getpid() != self._pid:
            # The parent's sockets stay the parent's: forgotten here, not
            # closed (the child's copy is closed when collected, which ends
            # nothing for the parent). A lock another thread held at the
            # fork would stay held: the child makes its own.
            self._pid = os.getpid()
            self._local = threading.local()
            self._maps = weakref.WeakSet()
            self._maps_lock = threading.Lock()
            self._counts_lock = threading.Lock()
        m = getattr(self._local, "servers", None)
        if m is None:
            m = self._local.servers = _ServerMap()
            with self._maps_lock:
                self._maps.add(m)  # dropped with its thread
        return m

    def close(self):
        """Closes every thread's connections. A call under way in another
        thread may then fail, by the fail policy (it never raises); the
        next call opens a new connection."""
        if os.getpid() != self._pid:
            self._connections()  # a child closes none of its parent's
            return
        with self._maps_lock:
            maps = list(self._maps)
        for m in maps:
            for s in list(m.by_name.values()):
                s.close()
            m.by_name.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _server(self, name):
        m = self._connections().by_name
        s = m.get(name)
        if s is None:
            s = m[name] = _Server(name)
        return s

    def owner(self, route):
        """The shard (its "host:port" string) that owns `route` (str as UTF-8, or bytes)."""
        return self.ring.owner(route)

    def route_of(self, key, route=None):
        return route_of(key, route)

    def _target(self, key, route):
        if len(self.shards) == 1:
            return self.shards[0][0]
        return self.ring.owner(route_of(key, route))

    def _failed(self, why, server, cmd=None):
        # The policy decides whether traffic goes on; release, renew and
        # settle let nothing go, and failed they were not done.
        admits = cmd not in ("release", "renew", "settle")
        return Decision(allowed=self.fail == "open" and admits, error=why, status=0, server=server, unanswered=True)

    @staticmethod
    def _by_policy(status):
        """Whether an exchange that ended in an error with this status is
        "frsd could not answer" (the fail policy decides) rather than a
        refusal of the request (denied): no answer, a 5xx, a 421 not
        followed, or a 200 that is no usable FRS answer (a real 200 from
        frsd always is one)."""
        return status == 0 or status == 200 or status == 421 or status >= 500

    def _ask(self, server, route, path, body, deadline=None):
        """_exchange with the holders of `route` (the bytes it is routed by;
        `server` its owner): the owner, and when it could not answer (no
        answer, frsd's 5xx), its successor with the time left (`failover`).
        A shard that could not answer is asked second for `skip_failed`
        seconds; the first asked gets half the time, so that a hung shard
        leaves the other the rest."""
        other = self.ring.successor_index(route) if self.failover and len(self.shards) > 1 else None
        if other is None:
            return self._exchange(server, path, body, deadline)
        other = self.shards[other][0]
        now = time.monotonic()
        if deadline is None and self.timeout is not None:
            deadline = now + self.timeout
        if deadline is not None and now >= deadline:
            return self._exchange(server, path, body, deadline)  # not asked: nothing said of either
        skip = self._skip_until
        first, second = server, other
        if skip.get(server, 0) > now and skip.get(other, 0) <= now:
            first, second = other, server
        share = None if deadline is None else now + max(deadline - now, 0) / 2
        # A 421 is followed from the owner only: the successor's names the owner.
        res = self._exchange(first, path, body, share, follow=first == server)
        miss = self._miss(res, first)
        if miss == "unanswered":
            skip[first] = time.monotonic() + self.skip_failed
        elif res[3] is None:
            skip.pop(first, None)
            if first != server:
                self._count("failovers")
        # The successor's 421 when it was asked first: no copy there (no
        # replicas), so the owner is asked after all.
        if miss != "unanswered" and not (miss == "misrouted" and first != server):
            return res
        if deadline is not None and time.monotonic() >= deadline:
            return res
        res2 = self._exchange(second, path, body, deadline, follow=second == server)
        miss2 = self._miss(res2, second)
        if miss2 == "unanswered":
            skip[second] = time.monotonic() + self.skip_failed
        if miss2 is not None:
            status, root, name, err = res2
            return status, root, name, "%s; the route's other holder: %s" % (self._why(res), self._why(res2))
        if res2[3] is None:
            skip.pop(second, None)
            if second != server:
                self._count("failovers")
        return res2

    def _count(self, name):
        with self._counts_lock:
            setattr(self, name, getattr(self, name) + 1)

    @staticmethod
    def _why(res):
        """An _exchange result's failure as a sentence naming its shard."""
        status, root, name, err = res
        if err is not None:
            return err
        msg = root.get("msg", "") if root is not None else ""
        return "HTTP %d from %s%s" % (status, name, ": " + msg[:200] if msg else "")

    @staticmethod
    def _miss(res, asked):
        """Why an _exchange's result (of shard `asked`) is no answer another
        holder could give instead: "unanswered" (no answer, a time-out, a
        5xx), "misrouted" (a 421 not followed), or None. After a followed 421
        the failure is another shard's: None."""
        status, root, name, err = res
        if name != asked:
            return None
        if status == 0 and err is not None:
            return "unanswered"
        if status >= 500 and (root is None or root.tag == "response"):
            return "unanswered"
        if status == 421 and err is not None:
            return "misrouted"
        return None

    def _exchange(self, server, path, body, deadline=None, follow=True):
        """POST once, following one 421 (when `follow`), all by one deadline
        (`deadline`, a time.monotonic() instant, when the caller shares one
        across exchanges; else the client's timeout from now). Returns
        (status, root element, server name, error)."""
        # timeout=None keeps http.client's old meaning: no deadline, blocking.
        if deadline is None and self.timeout is not None:
            deadline = time.monotonic() + self.timeout
        begun = time.monotonic()
        if deadline is not None and begun >= deadline:
            return (
                0,
                None,
                server,
                "frsd %s timed out: not asked, the %ss time-out was spent" % (server, self.timeout),
            )
        for hop in (0, 1):
            try:
                status, data = self._server(server).post(path, body, deadline)
            except socket.timeout:
                return (
                    0,
                    None,
                    server,
                    "frsd %s timed out: no whole answer within %.3gs (of the %ss time-out)"
                    % (server, deadline - begun, self.timeout),
                )
            except _AnswerTooBig as e:
                return 0, None, server, "frsd %s: %s" % (server, e)
            except (OSError, http.client.HTTPException) as e:
                return 0, None, server, "frsd %s: %s" % (server, e.__class__.__name__ + (": %s" % e if str(e) else ""))
            except Exception as e:
                # No call raises: whatever else http.client met (a connection
                # closed under it by close() in another thread) is frsd not
                # answering, for the fail policy.
                return 0, None, server, "frsd %s: %s" % (server, e.__class__.__name__ + (": %s" % e if str(e) else ""))
            try:
                root = ET.fromstring(data)
            except ET.ParseError as e:
                return status, None, server, "frsd %s answered HTTP %d that is not FRS XML (%s)" % (server, status, e)
            if status == 421 and not follow:
                return status, None, server, "HTTP 421 from %s: %s" % (server, root.get("msg", "misdirected"))
            if status == 421:
                owner = root.get("owner")
                if hop == 0 and owner and owner != server and owner in self._names:
                    self._count("redirects")
                    server = owner
                    continue
                if hop == 0 and owner and owner not in self._names:
                    # Only the client's own shards get its requests (and token).
                    return (
                        status,
                        None,
                        server,
                        (
                            "HTTP 421 from %s: misrouted, and the owner it names (%r) is not "
                            "in this client's shard list" % (server, owner[:100])
                        ),
                    )
                return status, None, server, "HTTP 421 from %s: %s" % (server, root.get("msg", "misdirected"))
            return status, root, server, None
        return 0, None, server, "unreachable"

    def _request(self, cmd, biz, key, route=None, **attrs):
        try:
            body = _request_xml(cmd, biz, key, attrs).encode("utf-8")
        except (UnicodeError, ValueError) as e:
            return Decision(allowed=False, error="bad request: %s" % e, server=None)
        server = self._target(key, route)
        path = "/frs"
        if route is not None and route != "":
            path += "?route=" + _encode_route(route)
        try:
            routed = route_of(key, route)
        except (UnicodeError, AttributeError):
            routed = None
        if routed is None or len(self.shards) == 1:
            status, root, server, err = self._exchange(server, path, body)
        else:
            status, root, server, err = self._ask(server, routed, path, body)
        if err is not None:
            # Every error _exchange returns is frsd not answering: no answer,
            # a 421 not followed, or a body that is no FRS XML (a proxy's own
            # 404 or 429 page): the policy decides.
            if self._by_policy(status) or root is None:
                d = self._failed(err, server, cmd)
                d.status = status
                return d
            return Decision(allowed=False, error=err, status=status, server=server)
        return self._answer(cmd, status, root, server)

    def _answer(self, cmd, status, root, server):
        if status == 200:
            try:
                d = _decision_from(root, status, server, cmd)
            except _Unusable as e:
                # A real 200 from frsd always carries a decision: this is not frsd answering.
                what = "an FRS answer a decision can rest on" if root.tag == "response" else "FRS XML"
                d = self._failed("frsd %s answered HTTP 200 that is not %s (%s)" % (server, what, e), server, cmd)
                d.status = status
                return d
            if d is not None:
                return d
            # A refusal (a non-zero code) frsd sends with its own HTTP status,
            # never with 200: whatever sent this is not frsd answering.
            d = self._failed(
                "%s answered HTTP 200 with a refusal (code %s: %s), which frsd never sends with 200"
                % (server, root.get("code", "?")[:10], root.get("msg", "")[:200]),
                server,
                cmd,
            )
            d.status = status
            return d
        if root.tag == "response":
            msg = root.get("msg", "error")
        else:
            msg = "unexpected <%s> answer" % root.tag
        err = "HTTP %d from %s: %s" % (status, server, msg)
        # frsd refuses with a <response>: another root is something else
        # answering (an HTML error page that parses as XML).
        if status >= 500 or root.tag != "response":
            d = self._failed(err, server, cmd)
            d.status = status
            return d
        return Decision(allowed=False, error=err, status=status, server=server)

    # -- commands

    def acquire(self, biz, key, n=1, route=None, reserve=None):
        return self._request("acquire", biz, key, route, n=n, reserve=reserve)

    def query(self, biz, key, n=1, route=None):
        return self._request("query", biz, key, route, n=n)

    def update(self, biz, key, n=1, route=None):
        return self._request("update", biz, key, route, n=n)

    def get(self, biz, key, route=None):
        return self._request("get", biz, key, route)

    def set(self, biz, key, count, route=None):
        return self._request("set", biz, key, route, count=count, token=self.token or "")

    def delete(self, biz, key, route=None):
        return self._request("delete", biz, key, route, token=self.token or "")

    def release(self, biz, key, lease, route=None):
        return self._request("release", biz, key, route, lease=lease)

    def renew(self, biz, key, lease, route=None):
        return self._request("renew", biz, key, route, lease=lease)

    def settle(self, biz, key, reservation, n, route=None):
        return self._request("settle", biz, key, route, reservation=reservation, n=n)

    def batch(self, items, route=None):
        # A string or a lone member is iterable too: its characters (or
        # fields) would read as members, with a message about one of them.
        if isinstance(items, (str, bytes, dict)) or (isinstance(items, tuple) and items and isinstance(items[0], str)):
            raise ValueError(
                "batch takes a list of members, each a tuple (cmd, biz, key, ...) or a dict, not %r" % (items,)
            )
        members = [_batch_member(it) for it in items]
        # set and delete are admin commands: each member carries the token, as
        # the methods send it (without, frsd answered them 403).
        for m in members:
            if m[0] in _ADMIN and self.token:
                m[3]["token"] = self.token
        if not members:
            return BatchResult([], False, "the batch is empty")
        # Groups of member indexes, each sent as one batch to one server.
        if len(self.shards) == 1 or (route is not None and route != ""):
            groups = [(self._target(members[0][2], route), list(range(len(members))))]
            routes = [None if len(self.shards) == 1 else route_of(members[0][2], route)]
        else:
            by_route = {}
            order = []
            for i, m in enumerate(members):
                try:
                    r = route_of(m[2])
                except (UnicodeError, AttributeError):
                    r = b""
                if r not in by_route:
                    by_route[r] = []
                    order.append(r)
                by_route[r].append(i)
            groups = [(self.ring.owner(r), by_route[r]) for r in order]
            routes = order
        path = "/frs"
        if route is not None and route != "":
            path += "?route=" + _encode_route(route)

        out = [None] * len(members)
        overall = True
        first_error = None
        stopped = None
        # One deadline per shard, shared by every part sent to it: a shard
        # that does not answer costs one time-out, not one per part.
        deadlines = {}
        for (server, idx), routed in zip(groups, routes):
            if stopped is not None:
                for i in idx:
                    out[i] = Decision(allowed=False, error=stopped, server=server)
                continue
            if self.timeout is not None and server not in deadlines:
                deadlines[server] = time.monotonic() + self.timeout
            decisions, allowed = self._batch_group(
                server, path, [members[i] for i in idx], deadlines.get(server), routed
            )
            for i, d in zip(idx, decisions):
                out[i] = d
                if d.error and first_error is None:
                    first_error = d.error
            if not allowed:
                overall = False
                if any(members[i][0] == "acquire" for i in idx):
                    unanswered = any(d.unanswered for d in decisions)
                    stopped = "not sent: an earlier part of the batch (for shard %s) was %s" % (
                        decisions[0].server if decisions else server,
                        "not answered (failed closed)" if unanswered else "denied",
                    )
        return BatchResult(out, overall and all(d.allowed for d in out), first_error)

    def _batch_group(self, server, path, members, deadline=None, routed=None):
        try:
            body = (
                "<batch>" + "".join(_request_xml(c, b, k, attrs) for c, b, k, attrs in members) + "</batch>"
            ).encode("utf-8")
        except (UnicodeError, ValueError) as e:
            err = "bad request: %s" % e
            return [Decision(allowed=False, error=err, server=server) for _ in members], False
        return self._send_batch(server, path, body, members, deadline, routed)

    def _send_batch(self, server, path, body, members, deadline=None, routed=None):
        if routed is None:
            status, root, server, err = self._exchange(server, path, body, deadline)
        else:
            status, root, server, err = self._ask(server, routed, path, body, deadline)
        # Not frsd answering (no FRS XML, or a 4xx that is no <response>):
        # the policy decides, as for a single request.
        not_frs = root is None or (status != 200 and root.tag != "response")
        if err is None and status == 200 and root.tag != "batch":
            err = "frsd %s answered HTTP 200 that is not FRS XML (a <%s> answer to a batch)" % (server, root.tag[:40])
        elif err is None and status != 200:
            err = "HTTP %d from %s: %s" % (status, server, root.get("msg", "unexpected <%s> answer" % root.tag))
        ds = []
        if err is None:
            # Every member's decision, or none: a <batch> missing its verdict or
            # a member's is no answer to this batch.
            responses = root.findall("response")
            try:
                if root.get("allowed") not in ("0", "1"):
                    raise _Unusable('a <batch> without allowed="0" or "1"')
                if len(responses) < len(members):
                    raise _Unusable("%d members answered of %d" % (len(responses), len(members)))
                for m, r in zip(members, responses):
                    d = _decision_from(r, status, server, m[0])
                    if d is None:
                        # A member's own failure (a settle's 410, a release's
                        # 409) is in its code, the batch's HTTP status is 200.
                        code = r.get("code", "")
                        st = int(code) if code.isdigit() and 100 <= int(code) <= 599 else status
                        d = Decision(
                            allowed=False,
                            status=st,
                            server=server,
                            error="HTTP %d from %s: %s" % (st, server, r.get("msg", "error")),
                        )
                    ds.append(d)
            except _Unusable as e:
                err = "frsd %s answered HTTP 200 that is not an FRS answer a decision can rest on (%s)" % (server, e)
        if err is not None:
            if self._by_policy(status) or not_frs:
                ds = [self._failed(err, server, m[0]) for m in members]
                for d in ds:
                    d.status = status
                return ds, all(d.allowed for d in ds)
            return [Decision(allowed=False, error=err, status=status, server=server) for _ in members], False
        return ds, root.get("allowed") == "1"


# What a batch member's tuple holds after (cmd, biz, key), as the method of
# the same command takes it: acquire(biz, key, n, reserve), release(biz, key,
# lease), settle(biz, key, reservation, n), ...
_MEMBER_ARGS = {
    "acquire": ("n", "reserve"),
    "query": ("n",),
    "update": ("n",),
    "get": (),
    "release": ("lease",),
    "renew": ("lease",),
    "settle": ("reservation", "n"),
    "set": ("count",),
    "delete": (),
}
# The admin commands: their members carry the client's token.
_ADMIN = ("set", "delete")


def _batch_member(it):
    """(cmd, biz, key, attrs) of a batch member given as a tuple, (cmd, biz,
    key, then the command's method's arguments in their order), or as a dict
    {"cmd", "biz", "key", and any of "n", "reserve", "lease", "reservation",
    "count"}."""
    if isinstance(it, dict):
        unknown = set(it) - {"cmd", "biz", "key", "n", "reserve", "lease", "reservation", "count"}
        if unknown or not {"cmd", "biz", "key"} <= set(it):
            raise ValueError(
                "a batch member dict has cmd, biz, key and n, reserve, lease, reservation, count, not %r" % (it,)
            )
        attrs = {k: v for k, v in it.items() if k not in ("cmd", "biz", "key")}
        return (it["cmd"], it["biz"], it["key"], attrs)
    # A string is a sequence too: "acquire" would read as cmd "a", biz "c", ...
    if isinstance(it, (str, bytes)) or not isinstance(it, (tuple, list)) or len(it) < 3:
        raise ValueError("a batch member is a tuple (cmd, biz, key, ...) or a dict, not %r" % (it,))
    cmd, biz, key, rest = it[0], it[1], it[2], tuple(it[3:])
    names = _MEMBER_ARGS.get(cmd, ("n",))
    if len(rest) > len(names):
        raise ValueError(
            "a batch member %s takes (cmd, biz, key%s), not %r" % (cmd, "".join(", " + n for n in names), it)
        )
    attrs = dict(zip(names, rest))
    if cmd not in _MEMBER_ARGS:
        attrs = {}  # a command that takes no n: a 4th element was always left out
    elif cmd in _COUNTED and attrs.get("n") is None:
        attrs["n"] = 1
    return (cmd, biz, key, attrs)


def _request_xml(cmd, biz, key, attrs):
    """One <request .../> element as text."""
    # str(None) would send the key "None", one key for every caller whose id
    # is missing (and a second shard in the list made it an AttributeError).
    if not isinstance(key, (str, bytes)):
        raise ValueError("the key must be str or bytes, not %s" % type(key).__name__)
    if biz is None:
        raise ValueError("the biz is None")
    # An acquire frsd did not answer (fail="open" let it through) or one that
    # took no lease or reservation has no id: said here, nothing is sent.
    for name, cmds in (("lease", ("release", "renew")), ("reservation", ("settle",))):
        if cmd in cmds and attrs.get(name) is None:
            raise ValueError(
                "%s needs the %s id an acquire answered, not None (an acquire frsd did not answer, "
                "or one that took no %s, has none: nothing to %s)" % (cmd, name, name, cmd)
            )
    for name in ("n", "count", "reserve"):
        v = attrs.get(name)
        if v is None:
            continue
        # True went as n="True" (frsd's 400), "12" as 12: an integer (numpy's
        # too, by __index__), or nothing.
        try:
            if isinstance(v, bool):
                raise TypeError
            attrs[name] = operator.index(v)
        except TypeError:
            raise ValueError("%s must be an int, not %s" % (name, type(v).__name__)) from None
    try:
        if isinstance(key, bytes):
            key = key.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError("the key is bytes that are not UTF-8 (%s): frsd's keys are UTF-8 text" % e.reason)
    if isinstance(biz, bytes):
        biz = biz.decode("utf-8")
    parts = ["<request cmd=", quoteattr(str(cmd)), " biz=", quoteattr(str(biz)), " key=", quoteattr(str(key))]
    for name in ("n", "count", "lease", "reserve", "reservation", "token"):
        v = attrs.get(name)
        if v is None:
            continue
        if name == "token" and v == "":
            continue
        parts += [" ", name, "=", quoteattr(str(v))]
    parts.append("/>")
    text = "".join(parts)
    text.encode("utf-8")  # raises on lone surrogates before anything is sent
    return text
