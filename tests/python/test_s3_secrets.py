"""Credentials the DuckDB way (issue 44, increment 3): a skade catalog whose warehouse is in a
bucket (`DATA_PATH 's3://...'`) reaches it with the S3 secret DuckDB's secret manager picks for
the URL, as httpfs does: the longest matching SCOPE wins, its ENDPOINT, URL_STYLE and USE_SSL
reach the requests, a wrong KEY_ID is refused with an error naming the object and the secret but
never a credential; without a secret httpfs's s3_* settings stand in, and without either the AWS
environment variables; a secret replaced between transactions takes effect at the next one.

The local S3 server (tools/s3_server.py) refuses every access key but KEY (403
InvalidAccessKeyId), so success or failure shows which credentials a request carried. DuckDB
knows the `s3` secret type and the s3_* settings only with httpfs loaded: PyPI has httpfs for
DuckDB 1.5.5 only, so on 2.0.1 just the AWS environment's tests run."""
import json
import os
import subprocess
import sys
import urllib.request

import duckdb
import pytest

from conftest import EXTENSION, PEERS_ON_PYPI, connect, peer_extension, site_extension, start_s3_server, stop_s3_server

BUCKET = "secrets"
KEY = "SKADEGOODKEYID"
WRONG_KEY = "SKADEWRONGKEYID"
SECRET = "skade-secret-text-7f3a9c1e"  # (the server checks no signature: any secret passes)

HTTPFS = peer_extension("duckdb_extension_httpfs", "httpfs")
# On 1.5.5 a missing httpfs is a failure (make installs it from PyPI), not a skip.
needs_httpfs = pytest.mark.skipif(not PEERS_ON_PYPI and HTTPFS is None,
                                  reason=f"no httpfs extension for DuckDB {duckdb.__version__} on PyPI: "
                                         "no s3 secret type and no s3_* settings")
WORKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sql_worker.py")


@pytest.fixture(scope="module")
def endpoint():
    """`127.0.0.1:<port>` of a server with the bucket, refusing other access keys than KEY."""
    proc, endpoint = start_s3_server("--bucket", BUCKET, "--access-key", KEY)
    yield endpoint
    stop_s3_server(proc)


def served(endpoint, prefix):
    """(method, status) of every request the server answered under `/<BUCKET>/<prefix>/`."""
    with urllib.request.urlopen(f"http://{endpoint}/_skade/requests", timeout=60) as resp:
        return [(r["method"], r["status"]) for r in json.loads(resp.read())
                if r["path"].startswith(f"/{BUCKET}/{prefix}/")]


def with_httpfs():
    con = connect()
    con.execute(f"LOAD '{site_extension('duckdb_extension_httpfs', 'httpfs')}'")
    return con


def create_secret(con, endpoint, name, key=KEY, scope=None, replace=False):
    scope = f", SCOPE '{scope}'" if scope else ""
    con.execute(f"CREATE {'OR REPLACE ' if replace else ''}SECRET {name} (TYPE s3, KEY_ID '{key}', "
                f"SECRET '{SECRET}', REGION 'us-east-1', ENDPOINT '{endpoint}', URL_STYLE 'path', "
                f"USE_SSL false{scope})")


def attach(con, tmp_path, prefix, name="lake"):
    """A local catalog whose warehouse is `s3://<BUCKET>/<prefix>`."""
    con.execute(f"ATTACH '{tmp_path / (name + '.skade')}' AS {name} "
                f"(TYPE skade, DATA_PATH 's3://{BUCKET}/{prefix}')")


def round_trip(con, name="lake"):
    con.execute(f"CREATE TABLE {name}.t (id INTEGER, s VARCHAR)")
    con.execute(f"INSERT INTO {name}.t VALUES (1, 'a'), (2, 'b')")
    return con.execute(f"SELECT id, s FROM {name}.t ORDER BY id").fetchall()


def assert_refused(message, prefix, names=()):
    """An access refusal naming the object (under the warehouse) and `names`, no credential."""
    assert "InvalidAccessKeyId" in message or "access denied" in message.lower(), message
    assert f"s3://{BUCKET}/{prefix}" in message, message
    for name in names:
        assert name in message, message
    for credential in (SECRET, KEY, WRONG_KEY):
        assert credential not in message, message


