#!/usr/bin/env python3
"""The tests' local S3 server (issue 44): moto's S3 on the loopback interface, its requests served
one at a time, with faults injected and requests counted on request.

S3 lets exactly one of several racing conditional puts (`If-None-Match: *`, `If-Match`) win: the
bucket-resident commit log stakes every commit on that. moto checks the condition and stores the
object in two steps, so on its threaded server two racing requests can both pass the check
(docs/design/object-storage.md measured it). Each request here runs whole (its body included)
under one lock, which makes moto's conditional puts as atomic as S3's instead of weakening a test
that races hosts for one log position. moto keeps objects in memory: requests stay fast.

Control endpoints (JSON; not S3's):
- `POST /_skade/faults` with `{"method": "PUT", "prefix": "/bucket/log/", "status": 503,
  "code": "SlowDown", "count": 2, "delay": 0.5}`: the next `count` matching requests (method and
  path prefix; both optional) wait `delay` seconds (a timeout, for a short client timeout), then
  get `status` with an S3 error body of `code` instead of reaching moto (no `status`: they reach
  it after the delay). A 2xx `status` is a success that stores nothing: an empty body and an
  `ETag`, as a store that ignores a PUT's `If-None-Match` answers (the bucket log's probe must
  refuse such a store). `DELETE /_skade/faults` clears them.
- `POST /_skade/buckets` with `{"name": "b"}`: creates the bucket (tests need no S3 client).
- `GET /_skade/requests`: every request served so far, `{"method", "path", "bytes", "status",
  "sent", "query", "range"}` (`bytes` received, `sent` the answer's body length)
  (tests count requests, never time them); `DELETE /_skade/requests` forgets them.

Usage: python tools/s3_server.py [--port N] [--switch-interval S] [--bucket B]... [--access-key K]
`--bucket` creates a bucket at start. `--access-key` makes every S3 request signed with another
access key id get 403 `InvalidAccessKeyId`, as S3 answers (moto itself accepts any key; the
signature is not checked, so a wrong secret is injected as a `SignatureDoesNotMatch` fault).
`--port 0` (the default) takes any free port; `--switch-interval` sets Python's thread switch
interval (a tiny one makes races between requests likely, for the tests that prove there are
none). It prints `port N` once it listens and stops on SIGTERM or SIGINT. It binds 127.0.0.1
only: nothing outside the machine is reached.
"""
import argparse
import json
import logging
import os
import signal
import sys
import threading
import time
from http import HTTPStatus

from moto.moto_server.werkzeug_app import create_backend_app
from waitress.server import create_server

CONTROL = "/_skade/"


