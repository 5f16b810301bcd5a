#!/usr/bin/env python3
"""Fails when ctest skipped a test that tests/skips.txt does not allow to be
skipped, naming each such test; run by tools/test.sh after each ctest stage.

    tools/check_skips.py tests/skips.txt JUNIT_FILE [GTEST_XML_DIR]

JUNIT_FILE is what `ctest --output-junit` wrote: a skipped test (exit code
SKIP_RETURN_CODE) is a <testcase status="notrun"> holding a <skipped>
element there. A ctest test runs a whole GoogleTest suite
(tests/cmake/gtest_suites.cmake), which passes when a TEST in it calls
GTEST_SKIP: such a TEST is found in the suite's own XML report, one file
<program>@<prefix>@<suite>.xml in GTEST_XML_DIR, and named <prefix><Suite>.<Test>.
"""
import os
import sys
import xml.etree.ElementTree as ET


def allowed(path):
    """{test name: reason} from the skip list; a line without a reason is an error."""
    out = {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            name, _, reason = line.partition(" ")
            if not reason.strip():
                sys.exit("%s:%d: %s has no reason" % (path, n, name))
            out[name] = reason.strip()
    return out


def skipped(junit):
    """The names of the tests ctest reports as not run in `junit`."""
    root = ET.parse(junit).getroot()
    return [
        c.get("name") for c in root.iter("testcase") if c.get("status") == "notrun" or c.find("skipped") is not None
    ]


def gtest_skipped(xml_dir):
    """The TESTs GoogleTest's XML reports in `xml_dir` say were skipped."""
    out = []
    for entry in sorted(os.listdir(xml_dir)):
        if not entry.endswith(".xml"):
            continue
        parts = entry[: -len(".xml")].split("@")
        prefix = parts[1] if len(parts) == 3 else ""
        root = ET.parse(os.path.join(xml_dir, entry)).getroot()
        out += [
            "%s%s.%s" % (prefix, c.get("classname"), c.get("name"))
            for c in root.iter("testcase")
            if c.get("result") == "skipped" or c.find("skipped") is not None
        ]
    return out


def main():
    if len(sys.argv) not in (3, 4):
        sys.exit("usage: check_skips.py SKIP_LIST JUNIT_FILE [GTEST_XML_DIR]")
    ok = allowed(sys.argv[1])
    names = skipped(sys.argv[2])
    if len(sys.argv) == 4 and os.path.isdir(sys.argv[3]):
        names += gtest_skipped(sys.argv[3])
    for name in names:
        print("skipped: %s (%s)" % (name, ok.get(name, "NOT in %s" % sys.argv[1])))
    bad = [n for n in names if n not in ok]
    if bad:
        sys.exit("%d skipped test(s) not listed in %s: %s" % (len(bad), sys.argv[1], " ".join(bad)))


if __name__ == "__main__":
    main()
