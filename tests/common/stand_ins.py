"""tests/common/stand_ins.py: what the Python tests put where an frsd would
be, to see how a client or a front door takes it: a listener that never
answers, and an HTTP handler that answers every request with one fixed FRS
<response>."""
import http.server
import socket


def listener(backlog=64):
    """A socket listening on 127.0.0.1, on a port the kernel chose; what
    connects waits in its backlog unless the caller accepts."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    s.listen(backlog)
    return s


def fixed_answer(status, body):
    """A BaseHTTPRequestHandler class answering every GET and POST with
    `status` and the XML `body` (bytes), the request's body read first."""

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(status)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_POST = do_GET

        def log_message(self, *args):
            pass

    return Handler
