"""OpenLineage delivery: every committed transaction reaches a collector as a RunEvent that
validates against the OpenLineage 2-0-2 schemas and parses with openlineage-python, at least once,
in commit_seq order, after outages, refusals and a kill -9; commits never wait for it."""
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import uuid

import pytest

from conftest import EXTENSION, connect
from openlineage_collector import Collector, parse, validate


@pytest.fixture
def collector():
    c = Collector()
    yield c
    c.close()


def attach(con, path, url, extra=""):
    con.execute(f"ATTACH '{path}' AS lake (TYPE skade, OPENLINEAGE_URL '{url}', OPENLINEAGE_NAMESPACE 'tests'{extra})")


def flush(con, timeout_ms=20000):
    return con.execute(f"SELECT * FROM skade_lineage_flush('lake', {timeout_ms})").fetchall()


def summary(event):
    """(operation, inputs, outputs, output lifecycle states) with table names."""
    def names(ds):
        out = []
        for d in ds:
            links = d["facets"].get("symlinks", {}).get("identifiers", [])
            out.append(links[0]["name"] if links else d["name"])
        return out

    lifecycle = [d["facets"]["lifecycleStateChange"]["lifecycleStateChange"]
                 for d in event["outputs"] if "lifecycleStateChange" in d["facets"]]
    op = event["run"]["facets"]["skade_commit"]["operation"]
    return op, names(event["inputs"]), names(event["outputs"]), lifecycle


def test_workload_gives_exactly_the_expected_events(tmp_path, collector):
    con = connect()
    parquet = tmp_path / "more.parquet"
    con.execute(f"COPY (SELECT range AS id, 'p' || range AS v FROM range(100, 103)) TO '{parquet}'")
    attach(con, tmp_path / "lake.skade", collector.url)
    for sql in [
        "CREATE TABLE lake.a (id BIGINT PRIMARY KEY, v VARCHAR)",
        "INSERT INTO lake.a VALUES (1, 'x'), (2, 'y')",
        "CREATE TABLE lake.b AS SELECT * FROM lake.a",
        "INSERT INTO lake.b SELECT id + 10, v FROM lake.a",
        f"INSERT INTO lake.a SELECT * FROM read_parquet('{parquet}')",
        "UPDATE lake.a SET v = 'z' WHERE id = 1",
        "DELETE FROM lake.a WHERE id = 2",
        "INSERT INTO lake.a VALUES (1, 'u'), (7, 'n') ON CONFLICT (id) DO UPDATE SET v = excluded.v",
        "BEGIN", "INSERT INTO lake.a VALUES (8, 'q')", "INSERT INTO lake.b SELECT * FROM lake.a WHERE id = 8",
        "COMMIT",
        "DROP TABLE lake.b",
    ]:
        con.execute(sql)
    flush(con)
    events = collector.wait_for(10)
    time.sleep(0.3)
    assert len(collector.events) == 10, "an event arrived twice"
    for e in events:
        validate(e)
        parse(e)
    assert [summary(e) for e in events] == [
        ("CREATE", [], ["main.a"], ["CREATE"]),
        ("APPEND", [], ["main.a"], []),
        ("CREATE", ["main.a"], ["main.b"], ["CREATE"]),
        ("APPEND", ["main.a"], ["main.b"], []),
        ("APPEND", [str(parquet)], ["main.a"], []),
        ("OVERWRITE", [], ["main.a"], []),
        ("DELETE", [], ["main.a"], []),
        ("OVERWRITE", [], ["main.a"], []),
        ("RELEASE", ["main.a"], ["main.a", "main.b"], []),
        ("DROP", [], ["main.b"], ["DROP"]),
    ]
    seqs = [e["run"]["facets"]["skade_commit"]["commitSeq"] for e in events]
    assert seqs == sorted(seqs)
    # the run id is a UUIDv7 made from the event, the same in the history table
    ids = [e["run"]["runId"] for e in events]
    assert len(set(ids)) == len(ids) and all(uuid.UUID(i).version == 7 for i in ids)
    assert {e["job"]["namespace"] for e in events} == {"tests"}
    assert events[1]["job"]["name"] == "lake.append.main.a"
    # output statistics: what the snapshot wrote
    stats = events[1]["outputs"][0]["outputFacets"]["outputStatistics"]
    assert stats["rowCount"] == 2 and stats["fileCount"] == 1 and stats["size"] > 0
    # datasets named as Spark's Iceberg integration names them, versioned by snapshot
    out = events[1]["outputs"][0]
    assert out["namespace"] == "file" and out["name"] == str(tmp_path / "lake.skade.data" / "main" / "a")
    assert out["facets"]["version"]["datasetVersion"].isdigit()
    assert [f["name"] for f in out["facets"]["schema"]["fields"]] == ["id", "v"]
    assert out["facets"]["catalog"]["framework"] == "iceberg" and out["facets"]["catalog"]["type"] == "skade"
    history = con.execute(
        "SELECT commit_seq, operation, openlineage FROM lake.skade_lineage.events ORDER BY commit_seq").fetchall()
    import json
    assert [(r[0], r[1]) for r in history] == [(s, summary(e)[0]) for s, e in zip(seqs, events)]
    assert [json.loads(r[2]) for r in history] == events
    con.close()


