"""A local catalog whose warehouse is in a bucket (issue 44, item 2: `DATA_PATH 's3://…'`): every
data file and every piece of Iceberg metadata is an object of the local S3 server, nothing lands on
local disk but the catalog file, the rows are those of a native DuckDB table after the same
statements, other Iceberg readers read the same rows from the bucket, a commit costs the PUTs the
design counts, and a bucket that refuses writes fails the statement with nothing changed."""
import uuid

import pytest

from conftest import connect, needs_iceberg, s3_bucket, s3_control, s3_delete, s3_keys, s3_requests, site_extension

STATEMENTS = [
    "CREATE TABLE {t} (id BIGINT PRIMARY KEY, name VARCHAR, amount DOUBLE)",
    "INSERT INTO {t} SELECT i, 'n' || i, i * 1.5 FROM range(2000) r(i)",
    "UPDATE {t} SET amount = -amount WHERE id % 10 = 0",
    "DELETE FROM {t} WHERE id % 7 = 0",
    "INSERT OR REPLACE INTO {t} SELECT i, 'r' || i, i FROM range(1990, 2010) r(i)",
]


def bucket_lake(tmp_path, endpoint, name="lake"):
    bucket = s3_bucket(endpoint, f"data-{uuid.uuid4().hex[:12]}")
    con = connect()
    con.execute(f"ATTACH '{tmp_path / (name + '.skade')}' AS {name} (TYPE skade, DATA_PATH 's3://{bucket}/wh')")
    return con, bucket


def test_rows_match_a_native_table_and_live_only_in_the_bucket(tmp_path, s3_env):
    con, bucket = bucket_lake(tmp_path, s3_env)
    con.execute("CREATE TABLE native (id BIGINT PRIMARY KEY, name VARCHAR, amount DOUBLE)")
    for s in STATEMENTS:
        if not s.startswith("CREATE"):
            con.execute(s.format(t="native"))
        con.execute(s.format(t="lake.orders"))
    want = con.execute("SELECT * FROM native ORDER BY id").fetchall()
    assert con.execute("SELECT * FROM lake.orders ORDER BY id").fetchall() == want
    meta = con.execute("SELECT metadata_location FROM skade_tables('lake')").fetchone()[0]
    assert meta.startswith(f"s3://{bucket}/wh/main/orders/metadata/")
    assert not (tmp_path / "lake.skade.data").exists()
    written = {p for m, p, s in s3_requests(s3_env, f"/{bucket}/") if m == "PUT" and s == 200}
    assert any("/wh/main/orders/data/" in p for p in written)
    assert any(p.endswith(".metadata.json") for p in written)
    # a fresh process reads the same rows from the bucket
    con.execute("DETACH lake")
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade, DATA_PATH 's3://{bucket}/wh')")
    assert con.execute("SELECT * FROM lake.orders ORDER BY id").fetchall() == want
    assert con.execute("SELECT * FROM lake.orders WHERE id = 1991").fetchall() == [(1991, 'r1991', 1991.0)]


def test_a_one_row_commit_is_four_puts(tmp_path, s3_env):
    con, bucket = bucket_lake(tmp_path, s3_env)
    con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    con.execute("INSERT INTO lake.t VALUES (0, 'a')")
    s3_control(s3_env, "DELETE", "requests")
    con.execute("INSERT INTO lake.t VALUES (1, 'b')")
    puts = sorted(p.split("/")[-2] for m, p, s in s3_requests(s3_env, f"/{bucket}/") if m == "PUT")
    # a data file, a manifest and a manifest list, a metadata.json: nothing else
    assert puts == ["data", "metadata", "metadata", "metadata"], puts


