#!/usr/bin/env python3
"""The reference cannot drift from frsctl: every command and option that
`frsctl --help` (and each command's --help) lists is in docs/frsctl.md;
every `frsctl ...` written in backticks in a shipped config, a doc, the
README or an example names a real command and real options of it; and no
command or option heading appears twice in frsctl.8 (two entries drift
apart, as `top --denied` did with two defaults); and the README shows
conf/map.xml as it is, in at most 200 lines; and every XML file under conf/
is well-formed XML.
usage: docs_test.py FRSCTL SOURCE_DIR"""
import collections
import glob
import os
import re
import subprocess
import sys
import xml.dom.minidom
import xml.parsers.expat


def help_text(frsctl, *cmd):
    return subprocess.run([frsctl, *cmd, "--help"], capture_output=True, text=True, check=True).stdout


def options(text):
    return set(re.findall(r"(?:^|[ ,])(--?[a-zA-Z][a-zA-Z-]*)", text)) - {"-h", "--help"}


def commands(frsctl):
    top = help_text(frsctl)
    lines = top[top.index("Subcommands:") :].splitlines()[1:]
    return [ln.split()[0] for ln in lines if re.match(r"^  [a-z][a-z-]*\s", ln)]


def main():
    frsctl, src = sys.argv[1], sys.argv[2]
    failures = []
    cmds = commands(frsctl)
    if len(cmds) < 10:
        failures.append("found only %d commands in frsctl --help: %s" % (len(cmds), cmds))
    opts = {c: options(help_text(frsctl, c)) for c in cmds}

    # 1. docs/frsctl.md: a table row per command, naming each of its options.
    md = open(os.path.join(src, "docs", "frsctl.md")).read()
    for c in cmds:
        rows = re.findall(r"^\| `%s(?:[ `].*)$" % re.escape(c), md, re.M)
        if not rows:
            failures.append("docs/frsctl.md has no row for `frsctl %s`" % c)
            continue
        for o in sorted(opts[c]):
            if o not in "\n".join(rows) and not re.search(r"`%s[ `=]" % re.escape(o), md):
                failures.append("docs/frsctl.md does not document `frsctl %s %s`" % (c, o))

    # 2. Every `frsctl ...` in backticks names a real command and its options.
    texts = [os.path.join(src, "README.md")]
    for pattern in ("conf/**/*", "docs/*.md", "clients/**/*.md", "examples/**/*"):
        texts += [p for p in glob.glob(os.path.join(src, pattern), recursive=True) if os.path.isfile(p)]
    for path in texts:
        try:
            text = open(path, errors="replace").read()
        except OSError:
            continue
        for lineno, line in enumerate(text.splitlines(), 1):
            for span in re.findall(r"`frsctl ([^`]*)`", line):
                words = span.split()
                if words[:1] in (["-c"], ["--config"]):
                    words = words[2:]  # the one global option with a value
                cmd = words[0] if words and not words[0].startswith("-") else ""
                where = "%s:%d: `frsctl %s`" % (os.path.relpath(path, src), lineno, span)
                if "/" in cmd and all(c in opts for c in cmd.split("/")):
                    continue  # `frsctl explain/dump/top`: several commands named at once
                if cmd not in opts:
                    # Global options only (`frsctl --help`), or a placeholder.
                    if cmd and cmd.isupper() or not cmd:
                        continue
                    failures.append("%s: no command %r" % (where, cmd))
                    continue
                top_opts = options(help_text(frsctl))
                for w in words:
                    o = w.split("=")[0].rstrip(",.;:)]")
                    if o.startswith("--") and o not in opts[cmd] and o not in top_opts:
                        failures.append("%s: %s is not an option of %s" % (where, o, cmd))

    # 3. frsctl.8: in COMMANDS, each entry heading names a distinct thing.
    page = open(os.path.join(src, "docs", "man", "frsctl.8")).read()
    section = page[page.index(".SH COMMANDS") :]
    section = section[: section.index("\n.SH ", 1)]
    names = collections.Counter()
    for line in section.splitlines():
        m = re.match(r'^\.(?:B|BR|BI) (?:"([^"]*)"|(\S+))', line)
        name = (m.group(1) or m.group(2)).replace("\\-", "-") if m else ""
        if name.split(" ")[0] in opts:
            names[name] += 1
    for name, n in sorted(names.items()):
        if n > 1:
            failures.append("frsctl.8 describes %r in %d entries" % (name, n))

    # 4. The README shows the map the server runs, whole, and stays a page.
    readme = open(os.path.join(src, "README.md")).read()
    if open(os.path.join(src, "conf", "map.xml")).read().strip() not in readme:
        failures.append("README.md does not show conf/map.xml as it is")
    if readme.count("\n") > 200:
        failures.append("README.md has %d lines (200 at most: details go to docs/)" % readme.count("\n"))

    # 5. Every shipped XML file is XML to any parser, not only to pugixml,
    # which lets "--" pass inside a comment (an operator's tool refuses it).
    for path in sorted(glob.glob(os.path.join(src, "conf", "**", "*.xml"), recursive=True)):
        try:
            xml.dom.minidom.parse(path)
        except xml.parsers.expat.ExpatError as e:
            failures.append("%s is not well-formed XML: %s" % (os.path.relpath(path, src), e))

    for f in failures:
        print("FAIL: " + f)
    if not failures:
        print("docs: ok (%d commands, every option in docs/frsctl.md, every `frsctl ...` real)" % len(cmds))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
