#!/usr/bin/env python3
"""cg_groups.py - where a frsd worker's instructions go, from a callgrind dump (issue 14).

  cg_groups.py CALLGRIND_OUT [--members N] [--top 15] [--label NAME]

Reads one callgrind output file of a worker (e.g. from `callgrind_control -z PID` ... load ...
`callgrind_control -d NAME PID`, see docs/performance.md "The floor of HTTP") with callgrind_annotate and
prints, as markdown:
  * requests in the dump (calls of Handler::Handle, counted from the file) and instructions (Ir) per request
    and per decision (N = --members per request);
  * self cost grouped (the self cost of memcpy, memchr, strlen, std::to_chars, std::string's append and
    std::hash goes to the group of their callers, in proportion): syscall wrappers (user side only: the
    kernel is not seen by callgrind), event loop
    and connection, HTTP parsing (Beast), request decode (XML: pugixml and its checks; GET: the query
    string), routing (the ring hash), engine and store, response writing, allocation, libc memory/string
    primitives (memcpy, memchr, ...: their callers are listed), other;
  * the request path's phases by inclusive cost (Feed, Decode/DecodeQuery, RouteRequests, Execute*,
    Append*, Respond, ...);
  * the top functions by self and by inclusive cost.
Frames that were active when the counters were zeroed (main ... Worker::Run) are reported by callgrind
with their whole inclusive cost as "self"; they are left out here.
Stdlib only; needs callgrind_annotate (valgrind) on PATH.
"""
import argparse
import re
import subprocess
import sys
from collections import defaultdict

LINE = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*?):(.*?)(?: \[(.*)\])?$")
ABOVE = re.compile(
    r"__libc_start|\(below main\)|^main$|Master::Spawn|RunMaster|RunWorker|Worker::Run\(|0x000000000001ab70"
)


def annotate(path, inclusive):
    args = ["callgrind_annotate", "--threshold=100", "--inclusive=" + ("yes" if inclusive else "no"), path]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    rows, started = [], False
    for line in out.splitlines():
        if "file:function" in line:
            started = True
            continue
        if not started:
            continue
        if line.startswith("----") and rows:
            break
        m = LINE.match(line)
        if m:
            ir = int(m.group(1).replace(",", ""))
            rows.append((ir, m.group(2), m.group(3), m.group(4) or ""))
    return rows


CALLER = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+<\s+(.*?):(.*) \(([\d,]+)x\)(?: \[(.*)\])?$")
STAR = re.compile(r"^\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+\*\s+(.*?):(.*?)(?: \[(.*)\])?$")


def callers_of(path):
    """{(file, function): [(inclusive cost from that caller, file, function, object), ...]} from --tree=caller"""
    args = ["callgrind_annotate", "--threshold=100", "--inclusive=no", "--tree=caller", path]
    out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
    res, pending = {}, []
    for line in out.splitlines():
        m = CALLER.match(line)
        if m:
            pending.append((int(m.group(1).replace(",", "")), m.group(2), m.group(3), m.group(5) or ""))
            continue
        m = STAR.match(line)
        if m:
            res[(m.group(2), m.group(3))] = pending
        pending = []
    return res


# Functions whose self cost is handed to their callers' groups (in proportion to what each caller spent in
# them): memcpy, memchr, strlen, ... , std::to_chars, std::string's append/replace, std::hash.
SHARED = re.compile(
    r"^__(mem|str)\w*|^(mem|str)\w*$|__to_chars_10_impl|_M_replace$|_M_append$|_M_mutate$|"
    r"_M_create$|_Hash_bytes$|reflected_byte_table_driven_crcs|^tolower$|pthread_mutex|"
    r"_Sp_counted_base|boost::container::vector"
)


def count_calls(path, pattern):
    names, cur, total = {}, None, 0
    rx = re.compile(pattern)
    with open(path, errors="replace") as f:
        for line in f:
            if line.startswith(("fn=", "cfn=", "cfi=", "cfl=")):
                m = re.match(r"(c?fn)=\((\d+)\)(?: (.*))?", line.rstrip("\n"))
                if m:
                    if m.group(3):
                        names[m.group(2)] = m.group(3)
                    if m.group(1) == "cfn":
                        cur = names.get(m.group(2), "")
            elif line.startswith("calls=") and cur is not None:
                if rx.search(cur):
                    total += int(line.split("=")[1].split()[0])
                cur = None
    return total


def fname(fn):
    """the function's name without its argument list (callgrind gives whole signatures)"""
    fn = fn.replace("(anonymous namespace)", "{anon}")
    depth = 0
    for i, ch in enumerate(fn):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth <= 0:
            return fn[:i]
    return fn


