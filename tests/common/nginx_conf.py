"""tests/common/nginx_conf.py: the nginx.conf every test (and tools/cluster)
runs nginx with: in the foreground, one process, its pid file, error log
and temp files in the test's own directory, so nothing of the machine's
nginx is used; the caller gives what goes inside http {}."""
import os

TEMP_PATHS = ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")


def write(d, http, worker_connections=256):
    """Writes d/nginx.conf holding `http` (lines ending in newlines) inside
    http {}, and d/tmp for nginx's temp files; returns the file's path."""
    os.makedirs(os.path.join(d, "tmp"), exist_ok=True)
    lines = ["user root;"] if os.geteuid() == 0 else []
    lines += [
        "daemon off;",
        "master_process off;",
        "worker_processes 1;",
        "pid %s/nginx.pid;" % d,
        "error_log %s/error.log warn;" % d,
        "events { worker_connections %d; }" % worker_connections,
        "http {",
        "  access_log off;",
    ]
    lines += ["  %s_temp_path %s/tmp/%s;" % (t, d, t) for t in TEMP_PATHS]
    path = os.path.join(d, "nginx.conf")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n" + http + "}\n")
    return path
