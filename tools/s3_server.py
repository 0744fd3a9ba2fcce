#!/usr/bin/env python3
"""The tests' local S3 server (issue 44): moto's S3 on the loopback interface, its requests served
one at a time.

S3 lets exactly one of several racing conditional puts (`If-None-Match: *`, `If-Match`) win: the
bucket-resident commit log stakes every commit on that. moto checks the condition and stores the
object in two steps, so on its threaded server two racing requests can both pass the check. Each
request here runs whole (its body included) under one lock, which makes moto's conditional puts as
atomic as S3's instead of weakening a test that races hosts for one log position. Requests stay
fast enough for tests: moto keeps objects in memory.

Usage: python tools/s3_server.py [--port N]   (0, the default: any free port)
It prints `port N` once it listens, and stops on SIGTERM or SIGINT. Nothing outside the machine is
reached: it binds 127.0.0.1 only.
"""
import argparse
import os
import signal
import threading

from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
from werkzeug.serving import make_server


class Serialized:
    """A WSGI app that runs `app` for one request at a time."""

    def __init__(self, app):
        self.app = app
        self.lock = threading.Lock()

    def __call__(self, environ, start_response):
        with self.lock:
            # (the body is produced under the lock too: a response is the request's whole effect)
            return list(self.app(environ, start_response))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    app = Serialized(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", args.port, app, threaded=True, request_handler=MotoRequestHandler)
    # (moto builds some URLs, such as presigned ones, from this)
    os.environ["MOTO_PORT"] = str(server.server_port)

    def stop(*_):
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"port {server.server_port}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