GROUPS = [  # (group, test on (file, function name, object)); first match wins
    (
        "syscall wrappers (user side)",
        lambda f, fn, ob: "libc.so" in ob
        and re.search(
            r"^(__libc_)?(recv|send|sendmsg|recvmsg|read|write|writev|epoll_wait|epoll_pwait2?|epoll_ctl|accept4?|"
            r"close|syscall|clock_gettime|__clock_gettime|time|setsockopt|shutdown|__GI_.*)(@.*)?$",
            fn,
        ),
    ),
    (
        "allocation (malloc/free/new/delete)",
        lambda f, fn, ob: re.search(
            r"^(malloc|free|cfree|_int_malloc|_int_free|realloc|_int_realloc|malloc_consolidate|tcache_\w+|"
            r"operator new|operator delete|__libc_malloc|__libc_free|calloc|__libc_calloc|unlink_chunk)",
            fn,
        ),
    ),
    (
        "libc memory/string primitives (callers unknown)",
        lambda f, fn, ob: ("libc.so" in ob and re.search(r"^__(mem|str|wmem)\w*|^(mem|str)\w*$", fn))
        or "multiarch" in f,
    ),
    ("HTTP parsing (Beast)", lambda f, fn, ob: "beast" in fn or "HttpRequestParser" in fn or "http_parser.cc" in f),
    (
        "request decode: XML (pugixml + per-member checks)",
        lambda f, fn, ob: "pugixml" in ob
        or "pugi::" in fn
        or re.search(
            r"XmlRequestDecoder|DecodeOne|CheckRawBody|HasStrayContent|HasControl|ParseCount|"
            r"WireRequest::ToEngine|ScanSimpleBody|Scanner::|RequestAttrs::",
            fn,
        ),
    ),
    ("request decode: key checks", lambda f, fn, ob: re.search(r"CheckKey|ValidateKeyBytes", fn)),
    (
        "request decode: query string (GET)",
        lambda f, fn, ob: re.search(r"DecodeQuery|PercentDecode|NextParam|" r"DecodePostQuery|OriginForm", fn),
    ),
    ("routing (ring hash)", lambda f, fn, ob: re.search(r"Ring::|RouteRequests", fn)),
    (
        "response writing",
        lambda f, fn, ob: re.search(
            r"Append(Decision|Batch|BatchCompact|Error|Stats|XmlEscaped|Num)$|"
            r"Handler::Respond$|WriteRateLimitFields|DateHeader|ServerAndDate|StatusLine|WriteDecision|BufWriter|"
            r"DigitsMemo|strftime|gmtime|__tz|__offtime",
            fn,
        ),
    ),
    (
        "engine and store",
        lambda f, fn, ob: re.search(r"frs::(limit|store|os)::|Fingerprint|XXH|xxh|frs::Key", fn)
        or re.search(r"/src/(limit|store|base|os)/", f)
        or "libxxhash" in ob,
    ),
    (
        "event loop, connection, handler glue, metrics",
        lambda f, fn, ob: re.search(
            r"Worker::|Connection::|EventLoop|"
            r"Deadline|Handler::|CountRequest|CountDecision|Counter|MonoNs|RunWorker",
            fn,
        )
        or "/src/server/" in f,
    ),
    ("std::string append/replace (callers unknown)", lambda f, fn, ob: re.search(r"basic_string", fn)),
]


def classify(f, fn, ob):
    name = fname(fn)
    for group, test in GROUPS:
        if test(f, name, ob):
            return group
    return "other"


def short(fn, n=110):
    fn = re.sub(r"std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >", "std::string", fn)
    fn = re.sub(r"std::basic_string_view<char, std::char_traits<char> >", "std::string_view", fn)
    if len(fn) > n:
        name = fname(fn).replace("{anon}", "(anonymous namespace)")
        fn = name + "(...)" + (" const" if fn.endswith(" const") else "")
    return fn if len(fn) <= n else fn[: n - 3] + "..."