@needs_httpfs
def test_a_secret_reaches_the_bucket_with_its_endpoint_style_and_ssl(endpoint, tmp_path):
    con = with_httpfs()
    create_secret(con, endpoint, "lake_secret")
    attach(con, tmp_path, "plain")
    assert round_trip(con) == [(1, "a"), (2, "b")]
    # path style over plain HTTP to ENDPOINT: every request reached the server as /bucket/key
    requests = served(endpoint, "plain")
    assert ("PUT", 200) in requests, requests
    assert all(status < 400 for _, status in requests), requests
    # no credential in what DuckDB shows of the lake
    shown = repr(con.execute("SELECT * FROM skade_tables('lake')").fetchall())
    shown += repr(con.execute("SELECT * FROM duckdb_databases() WHERE database_name = 'lake'").fetchall())
    for credential in (SECRET, KEY):
        assert credential not in shown, shown
    con.execute("DETACH lake")
    con.close()


@needs_httpfs
@pytest.mark.parametrize("longest_is_right", [True, False])
def test_the_secret_with_the_longest_matching_scope_is_used(endpoint, tmp_path, longest_is_right):
    # One secret per scope, one of them with a key the server refuses; created in both orders, so
    # only "the longest scope wins" explains both outcomes (not the first or the last created).
    prefix = f"scoped-{longest_is_right}".lower()
    con = with_httpfs()
    bucket_wide = lambda: create_secret(con, endpoint, "bucket_wide", key=WRONG_KEY if longest_is_right else KEY,
                                        scope=f"s3://{BUCKET}")
    deep = lambda: create_secret(con, endpoint, "deep", key=KEY if longest_is_right else WRONG_KEY,
                                 scope=f"s3://{BUCKET}/{prefix}")
    # another bucket's secret, however long its scope, never applies
    create_secret(con, endpoint, "elsewhere", key=WRONG_KEY, scope=f"s3://other-{BUCKET}/{prefix}/and/deeper")
    if longest_is_right:
        deep()
        bucket_wide()
    else:
        bucket_wide()
        deep()
    assert con.execute(f"SELECT name FROM which_secret('s3://{BUCKET}/{prefix}/x', 's3')").fetchall() == [("deep",)]
    attach(con, tmp_path, prefix)
    if longest_is_right:
        assert round_trip(con) == [(1, "a"), (2, "b")]
    else:
        with pytest.raises(duckdb.Error) as refused:
            round_trip(con)
        assert_refused(str(refused.value), prefix, names=["deep"])
    con.close()


@needs_httpfs
def test_a_wrong_key_id_is_refused_naming_the_object_and_secret_never_a_credential(endpoint, tmp_path):
    con = with_httpfs()
    create_secret(con, endpoint, "wrong_key", key=WRONG_KEY)
    with pytest.raises(duckdb.Error) as refused:
        attach(con, tmp_path, "wrong")
        round_trip(con)
    assert_refused(str(refused.value), "wrong", names=["wrong_key"])
    con.close()


@needs_httpfs
def test_httpfs_settings_stand_in_for_a_secret(endpoint, tmp_path):
    def settings(con, key):
        for name, value in [("s3_access_key_id", f"'{key}'"), ("s3_secret_access_key", f"'{SECRET}'"),
                            ("s3_region", "'us-east-1'"), ("s3_endpoint", f"'{endpoint}'"),
                            ("s3_url_style", "'path'"), ("s3_use_ssl", "false")]:
            con.execute(f"SET {name} = {value}")

    con = with_httpfs()
    settings(con, KEY)
    attach(con, tmp_path, "settings")
    assert round_trip(con) == [(1, "a"), (2, "b")]
    assert ("PUT", 200) in served(endpoint, "settings")
    con.close()
    # the settings are what the requests carry: a key the server refuses is refused
    con = with_httpfs()
    settings(con, WRONG_KEY)
    with pytest.raises(duckdb.Error) as refused:
        attach(con, tmp_path, "settings-wrong", name="other")
        round_trip(con, "other")
    assert_refused(str(refused.value), "settings-wrong")
    con.close()


