"""The Iceberg REST catalog server (issue 45, docs/design/rest-catalog.md), reading: PyIceberg 0.12
and DuckDB's iceberg extension find and read a lake's tables through `skade_serve`, rows identical
to skade's; its tokens, its errors and its lifecycle."""
import base64
import json
import socket
import time
import urllib.error
import urllib.request

import pytest
from pyiceberg.catalog import load_catalog
from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError, UnauthorizedError

from conftest import PEERS_ON_PYPI, connect, needs_iceberg, site_extension


@pytest.fixture
def lake(tmp_path):
    con = connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    # a keyed table after a delete, an update and an upsert (position deletes)
    con.execute("CREATE TABLE lake.orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DOUBLE, day DATE)")
    con.execute("INSERT INTO lake.orders SELECT i, 'c' || (i % 17), i * 0.25, DATE '2024-01-01' + (i % 40)::INTEGER "
                "FROM range(3000) r(i)")
    con.execute("DELETE FROM lake.orders WHERE id % 9 = 0")
    con.execute("UPDATE lake.orders SET amount = -amount WHERE id < 500")
    con.execute("INSERT OR REPLACE INTO lake.orders SELECT i, 'new', 1.5, NULL FROM range(2900, 3100) r(i)")
    # a partitioned table in another schema, with nested and timestamp columns
    con.execute("CREATE SCHEMA lake.sales")
    con.execute("CREATE TABLE lake.sales.events (id INTEGER, ts TIMESTAMPTZ, tags VARCHAR[], "
                "point STRUCT(x DOUBLE, y DOUBLE)) PARTITIONED BY (month(ts))")
    con.execute("INSERT INTO lake.sales.events SELECT i, TIMESTAMPTZ '2024-01-01 00:00:00+00' + INTERVAL (i) HOUR, "
                "['t' || (i % 3)], {'x': i, 'y': -i} FROM range(2000) r(i)")
    con.execute("CREATE VIEW lake.sales.recent AS SELECT * FROM lake.sales.events WHERE id > 1000")
    yield con
    con.close()


def serve(con, **options):
    args = "".join(f", {k} := '{v}'" if isinstance(v, str) else f", {k} := {v}" for k, v in options.items())
    return con.execute(f"CALL skade_serve('lake', port := 0{args})").fetchone()[0]