def test_a_commits_manifest_list_and_metadata_go_at_once(tmp_path, s3_env):
    """An append (chained: it writes them after handing its table's turn on) sends its manifest
    list and metadata.json together: with the list's PUT held 2 s, the metadata.json's lands
    first. (They once went one after the other: a round trip more per commit.)"""
    con, bucket = bucket_lake(tmp_path, s3_env)
    con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    con.execute("INSERT INTO lake.t VALUES (1, 'a')")
    s3_control(s3_env, "DELETE", "requests")
    s3_control(s3_env, "POST", "faults", {"method": "PUT", "prefix": f"/{bucket}/wh/main/t/metadata/snap-",
                                         "delay": 2, "count": 1})
    try:
        con.execute("INSERT INTO lake.t VALUES (2, 'b')")
    finally:
        s3_control(s3_env, "DELETE", "faults")
    landed = [p.rsplit("/", 1)[-1] for m, p, s in s3_requests(s3_env, f"/{bucket}/") if m == "PUT"]
    lists = [i for i, name in enumerate(landed) if name.startswith("snap-")]
    metadata = [i for i, name in enumerate(landed) if name.endswith(".metadata.json")]
    assert len(lists) == 1 and len(metadata) == 1 and metadata[0] < lists[0], landed


def test_a_bucket_refusing_writes_fails_the_statement_and_changes_nothing(tmp_path, s3_env):
    con, bucket = bucket_lake(tmp_path, s3_env)
    con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    con.execute("INSERT INTO lake.t VALUES (1, 'a')")
    before = con.execute("SELECT * FROM skade_snapshots('lake.t')").fetchall()
    s3_control(s3_env, "POST", "faults", {"method": "PUT", "prefix": f"/{bucket}/", "status": 403,
                                         "code": "AccessDenied", "count": 1000})
    try:
        with pytest.raises(Exception) as e:
            con.execute("INSERT INTO lake.t VALUES (2, 'b')")
        assert f"s3://{bucket}/wh/main/t/" in str(e.value) and "AccessDenied" in str(e.value)
    finally:
        s3_control(s3_env, "DELETE", "faults")
    assert con.execute("SELECT * FROM lake.t").fetchall() == [(1, 'a')]
    assert con.execute("SELECT * FROM skade_snapshots('lake.t')").fetchall() == before
    con.execute("INSERT INTO lake.t VALUES (3, 'c')")
    assert sorted(con.execute("SELECT id FROM lake.t").fetchall()) == [(1,), (3,)]


def test_slow_down_answers_are_retried(tmp_path, s3_env):
    con, bucket = bucket_lake(tmp_path, s3_env)
    con.execute("CREATE TABLE lake.t (id BIGINT)")
    s3_control(s3_env, "POST", "faults", {"method": "PUT", "prefix": f"/{bucket}/", "status": 503,
                                         "code": "SlowDown", "count": 3})
    con.execute("INSERT INTO lake.t SELECT * FROM range(10)")
    assert con.execute("SELECT count(*) FROM lake.t").fetchone()[0] == 10
    statuses = [s for m, p, s in s3_requests(s3_env, f"/{bucket}/") if m == "PUT"]
    assert statuses.count(503) == 3


@needs_iceberg
def test_duckdb_iceberg_and_pyiceberg_read_the_bucket_tables(tmp_path, s3_env):
    con, bucket = bucket_lake(tmp_path, s3_env)
    for s in STATEMENTS:
        con.execute(s.format(t="lake.orders"))
    ours = sorted(con.execute("SELECT * FROM lake.orders").fetchall())
    meta = con.execute("SELECT metadata_location FROM skade_tables('lake')").fetchone()[0]
    for ext in ("httpfs", "avro", "iceberg"):
        con.execute(f"LOAD '{site_extension('duckdb_extension_' + ext, ext)}'")
    con.execute(f"""CREATE SECRET (TYPE s3, KEY_ID 'skadetest', SECRET 'skadetestsecret', REGION 'us-east-1',
                    ENDPOINT '{s3_env}', URL_STYLE 'path', USE_SSL false)""")
    assert sorted(con.execute(f"SELECT * FROM iceberg_scan('{meta}')").fetchall()) == ours
    from pyiceberg.table import StaticTable
    table = StaticTable.from_metadata(meta, properties={
        "s3.endpoint": f"http://{s3_env}", "s3.access-key-id": "skadetest",
        "s3.secret-access-key": "skadetestsecret", "s3.region": "us-east-1"})
    theirs = table.scan().to_arrow().sort_by("id").to_pylist()
    assert [(r["id"], r["name"], r["amount"]) for r in theirs] == sorted(ours)


