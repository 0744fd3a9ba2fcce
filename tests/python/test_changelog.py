"""skade_changelog against a reference: after random inserts, updates, deletes and upserts, for
windows between random snapshots, replaying the plain changelog on the rows at `from` gives the
rows at `to`, and the collapsed changelog is exactly the difference of the two."""
import random
from collections import Counter

import duckdb
import pytest

from conftest import connect


def rows_at(con, table, snapshot):
    return Counter(con.execute(f"SELECT * FROM lake.{table} AT (VERSION => {snapshot})").fetchall())


def changes(con, table, start, end, collapse):
    sql = (f"SELECT * EXCLUDE (_change_type, _commit_snapshot_id), _change_type FROM "
           f"skade_changelog('lake.{table}', {start}, {end}, collapse := {str(collapse).lower()})")
    return con.execute(sql).fetchall()


@pytest.mark.parametrize("layout", ["keyed", "log", "log_text_first", "log_null_int_first"])
def test_changelog_replays_and_collapses_exactly(tmp_path, layout):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    keyed = layout == "keyed"
    if layout == "log_text_first":
        # netting tells candidate files by the first column: here a string with NULLs
        con.execute("CREATE TABLE lake.t (v VARCHAR, id BIGINT, n INTEGER)")
    elif layout == "log_null_int_first":
        # ... here a fixed-width column with NULLs, compared as raw bits within each batch's range
        con.execute("CREATE TABLE lake.t (n INTEGER, id BIGINT, v VARCHAR)")
    else:
        con.execute(f"CREATE TABLE lake.t (id BIGINT {'PRIMARY KEY' if keyed else ''}, v VARCHAR, n INTEGER)")
    v = "CASE WHEN i % 5 = 0 THEN NULL ELSE 'v' || i END" if layout == "log_text_first" else "'v' || i"
    n = "CASE WHEN i % 4 = 0 THEN NULL ELSE i % 7 END" if layout == "log_null_int_first" else "i % 7"
    rng = random.Random(11)
    next_id = 0
    for step in range(40):
        op = rng.choice(["insert", "insert", "update", "delete", "upsert", "txn"])
        if op == "insert" or step == 0:
            k = rng.randint(1, 30)
            con.execute(f"INSERT INTO lake.t (id, v, n) SELECT i, {v}, {n} FROM range({next_id}, {next_id + k}) r(i)")
            next_id += k
        elif op == "update":
            lo = rng.randrange(next_id)
            con.execute(f"UPDATE lake.t SET n = n + 1, v = v || 'u' WHERE id BETWEEN {lo} AND {lo + 5}")
        elif op == "delete":
            lo = rng.randrange(next_id)
            con.execute(f"DELETE FROM lake.t WHERE id BETWEEN {lo} AND {lo + 3}")
        elif op == "upsert" and keyed:
            lo = rng.randrange(next_id)
            con.execute(f"INSERT OR REPLACE INTO lake.t (id, v, n) SELECT i, 'r' || i, 100 FROM range({lo}, {min(lo + 4, next_id)}) r(i)")
        else:
            lo = rng.randrange(next_id)
            con.execute("BEGIN")
            con.execute(f"DELETE FROM lake.t WHERE id BETWEEN {lo} AND {lo + 2}")
            con.execute(f"INSERT INTO lake.t (id, v, n) VALUES ({lo}, 'back', 0)")
            con.execute(f"UPDATE lake.t SET n = -1 WHERE id = {lo}")
            con.execute("COMMIT")
    snapshots = [s for (s,) in con.execute(
        "SELECT snapshot_id FROM skade_snapshots('lake.t') ORDER BY sequence_number").fetchall()]
    windows = [(snapshots[0], snapshots[-1])] + [
        tuple(sorted(rng.sample(snapshots, 2))) for _ in range(10)]
    for start, end in windows:
        before, after = rows_at(con, "t", start), rows_at(con, "t", end)
        # replay: removals then additions, snapshot by snapshot
        state = Counter(before)
        plain = changes(con, "t", start, end, False)
        for *row, tag in plain:
            if tag in ("DELETE", "UPDATE_BEFORE"):
                state[tuple(row)] -= 1
            else:
                state[tuple(row)] += 1
        assert +state == after, (start, end)
        assert all(v >= 0 for v in state.values())
        # collapsed: exactly what was removed and what was added
        net = changes(con, "t", start, end, True)
        removed = Counter(tuple(r) for *r, tag in net if tag in ("DELETE", "UPDATE_BEFORE"))
        added = Counter(tuple(r) for *r, tag in net if tag in ("INSERT", "UPDATE_AFTER"))
        if keyed:
            assert removed == before - after and added == after - before, (start, end)
            tags = Counter(tag for *_, tag in net)
            assert tags["UPDATE_BEFORE"] == tags["UPDATE_AFTER"]
        else:
            assert removed == before - after and added == after - before, (start, end)
            assert {tag for *_, tag in net} <= {"INSERT", "DELETE"}
        # netted with one column used: files that cannot cancel a removal are read in part
        column = "id" if layout != "log_text_first" else "n"
        index = [d[0] for d in con.execute("DESCRIBE lake.t").fetchall()].index(column)
        projected = Counter(con.execute(
            f"SELECT {column}, _change_type IN ('DELETE', 'UPDATE_BEFORE') FROM "
            f"skade_changelog('lake.t', {start}, {end}, collapse := true)").fetchall())
        expected = Counter()
        for r, c in (before - after).items():
            expected[(r[index], True)] += c
        for r, c in (after - before).items():
            expected[(r[index], False)] += c
        assert projected == expected, (start, end)
    con.close()