class Server:
    """moto's app, one request at a time, with injected faults and a log of requests."""

    def __init__(self, app, access_key=None):
        self.app = app
        self.access_key = access_key
        self.lock = threading.Lock()
        self.state = threading.Lock()
        self.faults = []
        self.requests = []

    def __call__(self, environ, start_response):
        path = environ.get("PATH_INFO", "")
        if path.startswith(CONTROL):
            return self.control(environ, start_response, path[len(CONTROL):])
        method = environ["REQUEST_METHOD"]
        # (moto reads a key as it was sent, before percent-decoding, from werkzeug's RAW_URI)
        environ.setdefault("RAW_URI", environ.get("REQUEST_URI", path))
        fault = self.take_fault(method, path)
        if not fault and self.access_key and not self.signed_by(environ, self.access_key):
            fault = {"status": 403, "code": "InvalidAccessKeyId",
                     "message": "The AWS Access Key Id you provided does not exist in our records."}
        if fault and fault.get("delay"):
            time.sleep(float(fault["delay"]))  # (outside the lock: other requests go on)
        size = int(environ.get("CONTENT_LENGTH") or 0)
        with self.lock:
            if fault and fault.get("status"):
                environ["wsgi.input"].read(size)  # (the request's body is consumed, as S3 would)
                status = int(fault["status"])
                if 200 <= status < 300:
                    self.log(method, path, size, status, environ, 0)
                    start_response(f"{status} {HTTPStatus(status).phrase}",
                                   [("ETag", '"skade-injected"'), ("Content-Length", "0")])
                    return [b""]
                body = (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{fault.get("code", "InternalError")}'
                        f"</Code><Message>{fault.get('message', 'injected by tools/s3_server.py')}</Message></Error>").encode()
                self.log(method, path, size, status, environ, len(body))
                start_response(f"{status} {HTTPStatus(status).phrase}",
                               [("Content-Type", "application/xml"), ("Content-Length", str(len(body)))])
                return [body]
            answered = []

            def recording(status, headers, exc_info=None):
                answered.append(int(status.split()[0]))
                return start_response(status, headers, exc_info)

            # (the body is produced under the lock too: a response is the request's whole effect)
            body = list(self.app(environ, recording))
            self.log(method, path, size, answered[0] if answered else 0, environ, sum(len(b) for b in body))
            return body

    @staticmethod
    def signed_by(environ, key):
        auth = environ.get("HTTP_AUTHORIZATION", "")
        return f"Credential={key}/" in auth or environ.get("QUERY_STRING", "").find(f"X-Amz-Credential={key}%2F") >= 0

    def take_fault(self, method, path):
        with self.state:
            for fault in self.faults:
                if fault.get("method", method) == method and path.startswith(fault.get("prefix", "")):
                    fault["count"] = fault.get("count", 1) - 1
                    if fault["count"] <= 0:
                        self.faults.remove(fault)
                    return dict(fault)
        return None

    def log(self, method, path, size, status, environ, sent):
        entry = {"method": method, "path": path, "bytes": size, "status": status, "sent": sent,
                 "query": environ.get("QUERY_STRING", ""), "range": environ.get("HTTP_RANGE")}
        with self.state:
            self.requests.append(entry)

    def control(self, environ, start_response, what):
        method = environ["REQUEST_METHOD"]
        with self.state:
            if what == "faults" and method == "POST":
                size = int(environ.get("CONTENT_LENGTH") or 0)
                self.faults.append(json.loads(environ["wsgi.input"].read(size) or b"{}"))
                answer = {"faults": len(self.faults)}
            elif what == "faults" and method == "DELETE":
                self.faults.clear()
                answer = {"faults": 0}
            elif what == "buckets" and method == "POST":
                size = int(environ.get("CONTENT_LENGTH") or 0)
                create_bucket(json.loads(environ["wsgi.input"].read(size))["name"])
                answer = {}
            elif what == "requests" and method == "GET":
                answer = list(self.requests)
            elif what == "requests" and method == "DELETE":
                self.requests.clear()
                answer = []
            else:
                start_response("404 Not Found", [("Content-Length", "0")])
                return [b""]
        body = json.dumps(answer).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]


def create_bucket(name):
    from moto.core import DEFAULT_ACCOUNT_ID
    from moto.s3.models import s3_backends
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["aws"]
    if name not in backend.buckets:
        backend.create_bucket(name, "us-east-1")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--switch-interval", type=float, default=None)
    parser.add_argument("--bucket", action="append", default=[])
    parser.add_argument("--access-key", default=None)
    parser.add_argument("--exit-with-stdin", action="store_true",
                        help="stop when stdin closes (a test binary that dies leaves no server behind)")
    args = parser.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    # S3's own app, not moto's dispatcher: it serves every service and, to find the one a request
    # is for, lists and stats moto's module folders twice per request (most of the server's time)
    app = Server(create_backend_app("s3"), args.access_key)
    for bucket in args.bucket:
        create_bucket(bucket)
    # waitress, not werkzeug's development server: that one closes the connection after every
    # answer (a new connection and thread per request, which S3 does not make clients pay).
    # Requests still run one at a time (the lock above); its threads only read and write sockets.
    # (threads waiting for the lock, or sleeping an injected delay, each hold one: plenty; poll(),
    # not select(), so open keep-alive connections have no 1,024 limit; its "task queue depth"
    # warnings go nowhere: a parent that pipes stderr and never reads it would stall the server)
    logging.getLogger("waitress.queue").setLevel(logging.ERROR)
    server = create_server(app, host="127.0.0.1", port=args.port, threads=64, connection_limit=4000,
                           asyncore_use_poll=True, channel_timeout=600, ident="skade-s3-test")
    # (moto builds some URLs, such as presigned ones, from this)
    os.environ["MOTO_PORT"] = str(server.effective_port)

    def stop(*_):
        # (objects live in memory only: nothing to save; open keep-alive connections would
        # hold waitress's loop until they time out)
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    if args.exit_with_stdin:
        threading.Thread(target=lambda: (sys.stdin.read(), stop()), daemon=True).start()
    print(f"port {server.effective_port}", flush=True)
    server.run()


if __name__ == "__main__":
    main()