def data_gets(endpoint, bucket):
    return [p for m, p, s in s3_requests(endpoint, f"/{bucket}/") if m == "GET" and "/data/" in p]


def test_reads_of_a_bucket_are_kept_in_memory_and_a_warm_lookup_costs_at_most_two_requests(tmp_path, s3_env):
    """Column chunks read once stay in memory (objects never change under their name): a query
    run again reads no data file, and a point lookup in a row group read before costs at most 2
    GETs (the issue's bound), a key looked up again none."""
    con, bucket = bucket_lake(tmp_path, s3_env)
    con.execute("CREATE TABLE lake.k (id BIGINT PRIMARY KEY, name VARCHAR, amount DOUBLE)")
    con.execute("INSERT INTO lake.k SELECT i, 'name-' || i, i * 0.5 FROM range(300000) r(i)")
    query = "SELECT sum(amount), count(DISTINCT name) FROM lake.k WHERE id % 3 = 0"
    want = con.execute(query).fetchall()
    s3_control(s3_env, "DELETE", "requests")
    assert con.execute(query).fetchall() == want
    assert data_gets(s3_env, bucket) == [], "a repeated scan fetched data again"
    con.execute("SELECT * FROM lake.k WHERE id = 5")  # (the file's footer and index, read once)
    keys = [1 + i * 7919 % 299_000 for i in range(40)]
    s3_control(s3_env, "DELETE", "requests")
    for k in keys:
        assert con.execute(f"SELECT name FROM lake.k WHERE id = {k}").fetchall() == [(f"name-{k}",)]
    per_lookup = len(data_gets(s3_env, bucket)) / len(keys)
    assert per_lookup <= 2, f"{per_lookup} GETs per warm lookup"
    s3_control(s3_env, "DELETE", "requests")
    for k in keys[:10]:
        assert con.execute(f"SELECT name FROM lake.k WHERE id = {k}").fetchall() == [(f"name-{k}",)]
    assert data_gets(s3_env, bucket) == [], "a key looked up again was fetched again"


@pytest.mark.parametrize("where", ["bucket", "disk"])
def test_skade_check_finds_a_missing_file_by_listing(tmp_path, s3_env, where):
    """skade_check lists each table's folders (1 LIST per 1,000 objects in a bucket) and names a
    file the current snapshot reads that is gone."""
    if where == "bucket":
        con, bucket = bucket_lake(tmp_path, s3_env)
    else:
        con = connect()
        con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    for i in range(3):
        con.execute(f"INSERT INTO lake.t SELECT i, 'v' FROM range({i * 10}, {i * 10 + 10}) r(i)")
    con.execute("CREATE TABLE lake.u (id BIGINT)")
    assert all(s == "ok" for _, s in con.execute("SELECT part, status FROM skade_check('lake')").fetchall())
    if where == "bucket":
        s3_control(s3_env, "DELETE", "requests")
        con.execute("SELECT * FROM skade_check('lake')").fetchall()
        gets = [p for m, p, _ in s3_requests(s3_env, f"/{bucket}/") if m in ("GET", "HEAD") and "/data/" in p]
        assert gets == [], "skade_check fetched data files one by one"
        victim = next(k for k in s3_keys(s3_env, bucket, "wh/main/t/data/"))
        s3_delete(s3_env, bucket, victim)
    else:
        import glob
        import os
        victim = sorted(glob.glob(str(tmp_path / "lake.skade.data/main/t/data/*.parquet")))[0]
        os.remove(victim)
    rows = {part: (status, problem) for part, status, problem in
            con.execute("SELECT part, status, problem FROM skade_check('lake')").fetchall()}
    status, problem = rows["table main.t"]
    assert status != "ok" and "missing" in problem and victim.rsplit("/", 1)[1] in problem, rows
    assert rows["table main.u"][0] == "ok"
