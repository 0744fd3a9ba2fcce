"""Catalogs written by earlier releases open and read: tests/fixtures/format-1 is a lake as skade
at commit 09bffaa wrote it (catalog format skade-catalog-1, INT32 and DATE columns
DELTA_BINARY_PACKED with wrapping deltas, which the Parquet crate cannot skip in: see
src/table/skippable.rs). That build itself failed reading `t`, looking up in `probe` and
deleting from `keyed` (issue 17, item 1)."""
import json
import os
import shutil

import duckdb
import pytest

from conftest import ROOT, connect

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "format-1")


def placed():
    """The fixture copied back where it was written (Iceberg metadata names files by absolute
    path): its expected values, and where it is."""
    expected = json.load(open(os.path.join(FIXTURE, "expected.json")))
    fixed = expected["fixed_path"]
    shutil.rmtree(fixed, ignore_errors=True)
    shutil.copytree(FIXTURE, fixed)
    return expected, fixed


@pytest.fixture
def lake():
    expected, fixed = placed()
    con = connect()
    con.execute(f"ATTACH '{fixed}/lake.skade' AS lake (TYPE skade)")
    yield con, expected
    con.close()
    shutil.rmtree(fixed, ignore_errors=True)


def rows(con, sql):
    return [[str(v) for v in row] for row in con.execute(sql).fetchall()]


def test_every_table_reads_as_written(lake):
    con, expected = lake
    for name, query in expected["queries"].items():
        assert rows(con, query.format(db="lake")) == expected[name], name
    assert con.execute("SELECT count(*) FROM skade_commits_since('lake', 0)").fetchone()[0] == expected["commit_count"]
    assert con.execute("SELECT count(*) FROM skade_check('lake') WHERE status <> 'ok'").fetchone()[0] == 0


def test_every_snapshot_reads(lake):
    con, _ = lake
    for (table,) in con.execute("SELECT schema_name || '.' || table_name FROM skade_tables('lake')").fetchall():
        snapshots = con.execute(f"SELECT snapshot_id FROM skade_snapshots('lake.{table}')").fetchall()
        assert snapshots, table
        for (sid,) in snapshots:
            con.execute(f"SELECT * FROM lake.{table} AT (VERSION => {sid})").fetchall()
        con.execute(f"SELECT count(*) FROM skade_changelog('lake.{table}', NULL)").fetchall()


def test_lookups_deletes_and_new_commits_on_old_files(lake):
    con, expected = lake
    probe = {int(r[0]): r for r in expected["probe"]}
    for k in (1, 5, 77, 298, 299):
        assert rows(con, f"SELECT * FROM skade_lookup('lake.probe', {k})") == [probe[k]]
    keyed = {int(r[0]): r for r in expected["keyed"]}
    for k in (-2100000000, 900000000, 5, 110, 3000):
        assert rows(con, f"SELECT * FROM skade_lookup('lake.keyed', {k})") == [keyed[k]]
    con.execute("DELETE FROM lake.keyed WHERE id > 0 AND id % 3 = 0")
    left = [r for k, r in sorted(keyed.items()) if not (k > 0 and k % 3 == 0)]
    assert rows(con, "SELECT * FROM lake.keyed ORDER BY id") == left
    con.execute("UPDATE lake.t SET i = i + 1")
    assert rows(con, "SELECT * FROM lake.t") == [["4", "1"]]
    con.execute("INSERT INTO lake.sales.log (x) VALUES (-1)")
    assert con.execute("SELECT count(*) FROM lake.sales.log").fetchone()[0] == 501


def test_consumers_on_a_format_1_catalog():
    """Format 1 has no consumers table: read-only it lists none and cannot make one; the first
    writable attach migrates it (in one transaction with the stamp), and a consumer then follows
    the old tables from the beginning of their history."""
    expected, fixed = placed()
    try:
        con = connect()
        con.execute(f"ATTACH '{fixed}/lake.skade' AS old (TYPE skade, READ_ONLY)")
        assert con.execute("SELECT count(*) FROM skade_consumers('old')").fetchone()[0] == 0
        with pytest.raises(duckdb.Error, match="read-only|READ_ONLY|read only"):
            con.execute("CALL skade_create_consumer('old', 'c', 't', start := 'beginning')")
        con.execute("DETACH old")
        con.execute(f"ATTACH '{fixed}/lake.skade' AS lake (TYPE skade)")
        con.execute("CALL skade_create_consumer('lake', 'c', 't', start := 'beginning')")
        # replaying every change from the beginning gives the table's rows
        changes = con.execute("SELECT id, _change_type FROM skade_peek('lake', 'c') ORDER BY _commit_seq, _commit_ordinal").fetchall()
        alive = {}
        for id_, change in changes:
            if change in ("INSERT", "UPDATE_AFTER"):
                alive[id_] = alive.get(id_, 0) + 1
            else:
                alive[id_] -= 1
        now = sorted(i for (i,) in con.execute("SELECT id FROM lake.t").fetchall())
        assert sorted(i for i, n in alive.items() for _ in range(n)) == now
        assert len(con.execute("FROM skade_consume('lake', 'c')").fetchall()) == len(changes)
        assert con.execute("SELECT commits_behind FROM skade_consumers('lake')").fetchone()[0] == 0
        con.close()
        # the migrated file stays at the new format: a read-only attach now lists the consumer
        con = connect()
        con.execute(f"ATTACH '{fixed}/lake.skade' AS again (TYPE skade, READ_ONLY)")
        assert con.execute("SELECT consumer_name FROM skade_consumers('again')").fetchall() == [("c",)]
        con.close()
    finally:
        shutil.rmtree(fixed, ignore_errors=True)