def http(method, url, body=None, headers=None):
    """(status, parsed JSON or None) of one request."""
    request = urllib.request.Request(url, data=body, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            data = r.read()
            return r.status, json.loads(data) if data else None
    except urllib.error.HTTPError as e:
        data = e.read()
        return e.code, json.loads(data) if data else None


def iceberg_peer(address, auth):
    """A DuckDB with its iceberg extension (and httpfs, which it needs for any REST catalog),
    attached to the server as `ice`. Its default schema is `default`: a lake's `main` is named."""
    peer = connect()
    for name in ("httpfs", "avro", "iceberg"):
        peer.execute(f"LOAD '{site_extension('duckdb_extension_' + name, name)}'")
    peer.execute(f"ATTACH '' AS ice (TYPE iceberg, ENDPOINT '{address}', {auth}, DEFAULT_SCHEMA 'main')")
    return peer


def skade_rows(con, table, key):
    return con.execute(f"SELECT * FROM lake.{table}").to_arrow_table().sort_by([(key, "ascending")])


def test_pyiceberg_finds_and_reads_every_table(lake):
    address = serve(lake)
    catalog = load_catalog("lake", type="rest", uri=address)
    assert sorted(catalog.list_namespaces()) == [("main",), ("sales",)]
    assert catalog.list_tables("main") == [("main", "orders")]
    assert catalog.list_tables("sales") == [("sales", "events")]  # (a view is not a table here)
    assert catalog.namespace_exists("sales") and not catalog.namespace_exists("nope")
    assert catalog.table_exists("main.orders") and not catalog.table_exists("main.nope")
    for table, key in [("main.orders", "id"), ("sales.events", "id")]:
        theirs = catalog.load_table(table).scan().to_arrow().sort_by([(key, "ascending")])
        ours = skade_rows(lake, table, key)
        assert theirs.num_rows == ours.num_rows > 1000
        for name in ours.column_names:
            assert theirs.column(name).to_pylist() == ours.column(name).to_pylist(), (table, name)
    # what load returns is the table as skade holds it: its current metadata file
    loaded = catalog.load_table("main.orders")
    location = lake.execute("SELECT metadata_location FROM skade_tables('lake') WHERE table_name = 'orders'").fetchone()[0]
    assert loaded.metadata_location == location
    with pytest.raises(NoSuchTableError):
        catalog.load_table("main.nope")
    with pytest.raises(NoSuchNamespaceError):
        catalog.list_tables("nope")


@needs_iceberg
def test_duckdb_iceberg_extension_reads_through_the_server(lake):
    address = serve(lake, token="s3cret")
    peer = iceberg_peer(address, "TOKEN 's3cret'")
    try:
        tables = sorted((s, t) for _, s, t, *_ in peer.execute("SHOW ALL TABLES").fetchall())
        assert tables == [("main", "orders"), ("sales", "events")]
        for table in ("main.orders", "sales.events"):
            assert sorted(peer.execute(f"SELECT * FROM ice.{table}").fetchall()) == \
                sorted(lake.execute(f"SELECT * FROM lake.{table}").fetchall()), table
        with pytest.raises(Exception, match="401|Unauthorized"):
            peer.execute(f"ATTACH '' AS bad (TYPE iceberg, ENDPOINT '{address}', TOKEN 'wrong')")
            peer.execute("SHOW ALL TABLES")
    finally:
        peer.close()


def test_a_token_is_required_when_configured(lake):
    address = serve(lake, token="s3cret")
    status, body = http("GET", address + "/v1/config")
    assert status == 401 and body["error"]["type"] == "NotAuthorizedException"
    status, body = http("GET", address + "/v1/namespaces", headers={"Authorization": "Bearer wrong"})
    assert status == 401 and "not this server's" in body["error"]["message"]
    for header in ["Bearer s3cret", "BEARER s3cret", "bearer  s3cret"]:  # (the scheme in any case)
        status, body = http("GET", address + "/v1/namespaces", headers={"Authorization": header})
        assert status == 200 and body["namespaces"] == [["main"], ["sales"]], header
    with pytest.raises(UnauthorizedError):
        load_catalog("lake", type="rest", uri=address, token="wrong")
    catalog = load_catalog("lake", type="rest", uri=address, token="s3cret")
    assert catalog.load_table("main.orders").scan().to_arrow().num_rows > 1000
    # no client credentials were configured: the token route refuses every client
    form = b"grant_type=client_credentials&client_id=a&client_secret=b"
    status, body = http("POST", address + "/v1/oauth/tokens", form,
                        {"Content-Type": "application/x-www-form-urlencoded"})
    assert status == 401 and body["error"] == "invalid_client"


def test_client_credentials_are_exchanged_for_the_token(lake):
    address = serve(lake, client_id="etl", client_secret="pw")
    form_type = {"Content-Type": "application/x-www-form-urlencoded"}
    # as PyIceberg sends them (form fields) and as DuckDB does (Basic auth)
    status, body = http("POST", address + "/v1/oauth/tokens",
                        b"grant_type=client_credentials&client_id=etl&client_secret=pw&scope=catalog", form_type)
    assert status == 200 and body["token_type"] == "bearer" and body["access_token"]
    token = body["access_token"]
    basic = base64.b64encode(b"etl:pw").decode()
    status, body = http("POST", address + "/v1/oauth/tokens", b"grant_type=client_credentials&scope=PRINCIPAL_ROLE:ALL",
                        {**form_type, "Authorization": f"Basic {basic}"})
    assert status == 200 and body["access_token"] == token
    for form in [b"grant_type=client_credentials&client_id=etl&client_secret=wrong",
                 b"grant_type=client_credentials&client_id=other&client_secret=pw"]:
        status, body = http("POST", address + "/v1/oauth/tokens", form, form_type)
        assert status == 401 and body["error"] == "invalid_client", form
    status, body = http("POST", address + "/v1/oauth/tokens", b"grant_type=password&username=x", form_type)
    assert status == 400 and body["error"] == "unsupported_grant_type"
    status, body = http("POST", address + "/v1/oauth/tokens", b'{"json": true}', {"Content-Type": "application/json"})
    assert status == 400 and body["error"] == "invalid_request"
    catalog = load_catalog("lake", type="rest", uri=address, credential="etl:pw")
    assert catalog.list_tables("main") == [("main", "orders")]
    with pytest.raises(Exception):
        load_catalog("lake", type="rest", uri=address, credential="etl:wrong")


@needs_iceberg
def test_duckdb_iceberg_extension_uses_client_credentials(lake):
    address = serve(lake, client_id="etl", client_secret="pw")
    peer = iceberg_peer(address, "CLIENT_ID 'etl', CLIENT_SECRET 'pw'")
    try:
        assert peer.execute("SELECT count(*) FROM ice.sales.events").fetchone()[0] == 2000
    finally:
        peer.close()


def test_bad_requests_get_the_protocols_errors(lake):
    address = serve(lake)
    cases = [
        ("/v1/namespaces/nope", 404, "NoSuchNamespaceException"),
        ("/v1/namespaces/nope/tables", 404, "NoSuchNamespaceException"),
        ("/v1/namespaces/main/tables/nope", 404, "NoSuchTableException"),
        ("/v1/namespaces/sales/tables/recent", 404, "NoSuchTableException"),  # a view
        # names no schema or table can have do not exist (existence checks answer False)
        ("/v1/namespaces/sales%1Fdeeper", 404, "NoSuchNamespaceException"),  # two levels
        ("/v1/namespaces/%2E%2E/tables", 404, "NoSuchNamespaceException"),  # ..
        ("/v1/namespaces/main/tables/a%2Fb", 404, "NoSuchTableException"),  # a path separator
        ("/v1/namespaces/main/tables/%2E%2E", 404, "NoSuchTableException"),
        ("/v1/namespaces/main%00/tables", 404, "NoSuchNamespaceException"),  # a control character
        ("/v1/namespaces/" + "x" * 300, 404, "NoSuchNamespaceException"),
        ("/v1/namespaces?parent=main", 200, None),  # a skade schema has no children
        ("/v1/namespaces?parent=nope", 404, "NoSuchNamespaceException"),
        ("/v1/namespaces/%FF", 400, "BadRequestException"),  # not UTF-8: axum's rejection, in the model
        ("/v1/no/such/route", 404, "NotFoundException"),
    ]
    for path, status, kind in cases:
        got, body = http("GET", address + path)
        if kind is None:
            assert (got, body) == (status, {"namespaces": [], "next-page-token": None}), path
            continue
        assert (got, body["error"]["type"], body["error"]["code"]) == (status, kind, status), path
        assert "Traceback" not in body["error"]["message"] and "/tmp" not in body["error"]["message"], path
    catalog = load_catalog("lake", type="rest", uri=address)
    assert not catalog.namespace_exists("sales.deeper") and not catalog.table_exists("main." + "t" * 300)
    assert catalog.list_namespaces("main") == []
    # a method not served: 405, in the error model (DuckDB's iceberg extension shows its message)
    got, body = http("PUT", address + "/v1/namespaces/main")
    assert got == 405 and body["error"]["code"] == 405 and "PUT" in body["error"]["message"]
    # a commit naming a table no table can be is refused as such
    got, body = http("POST", address + "/v1/namespaces/main/tables/%2E%2E", b'{"requirements": [], "updates": []}',
                     {"Content-Type": "application/json"})
    assert got == 400 and body["error"]["type"] == "BadRequestException"
    # HEAD: 204 or 404, no body
    assert http("HEAD", address + "/v1/namespaces/main")[0] == 204
    assert http("HEAD", address + "/v1/namespaces/main/tables/orders")[0] == 204
    assert http("HEAD", address + "/v1/namespaces/main/tables/nope")[0] == 404
    # a body over the limit is refused once the limit is passed, before the rest is read (here the
    # client stops one byte past the limit and reads the answer: one sending all of it may see its
    # connection closed first)
    host, port = address.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(b"POST /v1/oauth/tokens HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\n"
                  + f"Content-Length: {17 << 20}\r\n\r\n".encode() + b"x" * ((16 << 20) + 1))
        assert s.recv(4096).split(b"\r\n", 1)[0] == b"HTTP/1.1 413 Payload Too Large"
    # the config lists the routes served, and nothing a client would write through
    got, body = http("GET", address + "/v1/config?warehouse=anything")
    assert got == 200 and body["defaults"] == {} and body["overrides"] == {}
    assert "GET /v1/{prefix}/namespaces/{namespace}/tables/{table}" in body["endpoints"]


def test_servers_are_listed_stopped_and_end_with_their_lake(lake, tmp_path):
    address = serve(lake)
    http("GET", address + "/v1/namespaces")
    http("GET", address + "/v1/namespaces/nope")
    row = lake.execute("SELECT address, lake, token_required, requests, errors FROM skade_servers() "
                       "WHERE address = ?", [address]).fetchone()
    assert row == (address, "lake", False, 2, 1)
    assert lake.execute("SELECT * FROM skade_serve_stop(?)", [address]).fetchone() == (1,)
    assert lake.execute("SELECT count(*) FROM skade_servers() WHERE address = ?", [address]).fetchone() == (0,)
    port = int(address.rsplit(":", 1)[1])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    # a server ends when its lake is detached
    address = serve(lake)
    lake.execute("DETACH lake")
    deadline = time.time() + 5
    while time.time() < deadline and lake.execute("SELECT count(*) FROM skade_servers()").fetchone()[0]:
        time.sleep(0.05)
    assert lake.execute("SELECT count(*) FROM skade_servers()").fetchone()[0] == 0
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", int(address.rsplit(":", 1)[1])), timeout=2).close()


def test_bad_serve_arguments_are_refused_clearly(lake):
    address = serve(lake)
    port = int(address.rsplit(":", 1)[1])
    with pytest.raises(Exception, match=f"cannot listen on 127.0.0.1:{port}"):
        lake.execute(f"CALL skade_serve('lake', port := {port})")
    with pytest.raises(Exception, match="not a TCP port"):
        lake.execute("CALL skade_serve('lake', port := 70000)")
    with pytest.raises(Exception, match="client_id and client_secret go together"):
        lake.execute("CALL skade_serve('lake', port := 0, client_id := 'x')")
    for token in ["", "two words", "pässwörd", " "]:
        with pytest.raises(Exception, match="token must be visible ASCII"):
            lake.execute(f"CALL skade_serve('lake', port := 0, token := '{token}')")
    with pytest.raises(Exception, match="nope"):
        lake.execute("CALL skade_serve('nope', port := 0)")
    assert lake.execute("SELECT count(*) FROM skade_servers()").fetchone() == (1,)
    lake.execute("SELECT * FROM skade_serve_stop('lake')")


# ---- commits (increment 3) ------------------------------------------------------------------

@pytest.fixture
def plain(tmp_path):
    """A lake with a table without a key, served."""
    con = connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.events (id BIGINT, kind VARCHAR, amount DOUBLE)")
    con.execute("INSERT INTO lake.events SELECT i, 'k' || (i % 3), i * 1.5 FROM range(100) r(i)")
    address = serve(con)
    yield con, address
    con.close()


def arrow_rows(ids, kind="rest"):
    import pyarrow as pa
    return pa.table({"id": pa.array(ids, pa.int64()), "kind": pa.array([kind] * len(ids), pa.string()),
                     "amount": pa.array([float(i) for i in ids], pa.float64())})


def test_pyiceberg_appends_land_as_skade_commits(plain):
    con, address = plain
    con.execute("CALL skade_create_consumer('lake', 'billing', 'events')")
    table = load_catalog("lake", type="rest", uri=address).load_table("main.events")
    table.append(arrow_rows(list(range(1000, 1010))))
    assert con.execute("SELECT count(*), sum(id) FILTER (WHERE kind = 'rest') FROM lake.events").fetchone() == \
        (110, sum(range(1000, 1010)))
    # a commit of its own, naming the client, gapless with DuckDB's
    seq, operation, actor = con.execute(
        "SELECT commit_seq, operation, actor FROM skade_commits_since('lake', 0) ORDER BY commit_seq DESC LIMIT 1"
    ).fetchone()
    assert (operation, actor) == ("append", "rest:127.0.0.1")
    seqs = [r[0] for r in con.execute("SELECT commit_seq FROM skade_commits_since('lake', 0) ORDER BY 1").fetchall()]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    # the consumer receives the client's rows, exactly once
    got = con.execute("SELECT _change_type, id FROM skade_consume('lake', 'billing') ORDER BY id").fetchall()
    assert got == [("INSERT", i) for i in range(1000, 1010)]
    assert con.execute("SELECT count(*) FROM skade_consume('lake', 'billing')").fetchone() == (0,)
    # DuckDB commits on top of it, and the client sees that at its next load
    con.execute("INSERT INTO lake.events VALUES (5000, 'duck', 1)")
    table = load_catalog("lake", type="rest", uri=address).load_table("main.events")
    assert table.scan().to_arrow().num_rows == 111
    row = con.execute("SELECT requests > 0, commits, errors FROM skade_servers()").fetchone()
    assert row == (True, 1, 0)


def test_pyiceberg_overwrite_and_delete_read_back_identically(plain):
    from pyiceberg.expressions import EqualTo, LessThan
    con, address = plain
    con.execute("CALL skade_create_consumer('lake', 'audit', 'events')")
    catalog = load_catalog("lake", type="rest", uri=address)
    table = catalog.load_table("main.events")
    table.delete(LessThan("id", 10))                          # copy-on-write: a rewrite of the file
    table = catalog.load_table("main.events")
    table.overwrite(arrow_rows([7, 8, 9], "over"), overwrite_filter=EqualTo("kind", "k1"))  # delete + append
    theirs = sorted(catalog.load_table("main.events").scan().to_arrow().to_pylist(), key=lambda r: (r["id"], r["kind"]))
    ours = sorted((dict(zip(("id", "kind", "amount"), r)) for r in con.execute("FROM lake.events").fetchall()),
                  key=lambda r: (r["id"], r["kind"]))
    assert theirs == ours
    assert not any(r["kind"] == "k1" for r in ours) and {7, 8, 9} <= {r["id"] for r in ours if r["kind"] == "over"}
    # the consumer nets the client's commits into the rows that changed
    changes = con.execute("SELECT _change_type, count(*) FROM skade_consume('lake', 'audit') GROUP BY 1 ORDER BY 1")
    got = dict(changes.fetchall())
    deleted = 100 - sum(1 for r in ours if r["kind"] != "over")
    assert got.get("INSERT") == 3 and got.get("DELETE", 0) >= deleted


def test_concurrent_rest_appends_all_land(plain):
    import threading
    con, address = plain
    errors = []

    def client(k):
        try:
            catalog = load_catalog(f"c{k}", type="rest", uri=address)
            for attempt in range(20):
                try:
                    catalog.load_table("main.events").append(arrow_rows([10_000 + k], f"c{k}"))
                    return
                except Exception as e:  # a 409 after PyIceberg's own retries: reload, again
                    if "CommitFailed" not in type(e).__name__ and "409" not in str(e):
                        raise
            raise RuntimeError("never landed")
        except Exception as e:
            errors.append(repr(e))

    threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert errors == []
    assert con.execute("SELECT count(*) FROM lake.events WHERE id >= 10000").fetchone() == (8,)


def test_a_rest_commit_on_a_stale_base_is_a_conflict(plain):
    con, address = plain
    catalog = load_catalog("lake", type="rest", uri=address)
    stale = catalog.load_table("main.events")
    snapshot = stale.metadata.current_snapshot_id
    con.execute("INSERT INTO lake.events VALUES (777, 'duck', 7)")   # DuckDB commits meanwhile
    body = json.dumps({"requirements": [{"type": "assert-ref-snapshot-id", "ref": "main", "snapshot-id": snapshot}],
                       "updates": [{"action": "set-properties", "updates": {"x": "1"}}]}).encode()
    status, answer = http("POST", address + "/v1/namespaces/main/tables/events", body,
                          {"Content-Type": "application/json"})
    assert status == 409 and answer["error"]["type"] == "CommitFailedException"
    # and PyIceberg's append on the stale object retries on the new head, landing over DuckDB's row
    stale.append(arrow_rows([778]))
    assert con.execute("SELECT count(*) FROM lake.events WHERE id IN (777, 778)").fetchone() == (2,)


def test_commits_that_are_not_served_are_refused_whole(plain, tmp_path):
    con, address = plain
    before = con.execute("SELECT metadata_location FROM skade_tables('lake') WHERE table_name = 'events'").fetchone()
    post = lambda table, body: http("POST", address + f"/v1/namespaces/main/tables/{table}",
                                    body if isinstance(body, bytes) else json.dumps(body).encode(),
                                    {"Content-Type": "application/json"})
    status, answer = post("events", b"{not json")
    assert status == 400 and answer["error"]["type"] == "BadRequestException"
    status, answer = post("events", {"requirements": [], "updates": [{"action": "no-such-update"}]})
    assert status == 400
    status, answer = post("events", {"requirements": [], "updates": [
        {"action": "add-schema", "schema": {"type": "struct", "schema-id": 1, "fields": [
            {"id": 1, "name": "id", "required": False, "type": "string"}]}},
        {"action": "set-current-schema", "schema-id": -1}]})
    assert status == 400 and "cannot change from long to string" in answer["error"]["message"]
    status, answer = post("events", {"requirements": [], "updates": [
        {"action": "set-snapshot-ref", "ref-name": "audit", "type": "tag", "snapshot-id": 1}]})
    assert status == 406 and "a ref other than main" in answer["error"]["message"]
    # a snapshot whose manifest list lies outside the table's location
    _, loaded = http("GET", address + "/v1/namespaces/main/tables/events")
    metadata = loaded["metadata"]
    status, answer = post("events", {"requirements": [], "updates": [{"action": "add-snapshot", "snapshot": {
        "snapshot-id": 99 << 40, "parent-snapshot-id": metadata["current-snapshot-id"],
        "sequence-number": metadata["last-sequence-number"] + 1, "timestamp-ms": int(time.time() * 1000) + 1000,
        "manifest-list": str(tmp_path / "elsewhere.avro"), "summary": {"operation": "append"}, "schema-id": 0}},
        {"action": "set-snapshot-ref", "ref-name": "main", "type": "branch", "snapshot-id": 99 << 40}]})
    assert status == 400 and "not under the table's location" in answer["error"]["message"]
    status, answer = post("nope", {"requirements": [], "updates": []})
    assert status == 404 and answer["error"]["type"] == "NoSuchTableException"
    # a keyed table: its key is checked by DuckDB's writes only, for now
    con.execute("CREATE TABLE lake.kv (k BIGINT PRIMARY KEY, v VARCHAR)")
    con.execute("INSERT INTO lake.kv VALUES (1, 'a')")
    import pyarrow as pa
    kv = load_catalog("lake", type="rest", uri=address).load_table("main.kv")
    with pytest.raises(Exception, match="PRIMARY KEY"):
        schema = pa.schema([pa.field("k", pa.int64(), nullable=False), pa.field("v", pa.string())])
        kv.append(pa.table({"k": [1], "v": ["dup"]}, schema=schema))
    assert con.execute("SELECT * FROM lake.kv").fetchall() == [(1, "a")]
    after = con.execute("SELECT metadata_location FROM skade_tables('lake') WHERE table_name = 'events'").fetchone()
    assert before == after  # nothing of the refused commits landed


@needs_iceberg
def test_duckdb_iceberg_extension_inserts_deletes_and_updates_through_the_server(plain):
    con, address = plain
    peer = iceberg_peer(address, "AUTHORIZATION_TYPE 'none'")
    try:
        peer.execute("INSERT INTO ice.main.events VALUES (2000, 'ice', 2), (2001, 'ice', 3)")
        peer.execute("DELETE FROM ice.main.events WHERE id < 5")
        peer.execute("UPDATE ice.main.events SET amount = -1 WHERE id = 50")
        ours = sorted(con.execute("FROM lake.events").fetchall())
        assert ours == sorted(peer.execute("FROM ice.main.events").fetchall())
        assert (2000, "ice", 2.0) in ours and not any(r[0] < 5 for r in ours)
        assert [r for r in ours if r[0] == 50] == [(50, "k2", -1.0)]
    finally:
        peer.close()


# ---- namespace and table DDL (increment 2, in part) -----------------------------------------

def test_pyiceberg_namespace_and_table_ddl(plain):
    from pyiceberg.exceptions import NamespaceAlreadyExistsError, NamespaceNotEmptyError, NoSuchTableError
    con, address = plain
    catalog = load_catalog("lake", type="rest", uri=address)
    catalog.create_namespace("ops")
    assert ("ops",) in catalog.list_namespaces()
    assert con.execute("SELECT count(*) FROM duckdb_schemas() WHERE database_name = 'lake' AND schema_name = 'ops'"
                       ).fetchone() == (1,)
    with pytest.raises(NamespaceAlreadyExistsError):
        catalog.create_namespace("OPS")  # (names match case-insensitively, as in DuckDB)
    # namespace properties: kept in the schema's record, each change a skade commit
    catalog.create_namespace("withprops", {"owner": "me", "team": "ops"})
    assert catalog.load_namespace_properties("withprops") == {"owner": "me", "team": "ops"}
    summary = catalog.update_namespace_properties("withprops", removals={"team", "b"}, updates={"tier": "gold"})
    assert (summary.removed, summary.missing, summary.updated) == (["team"], ["b"], ["tier"])
    con.execute("INSERT INTO lake.events VALUES (1, 'x', 1)")   # (DuckDB's commits leave them be)
    assert load_catalog("again", type="rest", uri=address).load_namespace_properties("withprops") == \
        {"owner": "me", "tier": "gold"}
    status, body = http("POST", address + "/v1/namespaces/withprops/properties",
                        json.dumps({"removals": ["owner"], "updates": {"owner": "x"}}).encode(),
                        {"Content-Type": "application/json"})
    assert status == 422
    summary = catalog.update_namespace_properties("ops", removals={"a", "b"})
    assert (summary.removed, sorted(summary.missing), summary.updated) == ([], ["a", "b"], [])
    con.execute("CREATE TABLE lake.ops.t AS SELECT 1 AS x")
    with pytest.raises(NamespaceNotEmptyError):
        catalog.drop_namespace("ops")
    # rename within the namespace; into another one is refused
    catalog.rename_table("ops.t", "ops.u")
    assert con.execute("SELECT * FROM lake.ops.u").fetchall() == [(1,)]
    with pytest.raises(Exception, match="within its schema"):
        catalog.rename_table("ops.u", "main.u")
    catalog.drop_table("ops.u")
    with pytest.raises(NoSuchTableError):
        catalog.drop_table("ops.u")
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE schema_name = 'ops'").fetchone() == (0,)
    catalog.drop_namespace("ops")
    assert ("ops",) not in catalog.list_namespaces()
    # each a skade commit naming the client
    actors = {r[0] for r in con.execute("SELECT actor FROM skade_commits_since('lake', 0)").fetchall()}
    assert "rest:127.0.0.1" in actors


@needs_iceberg
def test_duckdb_iceberg_extension_creates_schemas_and_drops_tables(plain):
    con, address = plain
    con.execute("CREATE TABLE lake.gone AS SELECT 1 AS x")
    peer = iceberg_peer(address, "AUTHORIZATION_TYPE 'none'")
    try:
        peer.execute("CREATE SCHEMA ice.staging")
        peer.execute("DROP TABLE ice.main.gone")
    finally:
        peer.close()
    assert con.execute("SELECT count(*) FROM duckdb_schemas() WHERE database_name = 'lake' AND schema_name = 'staging'"
                       ).fetchone() == (1,)
    assert con.execute("SELECT count(*) FROM duckdb_tables() WHERE table_name = 'gone'").fetchone() == (0,)


# ---- what a client's commit may not do (review of the commit path) -------------------------

def tampered(catalog, hook):
    """`catalog` whose commit requests' JSON bodies pass through hook(body) first."""
    session = catalog._session
    post = session.post

    def tampering(url, data=None, **kw):
        if "/tables/" in url and data:
            data = json.dumps(hook(json.loads(data))).encode()
        return post(url, data=data, **kw)

    session.post = tampering
    return catalog


def test_a_consumer_receives_every_snapshot_of_a_commit_it_starts_with(plain):
    """PyIceberg's overwrite is one commit of two snapshots (a delete, then an append): the first
    pending commit of a consumer, its rows must all arrive, as a copy of the table shows."""
    from pyiceberg.expressions import EqualTo
    con, address = plain
    con.execute("CALL skade_create_consumer('lake', 'mirror', 'events')")
    before = {r[0]: r for r in con.execute("FROM lake.events").fetchall()}
    table = load_catalog("lake", type="rest", uri=address).load_table("main.events")
    table.overwrite(arrow_rows([100, 101], "new"), overwrite_filter=EqualTo("kind", "k1"))
    copy = dict(before)
    for kind, row in [(r[0], r[1:]) for r in con.execute(
            "SELECT _change_type, id, kind, amount FROM skade_consume('lake', 'mirror')").fetchall()]:
        if kind == "DELETE":
            del copy[row[0]]
        else:
            copy[row[0]] = row
    assert sorted(copy.values()) == sorted(con.execute("FROM lake.events").fetchall())
    assert not any(r[1] == "k1" for r in copy.values())


def test_dangerous_updates_are_refused_and_leave_nothing(plain, tmp_path):
    import pyarrow as pa
    from pyiceberg.io.pyarrow import PyArrowFileIO
    from pyiceberg.manifest import read_manifest_list, write_manifest_list
    con, address = plain
    location = lambda t: con.execute(
        f"SELECT metadata_location FROM skade_tables('lake') WHERE table_name = '{t}'").fetchone()[0]
    post = lambda body: http("POST", address + "/v1/namespaces/main/tables/events", json.dumps(body).encode(),
                             {"Content-Type": "application/json"})
    first = con.execute("SELECT min(snapshot_id) FROM skade_snapshots('lake.events')").fetchone()[0]
    con.execute("INSERT INTO lake.events VALUES (500, 'duck', 5)")
    before = location("events")
    # main moved back to an older snapshot (a rollback): rows would vanish with no change
    status, body = post({"updates": [{"action": "set-snapshot-ref", "ref-name": "main", "type": "branch",
                                      "snapshot-id": first}]})
    assert status == 406 and "rollback" in body["error"]["message"]
    # main as a tag, and skade's own properties
    status, _ = post({"updates": [{"action": "set-snapshot-ref", "ref-name": "main", "type": "tag",
                                   "snapshot-id": first}]})
    assert status == 406
    status, body = post({"updates": [{"action": "set-properties", "updates": {"skade.duckdb-types": "x"}}]})
    assert status == 406 and "skade's own properties" in body["error"]["message"]
    io = PyArrowFileIO()
    catalog = load_catalog("lake", type="rest", uri=address)
    # a snapshot listing another table's manifest (whose files expiry of this table would remove)
    con.execute("CREATE TABLE lake.victim AS SELECT 1 AS id")
    victim = catalog.load_table("main.victim").metadata.current_snapshot()
    foreign = list(read_manifest_list(io.new_input(victim.manifest_list)))
    root = before.rsplit("/metadata/", 1)[0]

    def add_foreign(body):
        for u in body["updates"]:
            if u["action"] == "add-snapshot":
                s = u["snapshot"]
                mine = list(read_manifest_list(io.new_input(s["manifest-list"])))
                path = f"{root}/metadata/snap-evil-{s['snapshot-id']}.avro"
                with write_manifest_list(2, io.new_output(path), s["snapshot-id"], s.get("parent-snapshot-id"),
                                         s["sequence-number"], "deflate") as w:
                    w.add_manifests(mine + foreign)
                s["manifest-list"] = path
        return body

    with pytest.raises(Exception, match="not under the table's location"):
        tampered(load_catalog("evil", type="rest", uri=address), add_foreign).load_table("main.events").append(
            arrow_rows([600]))
    # an append that is a delete in disguise, a replace, a snapshot from the future
    def relabel(operation):
        def hook(body):
            for u in body["updates"]:
                if u["action"] == "add-snapshot":
                    u["snapshot"]["summary"]["operation"] = operation
            return body
        return hook

    from pyiceberg.expressions import EqualTo
    with pytest.raises(Exception, match="says it appends, yet it removes rows"):
        tampered(load_catalog("e2", type="rest", uri=address), relabel("append")).load_table("main.events").delete(
            EqualTo("kind", "k2"))
    with pytest.raises(Exception, match="replace snapshot"):
        tampered(load_catalog("e3", type="rest", uri=address), relabel("replace")).load_table("main.events").append(
            arrow_rows([601]))

    def future(body):
        for u in body["updates"]:
            if u["action"] == "add-snapshot":
                u["snapshot"]["timestamp-ms"] += 3600 * 1000
        return body

    def small_id(body):
        for u in body["updates"]:
            if u["action"] == "add-snapshot":
                u["snapshot"]["snapshot-id"] = 7
            if u["action"] == "set-snapshot-ref":
                u["snapshot-id"] = 7
        return body

    with pytest.raises(Exception, match="skade allocates"):
        tampered(load_catalog("e5", type="rest", uri=address), small_id).load_table("main.events").append(
            arrow_rows([603]))
    with pytest.raises(Exception, match="in the future"):
        tampered(load_catalog("e4", type="rest", uri=address), future).load_table("main.events").append(
            arrow_rows([602]))
    assert location("events") == before
    assert con.execute("SELECT count(*) FROM lake.events WHERE id >= 600").fetchone() == (0,)
    # a table keeping DuckDB types narrower than Iceberg's takes no value they cannot hold
    con.execute("CREATE TABLE lake.small (id TINYINT)")
    with pytest.raises(Exception, match='column "id" holds a value its DuckDB type cannot'):
        catalog.load_table("main.small").append(pa.table({"id": pa.array([1000], pa.int32())}))
    assert con.execute("SELECT count(*) FROM lake.small").fetchone() == (0,)


def test_a_file_that_leads_outside_the_table_by_a_link_is_refused(plain, tmp_path):
    """A path under the table's folder that is a symbolic link to a file elsewhere (here another
    folder's Parquet file, adopted by PyIceberg's add_files) would make DuckDB users read it."""
    import os
    import pyarrow.parquet as pq
    con, address = plain
    outside = tmp_path / "elsewhere.parquet"
    pq.write_table(arrow_rows([900]), outside)
    table = load_catalog("lake", type="rest", uri=address).load_table("main.events")
    link = f"{table.location()}/data/linked.parquet"
    os.symlink(outside, link)
    with pytest.raises(Exception, match="symbolic link"):
        table.add_files([link])
    assert con.execute("SELECT count(*) FROM lake.events WHERE id = 900").fetchone() == (0,)
    # the same file copied into the folder is a client's file like any other
    inside = f"{table.location()}/data/copied.parquet"
    pq.write_table(arrow_rows([901]), inside)
    table.add_files([inside])
    assert con.execute("SELECT count(*) FROM lake.events WHERE id = 901").fetchone() == (1,)
