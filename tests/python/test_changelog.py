"""skade_changelog against a reference: after random inserts, updates, deletes and upserts, for
windows between random snapshots, replaying the plain changelog on the rows at `from` gives the
rows at `to`, and the collapsed changelog is exactly the difference of the two."""
import random
from collections import Counter

import pytest

from conftest import connect


def rows_at(con, table, snapshot):
    return Counter(con.execute(f"SELECT * FROM lake.{table} AT (VERSION => {snapshot})").fetchall())


def changes(con, table, start, end, collapse):
    sql = (f"SELECT * EXCLUDE (_change_type, _commit_snapshot_id), _change_type FROM "
           f"skade_changelog('lake.{table}', {start}, {end}, collapse := {str(collapse).lower()})")
    return con.execute(sql).fetchall()


@pytest.mark.parametrize("keyed", [True, False])
def test_changelog_replays_and_collapses_exactly(tmp_path, keyed):
    con = connect()
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    key = "PRIMARY KEY" if keyed else ""
    con.execute(f"CREATE TABLE lake.t (id BIGINT {key}, v VARCHAR, n INTEGER)")
    rng = random.Random(11)
    next_id = 0
    for step in range(40):
        op = rng.choice(["insert", "insert", "update", "delete", "upsert", "txn"])
        if op == "insert" or step == 0:
            k = rng.randint(1, 30)
            con.execute(f"INSERT INTO lake.t SELECT i, 'v' || i, i % 7 FROM range({next_id}, {next_id + k}) r(i)")
            next_id += k
        elif op == "update":
            lo = rng.randrange(next_id)
            con.execute(f"UPDATE lake.t SET n = n + 1, v = v || 'u' WHERE id BETWEEN {lo} AND {lo + 5}")
        elif op == "delete":
            lo = rng.randrange(next_id)
            con.execute(f"DELETE FROM lake.t WHERE id BETWEEN {lo} AND {lo + 3}")
        elif op == "upsert" and keyed:
            lo = rng.randrange(next_id)
            con.execute(f"INSERT OR REPLACE INTO lake.t SELECT i, 'r' || i, 100 FROM range({lo}, {min(lo + 4, next_id)}) r(i)")
        else:
            lo = rng.randrange(next_id)
            con.execute("BEGIN")
            con.execute(f"DELETE FROM lake.t WHERE id BETWEEN {lo} AND {lo + 2}")
            con.execute(f"INSERT INTO lake.t VALUES ({lo}, 'back', 0)")
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
    con.close()
