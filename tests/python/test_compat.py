"""Catalogs written by earlier releases open and read: tests/fixtures/format-1 is a lake as skade
at commit 09bffaa wrote it (catalog format skade-catalog-1, INT32 and DATE columns
DELTA_BINARY_PACKED with wrapping deltas, which the Parquet crate cannot skip in: see
src/table/skippable.rs). That build itself failed reading `t`, looking up in `probe` and
deleting from `keyed` (issue 17, item 1)."""
import json
import os
import shutil

import pytest

from conftest import ROOT, connect

FIXTURE = os.path.join(ROOT, "tests", "fixtures", "format-1")


@pytest.fixture
def lake():
    expected = json.load(open(os.path.join(FIXTURE, "expected.json")))
    # Iceberg metadata names files by absolute path: the lake goes back where it was written.
    fixed = expected["fixed_path"]
    shutil.rmtree(fixed, ignore_errors=True)
    shutil.copytree(FIXTURE, fixed)
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
