"""A lake written by skade in one DuckDB version is read by skade in the other and by DuckDB 1.5.5's
iceberg extension (the only one PyPI has): the files and the catalog do not depend on the host.
Runs in each host `make test` uses; skipped when make did not build the other version."""
import json
import os
import subprocess
import textwrap

import duckdb
import pytest

from conftest import ROOT, connect

HOSTS = {"1.5.5": os.path.join(ROOT, "build", "venv"), "2.0.1": os.path.join(ROOT, "build", "venv-2.0.1")}
OTHER = next(v for v in HOSTS if v != duckdb.__version__)
OTHER_PYTHON = os.path.join(HOSTS[OTHER], "bin", "python")
OTHER_EXTENSION = os.path.join(ROOT, "build", "release", f"v{OTHER}", "skade.duckdb_extension")

# make exports the versions it built (so a file left by an earlier build is never taken for
# the current one); run by hand, the test takes what is there.
BUILT = os.environ.get("DUCKDB_VERSIONS")
pytestmark = pytest.mark.skipif(
    OTHER not in BUILT.split() if BUILT is not None
    else not (os.path.exists(OTHER_PYTHON) and os.path.exists(OTHER_EXTENSION)),
    reason=f"skade for DuckDB {OTHER} not built (make DUCKDB_VERSIONS=...)")

READ = textwrap.dedent("""
    import json, sys, duckdb
    sys.path.insert(0, sys.argv[3])
    from hosts import peer_extension
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"LOAD '{sys.argv[1]}'")
    con.execute(f"ATTACH '{sys.argv[2]}' AS lake (TYPE skade)")
    out = {"version": duckdb.__version__}
    out["rows"] = con.execute("SELECT id, v, CAST(ts AS VARCHAR) FROM lake.t ORDER BY id").fetchall()
    first = con.execute("SELECT min(snapshot_id) FROM skade_snapshots('lake.t')").fetchone()[0]
    out["changes"] = con.execute(
        f"SELECT id, v, _change_type FROM skade_changelog('lake.t', {first}) ORDER BY _commit_snapshot_id, id, _change_type"
    ).fetchall()
    out["lookup"] = con.execute("SELECT id, v FROM skade_lookup('lake.t', 2)").fetchall()
    out["view"] = con.execute("SELECT id, l FROM lake.doubled ORDER BY id").fetchall()
    con.execute("INSERT INTO lake.t VALUES (10, 'from ' || version(), TIMESTAMP '2026-01-01')")
    avro = peer_extension("duckdb_extension_avro", "avro")
    if avro:
        location = con.execute(
            "SELECT metadata_location FROM skade_tables('lake') WHERE table_name = 't'").fetchone()[0]
        con.execute(f"LOAD '{avro}'")
        con.execute(f"LOAD '{peer_extension('duckdb_extension_iceberg', 'iceberg')}'")
        out["iceberg"] = con.execute(
            f"SELECT id, v, CAST(ts AS VARCHAR) FROM iceberg_scan('{location}') ORDER BY id").fetchall()
    con.execute("DETACH lake")
    print(json.dumps(out))
""")


def read_in_other_version(path):
    result = subprocess.run([OTHER_PYTHON, "-c", READ, OTHER_EXTENSION, str(path), os.path.join(ROOT, "tools")],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_a_lake_written_here_reads_the_same_in_the_other_version(tmp_path):
    path = tmp_path / "lake.skade"
    con = connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"ATTACH '{path}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR, ts TIMESTAMP)")
    con.execute("INSERT INTO lake.t SELECT i, 'v' || i, TIMESTAMP '2026-01-01' + INTERVAL (i) HOUR FROM range(1, 6) r(i)")
    con.execute("UPDATE lake.t SET v = 'changed' WHERE id = 2")
    con.execute("DELETE FROM lake.t WHERE id = 4")
    con.execute("INSERT OR REPLACE INTO lake.t VALUES (5, 'replaced', NULL), (6, 'new', NULL)")
    # a view with a lambda, written as this version takes it (2.0 refuses 1.x's arrow)
    lam = "lambda x: x * 2" if duckdb.__version__.startswith("2.") else "x -> x * 2"
    con.execute(f"CREATE VIEW lake.doubled AS SELECT id, list_transform([id], {lam}) AS l FROM t")
    doubled = [list(r) for r in con.execute("SELECT id, l FROM lake.doubled ORDER BY id").fetchall()]
    rows = [list(r) for r in con.execute("SELECT id, v, CAST(ts AS VARCHAR) FROM lake.t ORDER BY id").fetchall()]
    first = con.execute("SELECT min(snapshot_id) FROM skade_snapshots('lake.t')").fetchone()[0]
    changes = [list(r) for r in con.execute(  # the changes after the first INSERT
        f"SELECT id, v, _change_type FROM skade_changelog('lake.t', {first}) ORDER BY _commit_snapshot_id, id, _change_type"
    ).fetchall()]
    assert len(changes) == 6
    con.execute("DETACH lake")

    other = read_in_other_version(path)
    assert other["version"] == OTHER
    assert other["rows"] == rows
    assert other["changes"] == changes
    assert other["lookup"] == [[2, "changed"]]
    assert other["view"] == doubled
    if "iceberg" in other:
        assert other["iceberg"] == rows + [[10, f"from v{OTHER}", "2026-01-01 00:00:00"]]

    # and the other version's commit reads back here
    con.execute(f"ATTACH '{path}' AS lake (TYPE skade)")
    assert con.execute("SELECT v FROM lake.t WHERE id = 10").fetchone() == (f"from v{OTHER}",)
    assert con.execute("SELECT count(*) FROM lake.t").fetchone() == (len(rows) + 1,)
    con.close()