def test_collector_down_then_up_gets_every_event_once_in_order(tmp_path, collector):
    collector.set_mode("down")
    con = connect()
    attach(con, tmp_path / "lake.skade", collector.url)
    con.execute("CREATE TABLE lake.t (i INTEGER)")
    for i in range(5):
        con.execute(f"INSERT INTO lake.t VALUES ({i})")
    deadline = time.time() + 10
    while True:
        row = con.execute("SELECT pending_events, last_error FROM skade_lineage_delivery('lake') "
                          "WHERE sink LIKE 'openlineage%'").fetchone()
        if row[1] is not None or time.time() > deadline:
            break
        time.sleep(0.05)
    assert row[0] == 6 and "503" in row[1], row
    assert collector.events == []
    collector.set_mode("up")
    events = collector.wait_for(6, timeout=30)
    flush(con)
    time.sleep(0.5)
    assert len(collector.events) == 6
    seqs = [e["run"]["facets"]["skade_commit"]["commitSeq"] for e in events]
    assert seqs == sorted(set(seqs))
    row = con.execute("SELECT pending_events, last_error, delivered_seq FROM skade_lineage_delivery('lake') "
                      "WHERE sink LIKE 'openlineage%'").fetchone()
    assert row[0] == 0 and row[1] is None and row[2] >= seqs[-1]
    con.close()


def test_a_refused_event_is_recorded_and_skipped(tmp_path, collector):
    collector.set_mode(lambda e: 400 if e["job"]["name"].startswith("lake.delete") else 201)
    con = connect()
    attach(con, tmp_path / "lake.skade", collector.url)
    con.execute("CREATE TABLE lake.t (i INTEGER)")
    con.execute("INSERT INTO lake.t VALUES (1), (2)")
    con.execute("DELETE FROM lake.t WHERE i = 1")
    con.execute("INSERT INTO lake.t VALUES (3)")
    flush(con)
    assert [summary(e)[0] for e in collector.events] == ["CREATE", "APPEND", "APPEND"]
    rejected, seq, message = con.execute(
        "SELECT rejected_events, last_rejected_seq, last_rejection FROM skade_lineage_delivery('lake') "
        "WHERE sink LIKE 'openlineage%'").fetchone()
    assert rejected == 1 and seq == 3 and "HTTP 400" in message and "refused with 400" in message
    con.close()


def test_api_key_and_endpoint(tmp_path):
    collector = Collector(path="/custom/lineage")
    try:
        con = connect()
        attach(con, tmp_path / "lake.skade", collector.url,
               ", OPENLINEAGE_API_KEY 'sekret', OPENLINEAGE_ENDPOINT 'custom/lineage'")
        con.execute("CREATE TABLE lake.t (i INTEGER)")
        flush(con)
        assert len(collector.events) == 1
        headers = {k.lower(): v for k, v in collector.headers[0].items()}
        assert headers["authorization"] == "Bearer sekret" and headers["content-type"] == "application/json"
        con.close()
    finally:
        collector.close()


