#!/usr/bin/env python3
"""docs/configuration.md names every element and attribute srv.xml's parser
accepts (the table of src/config/srv_elements.cc): a setting added to the code without its
line in the reference fails here.

    python3 tests/config/configuration_doc_test.py SRC_DIR
"""
import os
import re
import sys

root = (
    sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
)
code = open(os.path.join(root, "src", "config", "srv_elements.cc"), encoding="utf-8").read()
doc = open(os.path.join(root, "docs", "configuration.md"), encoding="utf-8").read()

# The attribute lists (constexpr const char* kXAttrs[] = {...};) and the
# element table's rows ({"name", Place::kWhere, kXAttrs, ...}).
lists = {
    m.group(1): re.findall(r'"([a-z_]+)"', m.group(2))
    for m in re.finditer(r"constexpr const char\* (k\w+)\[\]\s*=\s*\{([^}]*)\};", code)
}
rows = re.findall(r'\{"([a-z]+)", Place::(k\w+), (k\w+),', code)
if len(rows) < 16:
    print("src/config/srv_elements.cc: %d rows of kElements read, expected at least 16" % len(rows))
    sys.exit(1)
elements = set()
attrs = {}
for name, place, attr_list in rows:
    # A child of <cluster> is documented as `<cluster><shard weight>`.
    el = "cluster><" + name if place == "kInCluster" else name
    elements.add(el)
    if attr_list != "kText" and attr_list not in lists:
        print("src/config/srv_elements.cc: <%s>'s attribute list %s not found" % (name, attr_list))
        sys.exit(1)
    attrs[el] = lists.get(attr_list, [])
missing = []
for el in sorted(elements):
    if "`<%s" % el not in doc:
        missing.append("<%s>" % el)
    for a in attrs[el]:
        if "`<%s %s>`" % (el, a) not in doc:
            missing.append("<%s %s>" % (el, a))
if missing:
    print("docs/configuration.md lacks: " + ", ".join(missing))
    sys.exit(1)
print(
    "1 passed, 0 failed: %d elements, %d attributes documented" % (len(elements), sum(len(v) for v in attrs.values()))
)
