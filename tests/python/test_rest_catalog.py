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
    peer = connect()
    try:
        for name in ("httpfs", "avro", "iceberg"):
            peer.execute(f"LOAD '{site_extension('duckdb_extension_' + name, name)}'")
        # (its default schema is `default`: a lake's `main` is named with DEFAULT_SCHEMA)
        peer.execute(f"ATTACH '' AS ice (TYPE iceberg, ENDPOINT '{address}', TOKEN 's3cret', DEFAULT_SCHEMA 'main')")
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
    status, body = http("GET", address + "/v1/namespaces", headers={"Authorization": "Bearer s3cret"})
    assert status == 200 and body["namespaces"] == [["main"], ["sales"]]
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
    peer = connect()
    try:
        for name in ("httpfs", "avro", "iceberg"):
            peer.execute(f"LOAD '{site_extension('duckdb_extension_' + name, name)}'")
        peer.execute(f"ATTACH '' AS ice (TYPE iceberg, ENDPOINT '{address}', CLIENT_ID 'etl', CLIENT_SECRET 'pw', "
                     "DEFAULT_SCHEMA 'main')")
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
        ("/v1/namespaces/sales%1Fdeeper", 400, "BadRequestException"),  # two levels
        ("/v1/namespaces/%2E%2E/tables", 400, "BadRequestException"),  # ..
        ("/v1/namespaces/main/tables/a%2Fb", 400, "BadRequestException"),  # a path separator
        ("/v1/namespaces/main/tables/%2E%2E", 400, "BadRequestException"),
        ("/v1/namespaces/main%00/tables", 400, "BadRequestException"),  # a control character
        ("/v1/no/such/route", 404, "NotFoundException"),
    ]
    for path, status, kind in cases:
        got, body = http("GET", address + path)
        assert (got, body["error"]["type"], body["error"]["code"]) == (status, kind, status), path
        assert "Traceback" not in body["error"]["message"] and "/tmp" not in body["error"]["message"], path
    # HEAD: 204 or 404, no body
    assert http("HEAD", address + "/v1/namespaces/main")[0] == 204
    assert http("HEAD", address + "/v1/namespaces/main/tables/orders")[0] == 204
    assert http("HEAD", address + "/v1/namespaces/main/tables/nope")[0] == 404
    # a body over the limit is refused before it is read whole
    got, _ = http("POST", address + "/v1/oauth/tokens", b"x" * (17 << 20),
                  {"Content-Type": "application/x-www-form-urlencoded"})
    assert got == 413
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
    with pytest.raises(Exception, match="token is empty"):
        lake.execute("CALL skade_serve('lake', port := 0, token := '')")
    with pytest.raises(Exception, match="nope"):
        lake.execute("CALL skade_serve('nope', port := 0)")
    assert lake.execute("SELECT count(*) FROM skade_servers()").fetchone() == (1,)
    lake.execute("SELECT * FROM skade_serve_stop('lake')")