SCRIPT = textwrap.dedent("""
    import duckdb, os, sys, time
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute("LOAD '%s'")
    con.execute("ATTACH '" + sys.argv[1] + "' AS lake (TYPE skade)")
    con.execute("CREATE TABLE IF NOT EXISTS lake.t (i INTEGER)")
    for i in range(int(sys.argv[2])):
        con.execute(f"INSERT INTO lake.t VALUES ({i})")
    print("committed", flush=True)
    time.sleep(60)
""") % EXTENSION


def test_killed_mid_delivery_sends_the_missing_events_after_reopening(tmp_path, collector):
    # the collector takes three events, then stops answering: the process is killed meanwhile
    taken = []

    def first_three(event):
        taken.append(event)
        if len(taken) > 3:
            time.sleep(30)
        return 201

    collector.set_mode(first_three)
    path = str(tmp_path / "lake.skade")
    env = dict(os.environ, OPENLINEAGE_URL=collector.url)
    p = subprocess.Popen([sys.executable, "-c", SCRIPT, path, "10"], env=env, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "committed"
    deadline = time.time() + 20
    while len(taken) < 4 and time.time() < deadline:
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert len(collector.events) == 3
    collector.set_mode("up")
    con = connect()
    con.execute(f"ATTACH '{path}' AS lake (TYPE skade, OPENLINEAGE_URL '{collector.url}')")
    flush(con)
    seqs = [e["run"]["facets"]["skade_commit"]["commitSeq"] for e in collector.events]
    # at least once: every event, in order of first arrival; the last moment's may come again
    assert sorted(set(seqs)) == list(range(1, 12))
    firsts = [s for i, s in enumerate(seqs) if s not in seqs[:i]]
    assert firsts == sorted(firsts)
    con.close()


def test_environment_configures_every_attach_and_can_disable(tmp_path, collector):
    code = textwrap.dedent("""
        import duckdb, sys
        con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
        con.execute("LOAD '%s'")
        con.execute("ATTACH '" + sys.argv[1] + "' AS lake (TYPE skade)")
        con.execute("CREATE TABLE lake.t (i INTEGER)")
        try:
            print(con.execute("SELECT count(*) FROM skade_lineage_flush('lake')").fetchone()[0])
        except Exception as e:
            print("error:", e)
    """) % EXTENSION
    env = dict(os.environ, OPENLINEAGE_URL=collector.url, OPENLINEAGE_NAMESPACE="from-env")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "a.skade")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "2", out  # the history table and the collector
    assert [e["job"]["namespace"] for e in collector.events] == ["from-env"]
    env["OPENLINEAGE_DISABLED"] = "true"
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / "b.skade")], env=env,
                         capture_output=True, text=True, timeout=60)
    assert "lineage is off" in out.stdout, out
    assert len(collector.events) == 1


def test_a_hanging_collector_blocks_neither_commits_nor_detach(tmp_path, collector):
    collector.set_mode("hang")
    con = connect()
    path = tmp_path / "lake.skade"
    attach(con, path, collector.url)
    con.execute("CREATE TABLE lake.t (i INTEGER)")
    start = time.time()
    for i in range(20):
        con.execute(f"INSERT INTO lake.t VALUES ({i})")
    assert time.time() - start < 5  # (a hang would take 10 s per event)
    deadline = time.time() + 5
    while collector.requests == 0 and time.time() < deadline:
        time.sleep(0.02)
    assert collector.requests >= 1
    con.execute("DETACH lake")
    # the lake is free again at once: the worker holds no handle while it waits on the collector
    con.execute(f"ATTACH '{path}' AS lake (TYPE skade)")
    assert con.execute("SELECT count(*) FROM lake.t").fetchone()[0] == 20
    con.execute("DETACH lake")
    collector.set_mode("up")
    con.close()


def test_flush_after_a_quiet_moment_and_detach_keeps_what_was_acknowledged(tmp_path, collector):
    con = connect()
    path = tmp_path / "lake.skade"
    attach(con, path, collector.url)
    con.execute("CREATE TABLE lake.t (i INTEGER)")
    time.sleep(1.5)  # the history writes its row: the last commit makes no event
    flush(con, 5000)
    con.execute("INSERT INTO lake.t VALUES (1)")
    flush(con, 5000)
    con.execute("DETACH lake")
    # attached without a collector, the stored cursor shows: DETACH made it durable
    con.execute(f"ATTACH '{path}' AS lake (TYPE skade)")
    seq, = con.execute("SELECT delivered_seq FROM skade_lineage_delivery('lake') "
                       "WHERE sink LIKE 'openlineage%' AND NOT running").fetchone()
    last = max(e["run"]["facets"]["skade_commit"]["commitSeq"] for e in collector.events)
    assert seq >= last
    con.close()


