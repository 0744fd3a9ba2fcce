"""Shared fixtures: the built extension and DuckDB connections that have loaded it."""
import os
import subprocess
import sys

import duckdb
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cli():
    """The DuckDB CLI of this host: the binary the duckdb-cli package ships (1.5.5; PyPI has no
    2.0.1 CLI, and the path then does not exist), not the package's `bin/duckdb`, a Python wrapper
    around it which a Ctrl-C ends with the session. `make` links it as build/duckdb."""
    try:
        import duckdb_cli
    except ImportError:
        return os.path.join(os.path.dirname(sys.executable), "duckdb-cli-not-installed")
    return os.path.join(os.path.dirname(os.path.abspath(duckdb_cli.__file__)), "duckdb")


DUCKDB_CLI = _cli()

sys.path.insert(0, os.path.join(ROOT, "tools"))
from hosts import REPOSITORY, built_extension, peer_extension  # noqa: E402
from sqllogictest import site_extension  # noqa: E402  (the peers' extension files, from PyPI)

# The skade build for the DuckDB running these tests (make test runs them in each host).
EXTENSION = built_extension()

# DuckDB's iceberg extension (with avro) exists on PyPI for 1.5.5 only; its CLI too. On 1.5.5 a
# missing one is a failure (make installs them), not a skip.
PEERS_ON_PYPI = duckdb.__version__.startswith("1.")
needs_iceberg = pytest.mark.skipif(
    not PEERS_ON_PYPI and peer_extension("duckdb_extension_iceberg", "iceberg") is None,
    reason=f"no iceberg extension for DuckDB {duckdb.__version__} on PyPI")


def connect(path=":memory:"):
    con = duckdb.connect(path, config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    return con


@pytest.fixture
def con():
    c = connect()
    yield c
    c.close()


# The local S3 server (tools/s3_server.py): moto, which make installs in the 1.5.5 host, serves
# both hosts' tests.
S3_SERVER_PYTHON = os.path.join(ROOT, "build", "venv", "bin", "python")


def start_s3_server(*options):
    """A local S3 server (loopback only, in memory) with `options` (see tools/s3_server.py): its
    process and `127.0.0.1:<port>`."""
    proc = subprocess.Popen([S3_SERVER_PYTHON, os.path.join(ROOT, "tools", "s3_server.py"), *options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    line = proc.stdout.readline()
    if not line.startswith("port "):
        proc.kill()
        raise RuntimeError(f"the local S3 server did not start: {proc.stderr.read()}")
    return proc, f"127.0.0.1:{int(line.split()[1])}"


def stop_s3_server(proc):
    proc.terminate()
    proc.wait(timeout=30)


@pytest.fixture(scope="session")
def s3_endpoint():
    """`127.0.0.1:<port>` of a local S3 server for the session."""
    proc, endpoint = start_s3_server()
    yield endpoint
    stop_s3_server(proc)


def s3_control(endpoint, method, what, body=None):
    """The test server's control endpoints (tools/s3_server.py): buckets, faults, the request log."""
    import json
    import urllib.request
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://{endpoint}/_skade/{what}", data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read() or b"null")


def s3_bucket(endpoint, name):
    s3_control(endpoint, "POST", "buckets", {"name": name})
    return name


def s3_requests(endpoint, prefix="/"):
    """(method, path, status) of every request served under `prefix` (`/bucket/...`)."""
    return [(r["method"], r["path"], r["status"]) for r in s3_control(endpoint, "GET", "requests")
            if r["path"].startswith(prefix)]


@pytest.fixture
def s3_env(s3_endpoint, monkeypatch):
    """The AWS environment variables that reach the local server: skade's route when no DuckDB
    secret is given (its clients read them when first made)."""
    for k, v in {"AWS_ACCESS_KEY_ID": "skadetest", "AWS_SECRET_ACCESS_KEY": "skadetestsecret",
                 "AWS_REGION": "us-east-1", "AWS_ENDPOINT_URL": f"http://{s3_endpoint}",
                 "AWS_ALLOW_HTTP": "true"}.items():
        monkeypatch.setenv(k, v)
    return s3_endpoint


def _s3_request(endpoint, method, path):
    import urllib.request
    req = urllib.request.Request(
        f"http://{endpoint}/{path}", method=method,
        headers={"Authorization": "AWS4-HMAC-SHA256 Credential=skadetest/20261206/us-east-1/s3/aws4_request, "
                                  "SignedHeaders=host, Signature=0"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        return resp.read()


def s3_keys(endpoint, bucket, prefix=""):
    """The keys under `prefix` in `bucket`, in order (as any S3 client lists them)."""
    import re
    import urllib.parse
    keys, token = [], None
    while True:
        query = f"list-type=2&prefix={urllib.parse.quote(prefix)}"
        if token:
            query += f"&continuation-token={urllib.parse.quote(token)}"
        body = _s3_request(endpoint, "GET", f"{bucket}?{query}").decode()
        keys += [urllib.parse.unquote(k) for k in re.findall(r"<Key>([^<]*)</Key>", body)]
        token = (re.findall(r"<NextContinuationToken>([^<]*)</NextContinuationToken>", body) or [None])[0]
        if not token:
            return keys


def s3_delete(endpoint, bucket, key):
    _s3_request(endpoint, "DELETE", f"{bucket}/{key}")


def s3_put(endpoint, bucket, key, data):
    """Puts an object as any S3 client would (the server checks no signature, only that there is one)."""
    import urllib.request
    req = urllib.request.Request(
        f"http://{endpoint}/{bucket}/{key}", data=data, method="PUT",
        headers={"Authorization": "AWS4-HMAC-SHA256 Credential=skadetest/20261206/us-east-1/s3/aws4_request, "
                                  "SignedHeaders=host, Signature=0",
                 "Content-Type": "application/octet-stream"})
    with urllib.request.urlopen(req, timeout=60) as resp:
        assert resp.status == 200
