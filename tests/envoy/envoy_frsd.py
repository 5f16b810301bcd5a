"""tests/envoy/envoy_frsd.py: what the Envoy tests share: one frsd with a
<grpc> listener on ports of its own binding (read back from frsd.listen and
frsd.grpc.listen), the gRPC messages generated at test time from the .proto
files in src/envoy/proto with Debian's protoc (--python_out, matching
python3-protobuf), and stopping by pid."""
import importlib
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "common"))
import processes  # noqa: E402

FRSD = os.environ.get("FRSD", "")
PROTO_DIR = os.path.join(ROOT, "src", "envoy", "proto")
PROTOS = [
    "envoy/config/core/v3/base.proto",
    "envoy/extensions/common/ratelimit/v3/ratelimit.proto",
    "envoy/service/ratelimit/v3/rls.proto",
    "grpc/health/v1/health.proto",
]
SHOULD_RATE_LIMIT = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"
HEALTH_CHECK = "/grpc.health.v1.Health/Check"


def generate_messages(out_dir):
    """protoc --python_out into out_dir; returns (rls_pb2, ratelimit_pb2, health_pb2)."""
    subprocess.run(
        ["protoc", "--python_out=" + out_dir, "-I", PROTO_DIR, "-I", "/usr/include"] + PROTOS, check=True, timeout=60
    )
    for d, _, _ in os.walk(os.path.join(out_dir, "envoy")):
        open(os.path.join(d, "__init__.py"), "a").close()
    sys.path.insert(0, out_dir)
    # health_pb2 by its file: its package path "grpc" is grpcio's module.
    spec = importlib.util.spec_from_file_location(
        "frs_health_pb2", os.path.join(out_dir, "grpc", "health", "v1", "health_pb2.py")
    )
    health = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(health)
    return (
        importlib.import_module("envoy.service.ratelimit.v3.rls_pb2"),
        importlib.import_module("envoy.extensions.common.ratelimit.v3.ratelimit_pb2"),
        health,
    )


def load_grpc():
    """grpcio and the generated messages, for a test that speaks gRPC: exits
    77 (skipped) without grpcio or protoc. Returns (grpc, rls_pb2,
    ratelimit_pb2, health_pb2); main() removes the generated files."""
    # Listed in tests/skips.txt: a developer's python3 may lack them.
    try:
        import grpc
    except ImportError:
        print("SKIP: no grpcio for %s (tools/setup.sh --test installs python3-grpcio)" % sys.executable)
        sys.exit(77)
    if shutil.which("protoc") is None:
        print("SKIP: no protoc (tools/setup.sh --test installs protobuf-compiler)")
        sys.exit(77)
    _GENERATED.append(tempfile.mkdtemp(prefix="frs-envoy-pb-"))
    mods = (grpc,) + tuple(generate_messages(_GENERATED[-1]))
    _LOADED.extend(mods)
    return mods


_LOADED = []  # grpc, rls_pb2, ratelimit_pb2, health_pb2, once load_grpc ran
_GENERATED = []  # the directory load_grpc generated the messages in


def main():
    """unittest.main() for a test script, then the generated messages removed."""
    try:
        unittest.main()
    finally:
        for d in _GENERATED:
            shutil.rmtree(d, ignore_errors=True)


def should_rate_limit(port, req, timeout=5):
    """One ShouldRateLimit call on a channel of its own; returns the response."""
    grpc, rls_pb2 = _LOADED[0], _LOADED[1]
    with grpc.insecure_channel("127.0.0.1:%d" % port) as ch:
        f = ch.unary_unary(
            SHOULD_RATE_LIMIT,
            request_serializer=rls_pb2.RateLimitRequest.SerializeToString,
            response_deserializer=rls_pb2.RateLimitResponse.FromString,
        )
        return f(req, timeout=timeout)


def alias_bomb(domain, levels=7, fanout=9):
    """A YAML file of nested lists, each list's items aliasing the list below:
    fanout^levels descriptor paths in about 2.6 kB (a "billion laughs")."""
    lst = ""
    for level in range(levels):
        items = []
        for i in range(fanout):
            rest = (
                ", rate_limit: {unit: second, requests_per_unit: 1}"
                if level == 0
                else ", descriptors: " + (lst if i == 0 else "*l%d" % (level - 1))
            )
            items.append("{key: k%d%s}" % (i, rest))
        lst = "&l%d [%s]" % (level, ", ".join(items))
    return "domain: %s\ndescriptors: %s\n" % (domain, lst)


MAP = """<map>
  <biz id="1" name="login"><rule interval="60" max="5"/></biz>
</map>
"""