def test_a_redirect_is_a_refusal_not_a_stall(tmp_path, collector):
    collector.set_mode(lambda e: 301 if e["job"]["name"].startswith("lake.create") else 201)
    con = connect()
    attach(con, tmp_path / "lake.skade", collector.url)
    con.execute("CREATE TABLE lake.t (i INTEGER)")
    con.execute("INSERT INTO lake.t VALUES (1)")
    flush(con, 5000)
    assert [summary(e)[0] for e in collector.events] == ["APPEND"]
    rejected, message = con.execute("SELECT rejected_events, last_rejection FROM skade_lineage_delivery('lake') "
                                    "WHERE sink LIKE 'openlineage%'").fetchone()
    assert rejected == 1 and "HTTP 301" in message and "redirect" in message
    con.close()


def test_inputs_outside_the_lake_carry_their_schema(tmp_path, collector):
    """A table of another DuckDB database has its columns (DuckDB's types) as its schema facet,
    a table of another skade catalog its Iceberg columns at the snapshot read (types spelled as
    Iceberg spells them in metadata.json, "decimal(10, 2)"), both recorded with the commit: the
    event is the same when the other catalog's files are gone by the time it is made. Neither
    claims this lake's catalog facet; a time-travel read names the snapshot it read."""
    con = connect()
    attach(con, tmp_path / "lake.skade", collector.url)
    con.execute(f"ATTACH '{tmp_path / 'other.skade'}' AS other (TYPE skade)")
    con.execute("ATTACH ':memory:' AS mem")
    con.execute("CREATE TABLE mem.src (k INTEGER, name VARCHAR, seen TIMESTAMP)")
    con.execute("INSERT INTO mem.src VALUES (1, 'a', TIMESTAMP '2026-01-01')")
    con.execute("CREATE TABLE other.o (id BIGINT, amount DECIMAL(10, 2))")
    con.execute("INSERT INTO other.o VALUES (5, 1.25)")
    first = con.execute("SELECT max(snapshot_id) FROM skade_snapshots('other.o')").fetchone()[0]
    con.execute("INSERT INTO other.o VALUES (6, 2.5)")
    con.execute("CREATE TABLE lake.t (id BIGINT, note VARCHAR)")
    con.execute("INSERT INTO lake.t SELECT k, name FROM mem.src")
    collector.set_mode("down")
    con.execute("INSERT INTO lake.t SELECT id, amount::VARCHAR FROM other.o")
    con.execute(f"INSERT INTO lake.t SELECT id, amount::VARCHAR FROM other.o AT (VERSION => {first})")
    con.execute("DETACH other")
    shutil.rmtree(tmp_path / "other.skade.data")  # gone before the collector's events are made
    collector.set_mode("up")
    flush(con)
    events = collector.wait_for(4)
    for e in events:
        validate(e)
        parse(e)
    from_duckdb, from_skade = events[1]["inputs"], events[2]["inputs"]
    assert [d["namespace"] for d in from_duckdb] == ["duckdb://memory/mem"]
    fields = from_duckdb[0]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in fields] == [("k", "INTEGER"), ("name", "VARCHAR"), ("seen", "TIMESTAMP")]
    assert "catalog" not in from_duckdb[0]["facets"]
    assert len(from_skade) == 1 and from_skade[0]["name"] == str(tmp_path / "other.skade.data" / "main" / "o")
    fields = from_skade[0]["facets"]["schema"]["fields"]
    assert [(f["name"], f["type"]) for f in fields] == [("id", "long"), ("amount", "decimal(10, 2)")]
    assert from_skade[0]["facets"]["version"]["datasetVersion"].isdigit()
    assert events[3]["inputs"][0]["facets"]["version"]["datasetVersion"] == str(first)
    assert from_skade[0]["facets"]["version"]["datasetVersion"] != str(first)
    assert "catalog" not in from_skade[0]["facets"] and "symlinks" not in from_skade[0]["facets"]
    con.close()