def table_head(title, columns, numeric):
    """A Markdown table's title and head; its first `numeric` columns right-aligned."""
    print()
    print(title)
    print()
    print("| %s |" % " | ".join(columns))
    print("|%s|" % "|".join("---:" if i < numeric else "---" for i in range(len(columns))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--members", type=int, default=1)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--label", default="")
    a = ap.parse_args()
    self_rows = [r for r in annotate(a.file, False) if not ABOVE.search(r[2])]
    incl_rows = [r for r in annotate(a.file, True) if not ABOVE.search(r[2])]
    reqs = count_calls(a.file, r"Handler::Handle\(")
    total = sum(r[0] for r in self_rows)

    def per(ir):
        return ir / reqs if reqs else 0

    print("### %s: %s" % (a.label or a.file, a.file))
    print()
    print(
        "Requests in the dump: %d (calls of Handler::Handle); instructions in the worker: %s; per request %s; "
        "per decision (%d a request) %s."
        % (
            reqs,
            "{:,}".format(total),
            "{:,.0f}".format(per(total)),
            a.members,
            "{:,.0f}".format(per(total) / a.members),
        )
    )
    print()
    groups = defaultdict(int)
    callers = callers_of(a.file)

    def spread(f, fn, ob, ir, depth=0):
        """adds ir to the group of (f, fn), or, for a SHARED function, to its callers' groups"""
        if depth < 5 and SHARED.search(fname(fn)) and not ABOVE.search(fn):
            cs = [c for c in callers.get((f, fn), []) if c[0] > 0]
            tot = sum(c[0] for c in cs)
            if tot:
                for cost, cf, cfn, cob in cs:
                    spread(cf, cfn, cob, ir * cost / tot, depth + 1)
                return
        groups[classify(f, fn, ob)] += ir

    for ir, f, fn, ob in self_rows:
        spread(f, fn, ob, ir)
    print("| group (self cost) | Ir | % | Ir / request | Ir / decision |")
    print("|---|---:|---:|---:|---:|")
    for g, ir in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(
            "| %s | %s | %.1f | %s | %s |"
            % (
                g,
                "{:,.0f}".format(ir),
                100 * ir / total,
                "{:,.0f}".format(per(ir)),
                "{:,.0f}".format(per(ir) / a.members),
            )
        )
    print()
    phases = [
        ("HttpRequestParser::Feed (Beast)", r"HttpRequestParser::Feed\("),
        ("HttpRequestParser::Reset", r"HttpRequestParser::Reset\("),
        ("Handler::Handle (everything after HTTP framing)", r"Handler::Handle\("),
        ("  DecodeQuery (GET query string)", r"^frs::server::DecodeQuery\("),
        ("  XmlRequestDecoder::Decode (POST body)", r"XmlRequestDecoder::Decode\("),
        ("    pugi::xml_document::load_buffer_inplace", r"load_buffer_inplace"),
        ("    DecodeOne (per member: attributes, checks)", r"DecodeOne\("),
        ("    ScanSimpleBody (the fast scanner)", r"ScanSimpleBody\("),
        ("    CheckRawBody", r"CheckRawBody"),
        ("  EngineImpl::ResolveBiz (batch members)", r"EngineImpl::ResolveBiz\("),
        ("  Handler::RouteRequests", r"Handler::RouteRequests\("),
        ("    Ring::HashRoute (CRC-32)", r"Ring::HashRoute\("),
        ("  EngineImpl::Execute (single)", r"^frs::limit::EngineImpl::Execute\("),
        ("  EngineImpl::ExecuteBatch", r"EngineImpl::ExecuteBatch\("),
        ("    StoreImpl::Update", r"StoreImpl::Update\("),
        ("    StoreImpl::Get / Read", r"StoreImpl::(Get|Read|Peek|Query)\w*\("),
        ("  AppendDecision / WriteDecision", r"(AppendDecision|WriteDecision)\("),
        ("  AppendBatchCompact", r"AppendBatchCompact\("),
        ("  AppendBatch (full)", r"AppendBatch\("),
        ("  Handler::Respond (head + body copy)", r"Handler::Respond\("),
        ("  WorkerCounters::CountRequest", r"CountRequest"),
        ("Worker::Flush (send)", r"Worker::Flush\("),
        ("Worker::OnEvent (recv + Settle)", r"Worker::OnEvent\("),
    ]
    print("| phase (inclusive) | Ir | % | Ir / request | Ir / decision |")
    print("|---|---:|---:|---:|---:|")
    for label, rx in phases:
        ir = 0
        for r in incl_rows:  # the first (largest) matching symbol, in the binary's own file
            if re.search(rx, r[2]) and (not r[3] or "frsd" in r[3] or "pugixml" in r[3]):
                ir = r[0]
                break
        if ir:
            print(
                "| %s | %s | %.1f | %s | %s |"
                % (
                    label,
                    "{:,}".format(ir),
                    100 * ir / total,
                    "{:,.0f}".format(per(ir)),
                    "{:,.0f}".format(per(ir) / a.members),
                )
            )
    table_head("Top %d by self cost:" % a.top, ["Ir (self)", "%", "Ir / request", "group", "function (file)"], 3)
    for ir, f, fn, ob in self_rows[: a.top]:
        if SHARED.search(fname(fn)):
            by = defaultdict(int)
            for c in callers.get((f, fn), []):
                by[fname(c[2])] += c[0]
            tot = sum(by.values())
            grp = (
                (
                    "shared: "
                    + ", ".join(
                        "%s %.0f%%" % (short(n, 40), 100 * v / tot)
                        for n, v in sorted(by.items(), key=lambda kv: -kv[1])[:3]
                    )
                )
                if tot
                else classify(f, fn, ob)
            )
        else:
            grp = classify(f, fn, ob)
        print(
            "| %s | %.1f | %s | %s | `%s` (%s) |"
            % ("{:,}".format(ir), 100 * ir / total, "{:,.0f}".format(per(ir)), grp, short(fn), f.split("/")[-1])
        )
    table_head(
        "Top %d by inclusive cost (below Worker::Run):" % a.top,
        ["Ir (incl)", "%", "Ir / request", "function (file)"],
        3,
    )
    for ir, f, fn, ob in incl_rows[: a.top]:
        print(
            "| %s | %.1f | %s | `%s` (%s) |"
            % ("{:,}".format(ir), 100 * ir / total, "{:,.0f}".format(per(ir)), short(fn), f.split("/")[-1])
        )
    print()


if __name__ == "__main__":
    sys.exit(main())
