#!/usr/bin/env bash
# Checks that the sources agree with their formatters, changing nothing:
#   tools/check_format.sh           lists every file clang-format would change
#                                   and exits 1 if there is one (CI)
#   tools/check_format.sh --diff    shows the changes too
#   tools/check_format.sh FILE...   checks those C++ files only
# The files are the tracked .cc, .h and .c files under src, include, tools
# and tests, but tools/bench/loadgen.c: a stand-alone C program in its own
# style (K&R comments, `char *p`), built by hand outside CMake.
# clang-format 14 (Debian 12's clang-format package): another version lays
# out some lines differently, so it is named when it is not the one found.
# To fix a file: clang-format -i FILE. With no FILE, no function of src/ may
# be longer than 120 lines (tools/function_lengths.py), the tracked shell
# scripts are checked by shellcheck, and the tracked Python files by black (layout,
# pyproject.toml: black --config pyproject.toml FILE fixes one) and flake8
# (.flake8), too.
set -euo pipefail
cd "$(dirname "$0")/.."

show_diff=0
if [ "${1:-}" = --diff ]; then
  show_diff=1
  shift
fi

cf=${CLANG_FORMAT:-}
if [ -z "$cf" ]; then
  for c in clang-format-14 clang-format; do
    if command -v "$c" >/dev/null; then
      cf=$c
      break
    fi
  done
fi
if [ -z "$cf" ]; then
  echo "check_format: clang-format not found (Debian: apt-get install clang-format)" >&2
  exit 2
fi
version=$("$cf" --version)
case "$version" in
  *" version 14."*) ;;
  *) echo "check_format: $version is not clang-format 14; its layout may differ from the tree's" >&2 ;;
esac

if (($#)); then
  files=("$@")
else
  mapfile -t files < <(git ls-files -- 'src/*' 'include/*' 'tools/*' 'tests/*' |
    grep -E '\.(cc|h|c)$' | grep -vx 'tools/bench/loadgen.c')
fi

# The shell scripts' check (shellcheck, the slowest: 2.5 s) runs beside clang-format and the
# others when the whole tree is checked; its result is read in its turn
# below, so the output keeps its order.
sc_out=$(mktemp)
sc_pid=
if ((!$#)) && command -v shellcheck >/dev/null; then
  mapfile -t scripts < <(git ls-files -- '*.sh' .ci/run)
  shellcheck -x -f gcc "${scripts[@]}" >"$sc_out" 2>&1 &
  sc_pid=$!
fi
trap 'rm -f "$sc_out"' EXIT

# One clang-format process for the whole tree (--dry-run reports each line it
# would change as "FILE:LINE:COL: error"): a process per file took a minute
# of CI's time, this takes two seconds.
mapfile -t bad < <("$cf" --style=file --dry-run "${files[@]}" 2>&1 |
  sed -n 's/^\(.*\):[0-9][0-9]*:[0-9][0-9]*: \(error\|warning\): code should be clang-formatted.*/\1/p' | uniq)
changed=${#bad[@]}
for f in "${bad[@]}"; do
  echo "$f"
  if ((show_diff)); then "$cf" --style=file "$f" | diff -u "$f" - | sed '1,2d' || true; fi
done
if ((changed)); then
  echo "check_format: clang-format would change ${changed} of ${#files[@]} files (clang-format -i FILE to fix)" >&2
  exit 1
fi
echo "check_format: ${#files[@]} files agree with .clang-format"

# No function of src/ longer than 120 lines, signature to closing brace
# (tools/function_lengths.py; --top 10 lists the longest): split one by
# meaning, into steps with names, rows of a table, helpers that own a check.
# An exception would be named here with its reason (--allow FILE:NAME); there
# is none.
if ((!$#)); then
  mapfile -t sources < <(git ls-files -- 'src/*.cc' 'src/*.h')
  if ! python3 tools/function_lengths.py --max 120 "${sources[@]}"; then
    echo "check_format: the functions above are longer than 120 lines: split them by meaning" >&2
    exit 1
  fi
  echo "check_format: no function of the ${#sources[@]} files of src/ is longer than 120 lines"
fi

# The whole tree's shell scripts, when no file is named: every shellcheck
# finding, its notes and style hints too; one kept on purpose is disabled on
# its line with the reason beside it ("# shellcheck disable=SCnnnn # why").
# -x follows what a script sources (.shellcheckrc: relative to the script),
# so a variable set for lib.sh counts as used.
if ((!$#)); then
  if ! command -v shellcheck >/dev/null; then
    echo "check_format: shellcheck not found (Debian: apt-get install shellcheck)" >&2
    exit 2
  fi
  if ! wait "$sc_pid"; then
    cat "$sc_out"
    echo "check_format: shellcheck finds the above in the shell scripts" >&2
    exit 1
  fi
  echo "check_format: ${#scripts[@]} shell scripts pass shellcheck"
fi

# The tracked Python files, when no file is named: black's layout and
# flake8's findings (a finding kept on purpose carries `# noqa: CODE` and its
# reason on its line).
if ((!$#)); then
  for tool in black flake8; do
    if ! command -v "$tool" >/dev/null; then
      echo "check_format: $tool not found (Debian: apt-get install $tool)" >&2
      exit 2
    fi
  done
  mapfile -t py < <(git ls-files -- '*.py')
  if ! black --config pyproject.toml --check --quiet "${py[@]}"; then
    black --config pyproject.toml --check "${py[@]}" 2>&1 | grep '^would reformat' >&2 || true
    echo "check_format: black would reformat the Python files above (black --config pyproject.toml FILE to fix)" >&2
    exit 1
  fi
  if ! flake8 "${py[@]}"; then
    echo "check_format: flake8 found the problems above in the Python files (.flake8)" >&2
    exit 1
  fi
  echo "check_format: ${#py[@]} Python files agree with black and pass flake8"
fi
