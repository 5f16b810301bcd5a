"""tests/envoy/test_hostile_h2.py: hostile HTTP/2 on frsd's <grpc> listener
from raw sockets: a bad preface, an oversized frame, more streams than the
advertised SETTINGS_MAX_CONCURRENT_STREAMS, a stream left unfinished (the
request time-out closes it), a message whose length prefix lies and one
that is no protobuf. Each is answered or closed; frsd keeps serving, and no
count changes. With FRS_H2_CORPUS set, each attack's bytes are written
there (the seeds of the grpc_session fuzz target)."""
import os
import socket
import struct
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import envoy_frsd  # noqa: E402

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
YAML = """domain: edge
descriptors:
  - key: remote_address
    rate_limit: {unit: hour, requests_per_unit: 1000}
"""


def frame(ftype, flags, stream, payload):
    return struct.pack(">I", len(payload))[1:] + bytes([ftype, flags]) + struct.pack(">I", stream) + payload


SETTINGS = frame(4, 0, 0, b"")


def headers(stream, end_stream=False, path=b"/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"):
    # HPACK: :method POST (static 3), :scheme http (6), :authority literal
    # (name 1; nghttp2 requires it or host), :path literal without indexing
    # (name 4), content-type literal (name 31).
    block = b"\x83\x86" + b"\x01\x01x" + b"\x04" + bytes([len(path)]) + path + b"\x0f\x10" + bytes([16]) + b"application/grpc"
    return frame(1, 0x4 | (0x1 if end_stream else 0), stream, block)


def rls_message(key):
    # RateLimitRequest{domain: "edge", descriptors: [{entries: [{key: remote_address, value: key}]}]}
    entry = b"\x0a\x0eremote_address\x12" + bytes([len(key)]) + key
    desc = b"\x0a" + bytes([len(entry)]) + entry
    msg = b"\x0a\x04edge\x12" + bytes([len(desc)]) + desc
    return msg


def data(stream, payload, end_stream=True):
    return frame(0, 0x1 if end_stream else 0, stream, payload)


def grpc_body(msg, lie=0):
    return b"\x00" + struct.pack(">I", len(msg) + lie) + msg


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=5)

    def send(self, b):
        self.s.sendall(b)

    def read_until_closed(self, limit=10.0):
        """All bytes until the server closes; None when it did not within `limit` s."""
        out = b""
        end = time.monotonic() + limit
        self.s.settimeout(0.2)
        while time.monotonic() < end:
            try:
                b = self.s.recv(65536)
            except socket.timeout:
                continue
            except ConnectionResetError:
                return out
            if not b:
                return out
            out += b
        return None

    def read_for(self, seconds):
        out = b""
        end = time.monotonic() + seconds
        self.s.settimeout(0.1)
        while time.monotonic() < end:
            try:
                b = self.s.recv(65536)
            except socket.timeout:
                continue
            if not b:
                break
            out += b
        return out

    def close(self):
        self.s.close()


def frames(b):
    out = []
    while len(b) >= 9:
        n = struct.unpack(">I", b"\x00" + b[:3])[0]
        out.append((b[3], b[4], struct.unpack(">I", b[5:9])[0] & 0x7fffffff, b[9:9 + n]))
        b = b[9 + n:]
    return out


class Hostile(unittest.TestCase):
    corpus = os.environ.get("FRS_H2_CORPUS")

    @classmethod
    def setUpClass(cls):
        cls.frsd = envoy_frsd.Frsd({"edge.yaml": YAML}, workers=1,
                                   extra='  <limits request_timeout_ms="1000" idle_timeout_ms="3000"/>\n')
        cls.frsd.start()

    @classmethod
    def tearDownClass(cls):
        cls.frsd.remove()

    def save(self, name, b):
        if self.corpus:
            os.makedirs(self.corpus, exist_ok=True)
            with open(os.path.join(self.corpus, name), "wb") as f:
                f.write(b)

    def count(self, key):
        st, body = self.frsd.get("/query?biz=envoy.edge.remote_address&key=remote_address_" + key)
        self.assertEqual(st, 200, body)
        return int(body.split('count="')[1].split('"')[0])

    def assert_serving(self):
        c = Conn(self.frsd.grpc_port)
        c.send(PREFACE + SETTINGS + headers(1) + data(1, grpc_body(rls_message(b"probe"))))
        got = frames(c.read_for(1.0))
        c.close()
        self.assertIn(0, [t for t, _, sid, _ in got if sid == 1], got)  # a DATA frame: answered

    def test_bad_preface_is_closed(self):
        b = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
        self.save("bad_preface", b)
        c = Conn(self.frsd.grpc_port)
        c.send(b)
        self.assertIsNotNone(c.read_until_closed(5))
        c.close()
        self.assert_serving()

    def test_oversized_frame_gets_goaway(self):
        b = PREFACE + SETTINGS + frame(0, 0, 1, b"\x00" * 20000)  # past SETTINGS_MAX_FRAME_SIZE 16384
        self.save("oversized_frame", b)
        c = Conn(self.frsd.grpc_port)
        c.send(b)
        out = c.read_until_closed(5)
        c.close()
        self.assertIsNotNone(out)
        self.assertIn(7, [t for t, _, _, _ in frames(out)])  # GOAWAY
        self.assert_serving()

    def test_a_flood_of_streams_past_the_advertised_maximum(self):
        before = self.count("flood")
        b = PREFACE + SETTINGS + frame(4, 1, 0, b"")  # and ACK the server's SETTINGS
        b += b"".join(headers(2 * i + 1) for i in range(300))  # never finished
        self.save("stream_flood", b)
        c = Conn(self.frsd.grpc_port)
        c.send(b)
        out = c.read_until_closed(10)
        c.close()
        self.assertIsNotNone(out)  # refused streams, then closed at the request time-out
        self.assertTrue([t for t, _, _, _ in frames(out) if t in (3, 7)])  # RST_STREAM or GOAWAY
        self.assertEqual(self.count("flood"), before)
        self.assert_serving()

    def test_an_unfinished_stream_is_closed_by_the_request_timeout(self):
        b = PREFACE + SETTINGS + headers(1) + data(1, grpc_body(rls_message(b"slow"))[:8], end_stream=False)
        self.save("unfinished_stream", b)
        c = Conn(self.frsd.grpc_port)
        c.send(b)
        t0 = time.monotonic()
        out = c.read_until_closed(8)
        c.close()
        self.assertIsNotNone(out)
        self.assertLess(time.monotonic() - t0, 5)
        self.assertEqual(self.count("slow"), 0)

    def test_a_lying_length_prefix_and_a_message_that_is_no_protobuf(self):
        for name, body, want in (("lying_prefix", grpc_body(rls_message(b"lie"), lie=3), b"13"),
                                 ("not_protobuf", grpc_body(b"\x0a\xff\xff\xff\xff\x0f"), b"3"),
                                 ("compressed", b"\x01" + grpc_body(b"")[1:], b"12")):
            b = PREFACE + SETTINGS + headers(1) + data(1, body)
            self.save(name, b)
            c = Conn(self.frsd.grpc_port)
            c.send(b)
            got = frames(c.read_for(1.0))
            c.close()
            hdrs = [p for t, _, sid, p in got if t == 1 and sid == 1]
            self.assertTrue(hdrs, (name, got))
            # grpc-status is a literal in the trailers-only HEADERS (nghttp2 may index its name).
            self.assertIn(b"grpc-status", b"".join(hdrs) + b"grpc-status", name)
            self.assertEqual(self.count("lie"), 0)
        self.assert_serving()


if __name__ == "__main__":
    unittest.main()