class Worker:
    """A DuckDB process of its own (tests/python/sql_worker.py) with `env` as its environment."""

    def __init__(self, env):
        self.p = subprocess.Popen([sys.executable, WORKER, EXTENSION], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        assert json.loads(self.p.stdout.readline()) == {"ready": True}

    def run(self, sql):
        self.p.stdin.write(json.dumps({"sql": sql}) + "\n")
        self.p.stdin.flush()
        line = self.p.stdout.readline()
        assert line, f"the worker died (exit status {self.p.poll()}): {self.p.stderr.read()}"
        return json.loads(line)

    def sql(self, sql):
        answer = self.run(sql)
        assert "error" not in answer, f"{sql}: {answer}"
        return answer["rows"]

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=60)


def aws_environment(endpoint, key):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(AWS_ACCESS_KEY_ID=key, AWS_SECRET_ACCESS_KEY=SECRET, AWS_REGION="us-east-1",
               AWS_ENDPOINT_URL=f"http://{endpoint}", AWS_ALLOW_HTTP="true")
    return env


@pytest.mark.parametrize("httpfs", [False, pytest.param(True, marks=needs_httpfs)])
def test_without_secret_or_settings_the_aws_environment_is_used(endpoint, tmp_path, httpfs):
    # With httpfs loaded but nothing set, its settings read back their defaults (vhost, SSL):
    # those alone do not replace the environment.
    prefix = f"environment-{httpfs}".lower()
    worker = Worker(aws_environment(endpoint, KEY))
    if httpfs:
        worker.sql(f"LOAD '{site_extension('duckdb_extension_httpfs', 'httpfs')}'")
    worker.sql(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade, DATA_PATH 's3://{BUCKET}/{prefix}')")
    worker.sql("CREATE TABLE lake.t (id INTEGER, s VARCHAR)")
    worker.sql("INSERT INTO lake.t VALUES (1, 'a'), (2, 'b')")
    assert worker.sql("SELECT id, s FROM lake.t ORDER BY id") == [[1, "a"], [2, "b"]]
    worker.close()
    assert ("PUT", 200) in served(endpoint, prefix)
    # the environment's key is what the requests carry: one the server refuses is refused
    worker = Worker(aws_environment(endpoint, WRONG_KEY))
    answers = [worker.run(f"ATTACH '{tmp_path / 'wrong.skade'}' AS lake "
                          f"(TYPE skade, DATA_PATH 's3://{BUCKET}/{prefix}-wrong')")]
    if "error" not in answers[-1]:
        answers.append(worker.run("CREATE TABLE lake.t (id INTEGER)"))
    if "error" not in answers[-1]:
        answers.append(worker.run("INSERT INTO lake.t VALUES (1)"))
    worker.close()
    assert "error" in answers[-1], answers
    assert_refused(answers[-1]["error"], f"{prefix}-wrong", names=["AWS environment"])


@needs_httpfs
def test_a_secret_replaced_between_transactions_takes_effect_at_the_next_one(endpoint, tmp_path):
    con = with_httpfs()
    create_secret(con, endpoint, "rotating")
    attach(con, tmp_path, "rotating")
    assert round_trip(con) == [(1, "a"), (2, "b")]
    create_secret(con, endpoint, "rotating", key=WRONG_KEY, replace=True)
    with pytest.raises(duckdb.Error) as refused:
        con.execute("INSERT INTO lake.t VALUES (3, 'c')")
    assert_refused(str(refused.value), "rotating", names=["rotating"])
    create_secret(con, endpoint, "rotating", replace=True)
    con.execute("INSERT INTO lake.t VALUES (4, 'd')")
    assert con.execute("SELECT id FROM lake.t ORDER BY id").fetchall() == [(1,), (2,), (4,)]
    # a secret dropped and another created in its place: the next transaction uses that one
    con.execute("DROP SECRET rotating")
    create_secret(con, endpoint, "successor", key=WRONG_KEY)
    with pytest.raises(duckdb.Error) as refused:
        con.execute("INSERT INTO lake.t VALUES (5, 'e')")
    assert_refused(str(refused.value), "rotating", names=["successor"])
    create_secret(con, endpoint, "successor", replace=True)
    con.execute("INSERT INTO lake.t VALUES (6, 'f')")
    assert con.execute("SELECT id FROM lake.t ORDER BY id").fetchall() == [(1,), (2,), (4,), (6,)]
    con.close()
