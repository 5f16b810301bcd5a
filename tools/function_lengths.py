#!/usr/bin/env python3
"""The functions of C++ files longer than a bound, or the longest of them.

    function_lengths.py [--max N] [--allow FILE:NAME]... [--top K] FILE...

With --max N (the default 120) it names each function whose definition, from
the first line of its signature to its closing brace, spans more than N
lines, as "FILE:LINE: NAME is L lines (at most N)", and exits 1 if there is
one. --allow FILE:NAME lets that one function be longer (tools/check_format.sh
names each with its reason); an allowance that no longer holds a longer
function fails too, so the list only shrinks. With --top K it lists the K
longest instead and exits 0.

It reads the files as clang-format lays them out (tools/check_format.sh runs
first), not as a compiler would: comments, strings and character literals
are blanked, then braces are matched. A brace opens a function body when it
stands at namespace or class scope after a parenthesised parameter list and
a space ("f(...) {", "f(...) const override {", "-> T {"); "= {" and "x_{"
(an initializer) and class, struct, union, enum and namespace bodies are
not functions. A lambda or a local class inside a function counts as part
of that function.
"""
import argparse
import re
import sys

SCOPE_KEYWORD = re.compile(r"\b(namespace|class|struct|union|enum)\b")
TEMPLATE_HEAD = re.compile(r"^\s*template\s*<")


def blank(text):
    """The text with comments, strings and character literals replaced by
    spaces (newlines kept, so line numbers stay)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delim = text[i + 2 : open_paren]
            j = text.find(")" + delim + '"', open_paren)
            j = n if j < 0 else j + len(delim) + 2
            out.append('""' + re.sub(r"[^\n]", " ", text[i + 2 : j]))
            i = j
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):
            # A quote after a digit or letter is a digit separator (1'000).
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            j = min(j + 1, n)
            out.append(c + re.sub(r"[^\n]", " ", text[i + 1 : j - 1]) + c)
            i = j
        elif c == "#" and (i == 0 or text[i - 1] == "\n"):
            # A preprocessor line (and its continuations) holds no braces of ours.
            j = i
            while True:
                k = text.find("\n", j)
                if k < 0:
                    k = n
                    break
                if text[k - 1] != "\\":
                    break
                j = k + 1
            out.append(re.sub(r"[^\n]", " ", text[i:k]))
            i = k
        else:
            out.append(c)
            i += 1
    return "".join(out)


def strip_template_head(header):
    """The declaration without its leading template <...> clauses."""
    while TEMPLATE_HEAD.match(header):
        start = header.index("<")
        depth = 0
        for k in range(start, len(header)):
            if header[k] == "<":
                depth += 1
            elif header[k] == ">":
                depth -= 1
                if depth == 0:
                    header = header[k + 1 :]
                    break
        else:
            return header
    return header


def function_name(header):
    """The name before the parameter list: "Metrics::Render", "operator()"."""
    m = re.search(r"(operator\s*\(\s*\)|operator\s*[^\s(]+|~?[A-Za-z_][\w:~<>,\s]*?)\s*\(", header)
    if not m:
        return "?"
    name = re.sub(r"\s+", " ", m.group(1)).strip()
    return name.split(" ")[-1] if not name.startswith("operator") else name


def functions(text):
    """(name, first line, last line) of each function defined in `text`."""
    code = blank(text)
    found = []
    # Each open brace: "scope" (namespace, class, extern "C"), "init"
    # (an initializer at scope), or "func"; inside a function every brace is
    # that function's.
    stack = []
    header_start = 0  # where the declaration before the next brace begins
    line = 1
    for i, c in enumerate(code):
        if c == "\n":
            line += 1
        in_function = any(kind == "func" for kind, _, _ in stack)
        if c in ";}" and not in_function:
            kind = stack.pop()[0] if c == "}" and stack else ""
            # An initializer's braces belong to the declaration around them
            # (a constructor's "x_{x}, y_(y) {").
            if kind != "init":
                header_start = i + 1
            continue
        if c == "{":
            if in_function:
                stack.append(("block", 0, ""))
                continue
            header = code[header_start:i]
            decl = strip_template_head(re.sub(r"^\s*(?:(?:public|protected|private)\s*:(?!:)\s*)*", "", header))
            before = code[i - 1] if i > 0 else " "
            # The declaration begins after blanks and access labels ("public:").
            first = header_start + re.match(r"\s*(?:(?:public|protected|private)\s*:(?!:)\s*)*", header).end()
            if re.search(r"=\s*$", header) or before.isalnum() or before == "_":
                kind = "init"
            elif "(" in decl and not SCOPE_KEYWORD.match(decl.lstrip()) and not decl.lstrip().startswith("extern"):
                kind = "func"
            else:
                kind = "scope"
            stack.append((kind, code.count("\n", 0, first) + 1, function_name(decl) if kind == "func" else ""))
            if kind == "scope":
                header_start = i + 1
            continue
        if c == "}" and in_function:
            kind, start, name = stack.pop()
            if kind == "func":
                found.append((name, start, line))
                header_start = i + 1
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--max", type=int, default=120)
    ap.add_argument("--top", type=int, default=0)
    ap.add_argument("--allow", action="append", default=[])
    ap.add_argument("files", nargs="+")
    args = ap.parse_args()
    rows = []
    for path in args.files:
        with open(path, encoding="utf-8") as f:
            for name, start, end in functions(f.read()):
                rows.append((end - start + 1, path, start, name))
    if args.top:
        for length, path, start, name in sorted(rows, reverse=True)[: args.top]:
            print("%s:%d: %s is %d lines" % (path, start, name, length))
        return 0
    over = sorted((r for r in rows if r[0] > args.max), key=lambda r: (r[1], r[2]))
    allowed = set(args.allow)
    failed = False
    for length, path, start, name in over:
        if "%s:%s" % (path, name) in allowed:
            allowed.discard("%s:%s" % (path, name))
            continue
        print("%s:%d: %s is %d lines (at most %d)" % (path, start, name, length, args.max))
        failed = True
    for stale in sorted(allowed):
        print("%s: allowed to be longer than %d lines, but is not (or is gone): drop its --allow" % (stale, args.max))
        failed = True
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