class Frsd:
    """One frsd with <grpc>: a temp dir holding srv.xml, map.xml, envoy/*.yaml."""

    def __init__(self, yaml_files, workers=2, grpc_extra="", extra=""):
        self.dir = tempfile.mkdtemp(prefix="frs-envoy-")
        self.workers = workers
        self.grpc_extra = grpc_extra
        self.extra = extra
        self.proc = None
        self.port = self.grpc_port = 0
        os.mkdir(os.path.join(self.dir, "envoy"))
        with open(os.path.join(self.dir, "map.xml"), "w") as f:
            f.write(MAP)
        for name, text in yaml_files.items():
            self.write_yaml(name, text)
        self.write_srv(grpc_extra, extra)

    def write_srv(self, grpc_extra="", extra=""):
        """srv.xml, its <grpc> element with the attributes `grpc_extra` (a
        running frsd applies a change on reload)."""
        with open(os.path.join(self.dir, "srv.xml.tmp"), "w") as f:
            f.write(
                '<frs>\n  <listen host="127.0.0.1" port="0"/>\n  <workers>%d</workers>\n'
                '  <map>map.xml</map>\n  <store dir="data" files="1" keynodes="4096" chain="8"/>\n'
                '  <grpc listen="127.0.0.1:0" config="envoy"%s/>\n%s</frs>\n' % (self.workers, grpc_extra, extra)
            )
        os.rename(os.path.join(self.dir, "srv.xml.tmp"), os.path.join(self.dir, "srv.xml"))

    def generations(self):
        """Each worker's latest map generation, by its index, from the log."""
        latest = {}
        for w, g in re.findall(r"worker (\d+): reloaded .*\(map generation (\d+)\)", self.log()):
            latest[int(w)] = max(latest.get(int(w), 0), int(g))
        return latest

    def reloaded(self, change, timeout=10.0):
        """Runs change() (a file written, renamed, removed) and waits for
        frsd to act on it without a signal: True once every worker reloaded
        to a generation newer than any before the change, False when the
        master refused the new configuration. (Counting lines instead, a
        worker's late line of the reload before passed for this one.)"""
        before = max(self.generations().values(), default=0)
        refused = self.log().count("reload refused")
        change()
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.log().count("reload refused") > refused:
                return False
            latest = self.generations()
            if all(latest.get(w, 0) > before for w in range(self.workers)):
                return True
            time.sleep(0.02)
        raise RuntimeError("frsd did not reload: " + self.log())

    def write_yaml(self, name, text):
        path = os.path.join(self.dir, "envoy", name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "w") as f:
            f.write(text)
        os.rename(path + ".tmp", path)

    def path(self, *p):
        return os.path.join(self.dir, *p)

    def start(self, timeout=10.0):
        for name in ("frsd.listen", "frsd.grpc.listen"):
            try:
                os.unlink(self.path("data", name))
            except OSError:
                pass
        self.port = self.grpc_port = 0
        # Every worker serving, not the first: a SIGHUP sent while one still
        # starts reaches it before it reads its configuration, and it never
        # logs the reload the test waits for (seen on a loaded machine).
        serving = self.log().count("serving (listen socket")
        with open(self.path("frsd.stderr"), "ab") as err:
            self.proc = subprocess.Popen(
                [FRSD, "-c", self.path("srv.xml"), "--foreground"],
                stdout=err,
                stderr=err,
                stdin=subprocess.DEVNULL,
                close_fds=True,
            )
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                break
            if not self.port:
                self.port = processes.listen_port(self.path("data", "frsd.listen"))
                self.grpc_port = processes.listen_port(self.path("data", "frsd.grpc.listen"))
            if (
                self.port
                and self.log().count("serving (listen socket") >= serving + self.workers
                and self.get("/health")[0] == 200
            ):
                return
            time.sleep(0.02)
        self.stop()
        raise RuntimeError("frsd did not start: " + self.log())

    def get(self, path, data=None):
        try:
            req = urllib.request.Request("http://127.0.0.1:%d%s" % (self.port, path), data=data)
            with urllib.request.urlopen(req, timeout=5) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
        except OSError:
            return 0, ""

    def reload(self, timeout=10.0):
        """SIGHUP; True once every worker reloaded, False when the master refused it."""
        return processes.reload_frsd(self.proc, self.log, self.workers, timeout)

    def log(self):
        return processes.read_text(self.path("frsd.stderr"))

    def workers_pids(self):
        return processes.children(self.proc.pid)

    def kill9_all(self):
        """kill -9 of the master and every worker, by pid."""
        processes.kill9(self.proc)

    def stop(self):
        processes.stop(self.proc)

    def remove(self):
        self.stop()
        if not os.environ.get("FRS_E2E_KEEP"):
            shutil.rmtree(self.dir, ignore_errors=True)
