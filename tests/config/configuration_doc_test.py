#!/usr/bin/env python3
"""docs/configuration.md names every element and attribute srv.xml's parser
accepts (src/config/srv_config.cc): a setting added to the code without its
line in the reference fails here.

    python3 tests/config/configuration_doc_test.py SRC_DIR
"""
import os
import re
import sys

root = (
    sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
code = open(os.path.join(root, "src", "config", "srv_config.cc"), encoding="utf-8").read()
doc = open(os.path.join(root, "docs", "configuration.md"), encoding="utf-8").read()

elements = set(re.findall(r'name == "([a-z]+)"', code))
attrs = {}
for el in elements:
    # The OnlyAttrs list of the branch that handles <el>.
    m = re.search(r'name == "%s"\) \{\s*if \(!\(s = P\.OnlyAttrs\(n,\s*\{([^}]*)\}' % el, code)
    attrs[el] = re.findall(r'"([a-z_]+)"', m.group(1)) if m else []
missing = []
for el in sorted(elements):
    if "`<%s" % el not in doc:
        missing.append("<%s>" % el)
    for a in attrs[el]:
        if "`<%s %s>`" % (el, a) not in doc:
            missing.append("<%s %s>" % (el, a))
if "`<cluster><shard weight>`" not in doc:
    missing.append("<cluster><shard weight>")
if missing:
    print("docs/configuration.md lacks: " + ", ".join(missing))
    sys.exit(1)
print(
    "1 passed, 0 failed: %d elements, %d attributes documented" % (len(elements), sum(len(v) for v in attrs.values()))
)
