#!/usr/bin/env python3
"""A request-counting HTTP server for no-op proofs: serves DIR on 127.0.0.1:PORT and appends one line per
accepted connection ("conn ...") and one per request ("req ...") to LOG, flushed at once.

usage: countserver.py DIR PORT LOG

Why not the harness's nginx: benchmarks/harness/server.sh runs nginx with `access_log off` (for speed), so it cannot say
whether a run made a request. A no-op run pointed at this server (same files, same sha256/size, only the host:port
of the URLs differs) proves "no request" by the log not growing; haul keeps a file whose hash matches "whatever its
URL", so the URL cannot change the decision. It really serves the files (HTTP/1.1 keep-alive, no Range), so a
haul that did fetch would succeed and still be counted: see the positive control in noop_proof.py.
"""
import functools
import http.server
import sys
import threading

root, port, log_path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
lock = threading.Lock()
log = open(log_path, "a", buffering=1)


def note(line):
    with lock:
        log.write(line + "\n")
        log.flush()


class Handler(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        super().setup()
        note(f"conn {self.client_address[0]}:{self.client_address[1]}")

    def log_request(self, code="-", size="-"):
        note(f"req {self.requestline!r} {code}")

    def log_message(self, format, *args):  # errors etc. go to the log too, never to a terminal
        note("msg " + (format % args))


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


Server(("127.0.0.1", port), functools.partial(Handler, directory=root)).serve_forever()
