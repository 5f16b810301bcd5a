#!/usr/bin/env python3
"""docs/architecture.md's module table against CMake's link graph.

    architecture_doc_test.py LINK_GRAPH ARCHITECTURE_MD

LINK_GRAPH is what tests/package/CMakeLists.txt wrote at configure time: one
line per library of src/, "frs_x public: frs_a frs_b private: frs_c". The
table's "links" column names the modules without "frs_": the public ones,
then "; private: " and the private ones; words in parentheses are remarks.
Every library has a row, and every row says exactly what CMake links.
"""
import re
import sys


def cmake_graph(path):
    graph = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"(\S+) public:(.*) private:(.*)$", line.strip())
            if m:
                graph[m.group(1)] = (set(m.group(2).split()), set(m.group(3).split()))
    return graph


def doc_table(path, libraries):
    """{library: (public, private)} from the table's rows that name a library."""
    names = {lib[len("frs_") :] for lib in libraries}
    rows = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not line.startswith("|") or len(cells) < 4:
                continue
            m = re.fullmatch(r"`(frs_[a-z_]+)`", cells[1])
            if not m:
                continue
            links = re.sub(r"\([^)]*\)", "", cells[2])
            public, _, private = links.partition("; private:")

            def modules(text):
                return {"frs_" + w for w in re.findall(r"[a-z_]+", text) if w in names}

            rows[m.group(1)] = (modules(public), modules(private), n)
    return rows


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: architecture_doc_test.py LINK_GRAPH ARCHITECTURE_MD")
    graph = cmake_graph(sys.argv[1])
    if not graph:
        sys.exit("%s: no library" % sys.argv[1])
    rows = doc_table(sys.argv[2], graph)
    errors = []
    for lib in sorted(graph):
        if lib not in rows:
            errors.append("%s has no row in the module table" % lib)
            continue
        public, private, n = rows[lib]
        want_public, want_private = graph[lib]
        for kind, doc, want in (("public", public, want_public), ("private", private, want_private)):
            if doc != want:
                errors.append(
                    "%s:%d: %s links %s %s; the table says %s"
                    % (
                        sys.argv[2],
                        n,
                        lib,
                        kind,
                        " ".join(sorted(want)) or "nothing of ours",
                        " ".join(sorted(doc)) or "nothing of ours",
                    )
                )
    for lib in sorted(set(rows) - set(graph)):
        errors.append("%s:%d: %s is no library of src/" % (sys.argv[2], rows[lib][2], lib))
    if errors:
        sys.exit("\n".join(errors))
    print("%d libraries: the table says what CMake links" % len(graph))


if __name__ == "__main__":
    main()
