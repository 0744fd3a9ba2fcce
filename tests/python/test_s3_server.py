"""The tests' local S3 server (tools/s3_server.py, issue 44) answers conditional puts as S3 does:
of several hosts racing to create one object (`If-None-Match: *`, how a commit wins a log
position), exactly one wins and the others get 412 Precondition Failed, the object holding the
winner's bytes, even with Python switching threads as often as it can; `If-Match` replaces an
object only at the ETag it names. It injects the faults a bucket answers (5xx, SlowDown, delays)
for as many requests as asked, and counts what it served. The bucket lake's tests rest on this."""
import json
import threading
import urllib.error
import urllib.request

from conftest import start_s3_server, stop_s3_server

# A signed request's header: moto answers an anonymous request for a private object 403, as S3 does,
# and checks no signature (and an explicit content type: urllib's default, a form, would be
# parsed away by the server).
SIGNED = {"Authorization": "AWS4-HMAC-SHA256 Credential=test/20261206/us-east-1/s3/aws4_request, "
                           "SignedHeaders=host, Signature=0", "Content-Type": "application/octet-stream"}


def request(endpoint, method, path, data=None, headers=None):
    req = urllib.request.Request(f"http://{endpoint}{path}", data=data, method=method,
                                 headers={**SIGNED, **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            return resp.status, resp.read(), resp.headers.get("ETag")
    except urllib.error.HTTPError as e:
        return e.code, e.read(), None


def race(endpoint, bucket, rounds, contenders):
    assert request(endpoint, "PUT", f"/{bucket}")[0] == 200
    for position in range(rounds):
        results = [None] * contenders
        start = threading.Barrier(contenders)

        def put(i):
            body = f"host {i} ".encode() * 4096  # (large enough to overlap in flight)
            start.wait()
            results[i] = request(endpoint, "PUT", f"/{bucket}/log/{position:020}.batch", body,
                                 {"If-None-Match": "*"})[0]

        threads = [threading.Thread(target=put, args=(i,)) for i in range(contenders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [200] + [412] * (contenders - 1), (position, results)
        winner = results.index(200)
        status, stored, _ = request(endpoint, "GET", f"/{bucket}/log/{position:020}.batch")
        assert status == 200 and stored == f"host {winner} ".encode() * 4096


def test_exactly_one_of_racing_create_if_absent_puts_wins(s3_endpoint):
    race(s3_endpoint, "race", rounds=25, contenders=8)


def test_exactly_one_wins_with_threads_switching_as_often_as_they_can():
    # (moto's own check-then-store lets two win at this interval: the server's lock must not)
    proc, endpoint = start_s3_server("--switch-interval", "1e-6")
    try:
        race(endpoint, "tight", rounds=40, contenders=8)
    finally:
        stop_s3_server(proc)


def test_if_match_replaces_only_the_version_it_names(s3_endpoint):
    assert request(s3_endpoint, "PUT", "/cas")[0] == 200
    status, _, etag = request(s3_endpoint, "PUT", "/cas/checkpoint", b"v1")
    assert status == 200 and etag
    status, _, etag2 = request(s3_endpoint, "PUT", "/cas/checkpoint", b"v2", {"If-Match": etag})
    assert status == 200 and etag2 != etag
    assert request(s3_endpoint, "PUT", "/cas/checkpoint", b"v3", {"If-Match": etag})[0] == 412
    assert request(s3_endpoint, "GET", "/cas/checkpoint")[1] == b"v2"


def control(endpoint, method, what, body=None):
    req = urllib.request.Request(f"http://{endpoint}/_skade/{what}", method=method,
                                 data=None if body is None else json.dumps(body).encode())
    with urllib.request.urlopen(req, timeout=60) as resp:
        return json.loads(resp.read())


def test_faults_fire_for_the_requests_asked_and_requests_are_counted(s3_endpoint):
    assert request(s3_endpoint, "PUT", "/faulty")[0] == 200
    control(s3_endpoint, "DELETE", "requests")
    control(s3_endpoint, "POST", "faults", {"method": "PUT", "prefix": "/faulty/log/", "status": 503,
                                             "code": "SlowDown", "count": 2})
    first = request(s3_endpoint, "PUT", "/faulty/log/1", b"a")
    assert first[0] == 503 and b"<Code>SlowDown</Code>" in first[1]
    assert request(s3_endpoint, "PUT", "/faulty/data/1", b"b")[0] == 200, "another prefix: untouched"
    assert request(s3_endpoint, "GET", "/faulty/data/1")[0] == 200, "another method: untouched"
    assert request(s3_endpoint, "PUT", "/faulty/log/1", b"a")[0] == 503
    assert request(s3_endpoint, "PUT", "/faulty/log/1", b"a")[0] == 200, "two faults asked, two given"
    # an injected 500 with a delay, then nothing left
    control(s3_endpoint, "POST", "faults", {"status": 500, "code": "InternalError", "delay": 0.2})
    assert request(s3_endpoint, "GET", "/faulty/log/1")[0] == 500
    assert request(s3_endpoint, "GET", "/faulty/log/1")[1] == b"a"
    served = control(s3_endpoint, "GET", "requests")
    assert [(r["method"], r["path"], r["status"]) for r in served] == [
        ("PUT", "/faulty/log/1", 503), ("PUT", "/faulty/data/1", 200), ("GET", "/faulty/data/1", 200),
        ("PUT", "/faulty/log/1", 503), ("PUT", "/faulty/log/1", 200), ("GET", "/faulty/log/1", 500),
        ("GET", "/faulty/log/1", 200)]
    assert [r["bytes"] for r in served if r["method"] == "PUT"] == [1, 1, 1, 1]


def test_a_success_fault_stores_nothing(s3_endpoint):
    # (a store that ignores If-None-Match answers a repeated create with success: the bucket log's
    # probe must refuse it, and a 2xx fault is how its test gets one)
    assert request(s3_endpoint, "PUT", "/ignoring")[0] == 200
    control(s3_endpoint, "POST", "faults", {"method": "PUT", "prefix": "/ignoring/probe", "status": 200})
    status, body, etag = request(s3_endpoint, "PUT", "/ignoring/probe", b"x", {"If-None-Match": "*"})
    assert (status, body) == (200, b"") and etag
    assert request(s3_endpoint, "GET", "/ignoring/probe")[0] == 404, "answered as stored, stored nothing"
