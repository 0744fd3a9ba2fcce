"""The tests' local S3 server (tools/s3_server.py, issue 44) answers conditional puts as S3 does:
of several hosts racing to create one object (`If-None-Match: *`, how a commit wins a log
position), exactly one wins and the others get 412 Precondition Failed, the object holding the
winner's bytes; `If-Match` replaces an object only at the ETag it names. The bucket lake's race
tests rest on this."""
import threading
import urllib.error
import urllib.request


# A signed request's header: moto answers an anonymous request for a private object 403, as S3 does,
# and checks no signature.
# (and an explicit content type: urllib's default, a form, would be parsed away by the server)
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


def test_exactly_one_of_racing_create_if_absent_puts_wins(s3_endpoint):
    assert request(s3_endpoint, "PUT", "/race")[0] == 200
    contenders = 8
    for position in range(25):
        results = [None] * contenders
        start = threading.Barrier(contenders)

        def put(i):
            body = f"host {i} ".encode() * 4096  # (large enough to overlap in flight)
            start.wait()
            results[i] = request(s3_endpoint, "PUT", f"/race/log/{position:020}.batch", body,
                                 {"If-None-Match": "*"})[0]

        threads = [threading.Thread(target=put, args=(i,)) for i in range(contenders)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [200] + [412] * (contenders - 1), (position, results)
        winner = results.index(200)
        status, stored, _ = request(s3_endpoint, "GET", f"/race/log/{position:020}.batch")
        assert status == 200 and stored == f"host {winner} ".encode() * 4096


def test_if_match_replaces_only_the_version_it_names(s3_endpoint):
    assert request(s3_endpoint, "PUT", "/cas")[0] == 200
    status, _, etag = request(s3_endpoint, "PUT", "/cas/checkpoint", b"v1")
    assert status == 200 and etag
    status, _, etag2 = request(s3_endpoint, "PUT", "/cas/checkpoint", b"v2", {"If-Match": etag})
    assert status == 200 and etag2 != etag
    assert request(s3_endpoint, "PUT", "/cas/checkpoint", b"v3", {"If-Match": etag})[0] == 412
    assert request(s3_endpoint, "GET", "/cas/checkpoint")[1] == b"v2"