PREDICATES = [
    "id = 1200", "id BETWEEN 1400 AND 1600", "id IN (7, 1207, 1999, 2005)", "id >= 1990", "n = -1200",
    "n < 0 AND id > 1400", "id < 10 OR id > 1995", "_change_type = 'DELETE'", "_commit_snapshot_id = {s3}",
    "_commit_snapshot_id > {s3} AND id < 600", "_commit_snapshot_id IN ({s3}, {s3} + 1) OR n = 5",
    "v LIKE 'v12%'", "NOT _full_reload AND id = 5", "id IS NULL", "n IS NOT NULL AND id < 3",
]


@pytest.mark.parametrize("keyed", [True, False])
def test_filters_are_pushed_down_exactly(tmp_path, keyed):
    """Every predicate gives exactly the rows of the materialized feed that satisfy it."""
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute(f"CREATE TABLE lake.t (id BIGINT {'PRIMARY KEY' if keyed else ''}, v VARCHAR, n INTEGER)")
    con.execute("INSERT INTO lake.t SELECT i, 'v' || i, i FROM range(0, 1000) r(i)")
    con.execute("INSERT INTO lake.t SELECT i, 'v' || i, i FROM range(1000, 2000) r(i)")
    con.execute("UPDATE lake.t SET n = -n WHERE id BETWEEN 500 AND 1500")
    con.execute("DELETE FROM lake.t WHERE id % 100 = 7")
    if keyed:
        con.execute("INSERT OR REPLACE INTO lake.t SELECT i, 'r' || i, 0 FROM range(1990, 2010) r(i)")
    s3 = con.execute("SELECT snapshot_id FROM skade_snapshots('lake.t') ORDER BY sequence_number "
                     "LIMIT 1 OFFSET 2").fetchone()[0]
    columns = "id, v, n, _change_type, _commit_snapshot_id, _full_reload"
    for collapse in ("false", "true"):
        feed = f"skade_changelog('lake.t', NULL, collapse := {collapse})"
        con.execute(f"CREATE OR REPLACE TEMP TABLE feed AS SELECT {columns} FROM {feed}")
        for predicate in PREDICATES:
            predicate = predicate.format(s3=s3)
            ours = Counter(con.execute(f"SELECT {columns} FROM {feed} WHERE {predicate}").fetchall())
            reference = Counter(con.execute(f"SELECT {columns} FROM feed WHERE {predicate}").fetchall())
            assert ours == reference, (collapse, predicate)


def test_filters_skip_files_and_snapshots(tmp_path):
    """Pruned files are never opened: with the first append's data file gone, a feed filtered to
    later keys or later snapshots still reads; the unfiltered feed names the missing file."""
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR)")
    con.execute("INSERT INTO lake.t SELECT i, 'v' || i FROM range(0, 1000) r(i)")
    first = con.execute("SELECT max(snapshot_id) FROM skade_snapshots('lake.t')").fetchone()[0]
    con.execute("INSERT INTO lake.t SELECT i, 'v' || i FROM range(1000, 2000) r(i)")
    con.execute("DELETE FROM lake.t WHERE id BETWEEN 1500 AND 1509")
    con.execute("UPDATE lake.t SET v = 'u' WHERE id = 1600")
    # the first append's file, told by its rows (file times are too coarse to order two quick writes)
    data = [p for p in (tmp_path / "lake.skade.data" / "main" / "t" / "data").glob("*.parquet")
            if not p.name.endswith("-deletes.parquet")
            and con.execute(f"SELECT max(id) FROM read_parquet('{p}')").fetchone()[0] < 1000]
    assert len(data) == 1
    expected_keys = con.execute("SELECT count(*) FROM skade_changelog('lake.t', NULL) WHERE id >= 1000").fetchone()[0]
    expected_later = con.execute(
        f"SELECT count(*) FROM skade_changelog('lake.t', NULL) WHERE _commit_snapshot_id > {first}").fetchone()[0]
    data[0].unlink()  # the first append's file
    assert con.execute("SELECT count(*) FROM skade_changelog('lake.t', NULL) WHERE id >= 1000").fetchone()[0] \
        == expected_keys == 1000 + 10 + 2
    assert con.execute(
        f"SELECT count(*) FROM skade_changelog('lake.t', NULL) WHERE _commit_snapshot_id > {first}").fetchone()[0] \
        == expected_later == 1000 + 10 + 2
    with pytest.raises(duckdb.Error, match=data[0].name):
        con.execute("SELECT count(*) FROM skade_changelog('lake.t', NULL)").fetchall()
