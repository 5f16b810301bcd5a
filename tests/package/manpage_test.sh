#!/usr/bin/env bash
# The man pages stay true: every option and command that `--help` of frsd
# and frsctl (and of each frsctl command) lists appears in frsd.8 / frsctl.8.
# usage: manpage_test.sh FRSD FRSCTL MAN_DIR
set -euo pipefail
frsd=$1 frsctl=$2 man=$3
fail=0
page_text() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$1"; }
check() {  # page, help text, what
  local page=$1 help=$2 what=$3 opt
  for opt in $(grep -oE '(^|[ ,])--?[a-zA-Z][a-zA-Z-]*' <<<"$help" | tr -d ' ,' | sort -u); do
    if ! grep -qF -- "$opt" <<<"$page"; then
      echo "FAIL: $what lists $opt, which $(basename "$4") does not document"
      fail=1
    fi
  done
}
frsd_page=$(page_text "$man/frsd.8")
check "$frsd_page" "$("$frsd" --help)" "frsd --help" "$man/frsd.8"
ctl_page=$(page_text "$man/frsctl.8")
top=$("$frsctl" --help)
check "$ctl_page" "$top" "frsctl --help" "$man/frsctl.8"
cmds=$(sed -n '/^Subcommands:/,$p' <<<"$top" | awk 'NR > 1 && $1 ~ /^[a-z]+$/ {print $1}')
[ -n "$cmds" ] || { echo "FAIL: no commands found in frsctl --help"; exit 1; }
for c in $cmds; do
  grep -qE "^\.(TP|B|BR|BI)?.*\b$c\b" <<<"$ctl_page" || { echo "FAIL: frsctl $c is not in frsctl.8"; fail=1; }
  check "$ctl_page" "$("$frsctl" "$c" --help)" "frsctl $c --help" "$man/frsctl.8"
done
# Every srv.xml element and attribute the parser takes (the rows of
# src/config/srv_elements.cc's kElements, each with its attribute array) is
# named in frsd.8's CONFIGURATION section, on the element's own .B line.
src=$(dirname "$man")/../src/config/srv_elements.cc
if [ -f "$src" ]; then
  python3 - "$src" "$man/frsd.8" <<'PY' || fail=1
import re, sys
code = open(sys.argv[1]).read()
page = open(sys.argv[2]).read().replace("\\-", "-")
arrays = {m.group(1): re.findall(r'"([a-z_]+)"', m.group(2))
          for m in re.finditer(r'constexpr const char\* (k[A-Za-z]+Attrs)\[\] =\s*\{([^}]*)\}', code)}
rows = re.findall(r'\{"([a-z]+)", Place::k[A-Za-z]+, (k[A-Za-z]+),', code)
# A parse that finds nothing would pass every page: the table's shape changed.
if len(rows) < 10 or not arrays:
    print("FAIL: found %d element rows and %d attribute arrays in %s" % (len(rows), len(arrays), sys.argv[1]))
    sys.exit(1)
bad = []
for el, attrs in rows:
    line = re.search(r'^\.B <%s[ >](.*)$' % el, page, re.M)
    if not line:
        bad.append("<%s>" % el)
        continue
    if attrs != "kText" and attrs not in arrays:
        bad.append("<%s>'s attributes (%s: not found)" % (el, attrs))
        continue
    bad += ["<%s %s>" % (el, a) for a in arrays.get(attrs, []) if not re.search(r'\b%s\b' % a, line.group(1))]
if bad:
    print("FAIL: frsd.8 does not name srv.xml's " + ", ".join(bad))
    sys.exit(1)
print("frsd.8: %d srv.xml elements and their attributes" % len(rows))
PY
else
  echo "FAIL: $src is missing"
  fail=1
fi
[ $fail = 0 ] && echo "man pages: ok ($(wc -w <<<"$cmds") frsctl commands, every srv.xml element)"
exit $fail
