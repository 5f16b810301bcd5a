#!/usr/bin/env python3
"""tools/function_lengths.py finds each function and its length as
clang-format lays C++ out, and fails naming the ones that are too long.

    function_lengths_test.py SOURCE_DIR
"""
import os
import subprocess
import sys
import tempfile

root = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.dirname(os.path.dirname(__file__)))
tool = os.path.join(root, "tools", "function_lengths.py")
sys.path.insert(0, os.path.join(root, "tools"))
import function_lengths  # noqa: E402 (found through the path set just above)

# Braces in comments, strings, raw strings and character literals; a class
# with an inline method; a constructor with brace initializers; an
# initializer list at namespace scope; a template; a lambda inside a
# function; an enum; extern "C".
SAMPLE = r"""#include <x>
namespace a {
namespace {
// { a comment's brace
constexpr int kTable[] = {1, 2, 3};
struct Row {
  int f() const { return 1; }
};
}  // namespace

class Thing {
 public:
  Thing(int x) : x_{x}, y_(x) {
    const char* s = "}{";
    char c = '{';
  }
  int Get() const override {
    return x_;
  }

 private:
  int x_;
  int y_;
};

template <class T>
T Twice(T t) {
  auto f = [](T u) {
    return u + u;
  };
  return f(t);
}

enum class E : int { kA, kB };

extern "C" {
int c_func(void) {
  const char* r = R"x(}}})x";
  /* } */
  return 0;
}
}

std::string Thing::Name() const {
#define BRACE {
  return "n";
}
}  // namespace a
"""


def check(cond, what):
    if not cond:
        print("FAIL: " + what)
        sys.exit(1)


found = {name: (start, end) for name, start, end in function_lengths.functions(SAMPLE)}
want = {
    "f": (7, 7),
    "Thing": (13, 16),
    "Get": (17, 19),
    "Twice": (26, 32),
    "c_func": (37, 41),
    "Thing::Name": (44, 47),
}
check(found == want, "functions %s, want %s" % (found, want))

with tempfile.TemporaryDirectory() as d:
    path = os.path.join(d, "long.cc")
    body = "".join("  x += %d;\n" % i for i in range(130))
    with open(path, "w") as f:
        f.write("int Short() {\n  return 1;\n}\n\nint Long(int x) {\n" + body + "  return x;\n}\n")
    run = subprocess.run([sys.executable, tool, path], capture_output=True, text=True)
    check(run.returncode == 1, "a 133-line function passes (rc %d)" % run.returncode)
    check(
        run.stdout.strip() == "%s:5: Long is 133 lines (at most 120)" % path,
        "the failure names the function and its length: %r" % run.stdout,
    )
    run = subprocess.run([sys.executable, tool, "--max", "133", path], capture_output=True, text=True)
    check(run.returncode == 0 and run.stdout == "", "--max 133 fails: %r" % run.stdout)
    run = subprocess.run([sys.executable, tool, "--allow", path + ":Long", path], capture_output=True, text=True)
    check(run.returncode == 0, "an allowed function fails: %r" % run.stdout)
    run = subprocess.run(
        [sys.executable, tool, "--allow", path + ":Short", "--allow", path + ":Long", path],
        capture_output=True,
        text=True,
    )
    check(run.returncode == 1 and ":Short: allowed" in run.stdout, "a stale allowance passes: %r" % run.stdout)

print("function_lengths: 6 functions found with their lines; too long, allowed and stale allowances reported")
