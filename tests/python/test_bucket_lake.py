"""A lake in a bucket (issue 44, item 1): `ATTACH 's3://bucket/prefix' (TYPE skade, READ_WRITE)` on
every host (DuckDB attaches a remote path only with httpfs loaded, and read-only unless told).
Hosts are processes with caches of their own (CACHE_PATH); nothing connects them but the local S3
server. The first host creates the lake, the others join it and fold its commit log; every commit
lands once with gapless commit_seq whichever host made it; a consumer is exactly once across
hosts; a host with no cache rebuilds the lake from the bucket; a prefix that holds something else,
or a cache of another lake, is refused."""
import threading
import uuid

import pytest

from conftest import PEERS_ON_PYPI, connect, s3_bucket, s3_delete, s3_keys, s3_put, site_extension
from test_commit_log import Process, until

# DuckDB attaches an s3:// path only with httpfs loaded, which PyPI has for 1.5.5 only.
pytestmark = pytest.mark.skipif(not PEERS_ON_PYPI, reason="DuckDB attaches s3:// paths only with httpfs, "
                                "which PyPI lacks for this DuckDB")
HTTPFS = "LOAD '{}'"



@pytest.fixture
def bucket_lake(s3_env, tmp_path):
    """`host()`: a new process attached to one lake in a fresh bucket, with a cache of its own."""
    url = f"s3://{s3_bucket(s3_env, 'lake-' + uuid.uuid4().hex[:12])}/lakes/sales"
    started = []

    def host(name=None):
        name = name or f"host{len(started)}"
        p = Process()
        started.append(p)
        p.sql(HTTPFS.format(site_extension('duckdb_extension_httpfs', 'httpfs')))
        p.sql(f"ATTACH '{url}' AS lake (TYPE skade, READ_WRITE, CACHE_PATH '{tmp_path / name}', COMMIT_LOG_POLL_MS 20)")
        return p

    yield url, host
    for p in started:
        if p.p.poll() is None:
            p.p.kill()
        p.p.wait()


def feed(p):
    return p.sql("SELECT commit_seq, operation FROM skade_commits_since('lake', 0) ORDER BY commit_seq")


def test_hosts_commit_to_one_lake_and_see_each_others_commits(bucket_lake):
    url, host = bucket_lake
    a = host()
    a.sql("CREATE TABLE lake.orders (id BIGINT PRIMARY KEY, host VARCHAR, amount DOUBLE)")
    a.sql("CREATE TABLE lake.a_only (x INTEGER)")
    b = host()
    assert b.sql("SELECT count(*) FROM lake.orders") == [[0]]

    def writes(p, name, ids):
        for i in ids:
            p.sql(f"INSERT INTO lake.orders VALUES ({i}, '{name}', {i})")
            if name == "a":
                p.sql(f"INSERT INTO lake.a_only VALUES ({i})")

    threads = [threading.Thread(target=writes, args=(a, "a", range(0, 20))),
               threading.Thread(target=writes, args=(b, "b", range(100, 120)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    want = [[i, "a" if i < 100 else "b", float(i)] for i in list(range(20)) + list(range(100, 120))]
    for p in (a, b):
        until(lambda: p.sql("SELECT count(*) FROM lake.orders") == [[40]])
        assert p.sql("SELECT * FROM lake.orders ORDER BY id") == want
    seqs = [s for s, _ in feed(a)]
    assert seqs == list(range(1, len(seqs) + 1)) and len(seqs) == 2 + 40 + 20
    until(lambda: feed(b) == feed(a))


def test_a_host_without_a_cache_rebuilds_the_lake_from_the_bucket(bucket_lake, tmp_path):
    url, host = bucket_lake
    a = host()
    a.sql("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    a.sql("INSERT INTO lake.t SELECT i, 'v' || i FROM range(1000) r(i)")
    a.sql("UPDATE lake.t SET v = 'u' WHERE id < 10")
    a.sql("CREATE VIEW lake.small AS SELECT * FROM lake.t WHERE id < 5")
    fresh = host("fresh")
    assert fresh.sql("SELECT * FROM lake.t ORDER BY id") == a.sql("SELECT * FROM lake.t ORDER BY id")
    assert fresh.sql("SELECT count(*) FROM lake.small") == [[5]]
    assert fresh.sql("SELECT snapshot_id FROM skade_snapshots('lake.t') ORDER BY 1") == \
        a.sql("SELECT snapshot_id FROM skade_snapshots('lake.t') ORDER BY 1")
    assert feed(fresh) == feed(a)
    # and the newcomer commits in turn
    fresh.sql("INSERT INTO lake.t VALUES (5000, 'fresh')")
    until(lambda: a.sql("SELECT v FROM lake.t WHERE id = 5000") == [["fresh"]])


def test_a_consumer_gets_every_change_once_whichever_host_consumes(bucket_lake):
    url, host = bucket_lake
    a, b = host(), host()
    a.sql("CREATE TABLE lake.ev (id BIGINT)")
    a.sql("SELECT * FROM skade_create_consumer('lake', 'billing', 'ev', start := 'beginning')")
    until(lambda: b.sql("SELECT count(*) FROM skade_consumers('lake')") == [[1]])  # (within b's poll)
    got, conflicts = [], []
    lock = threading.Lock()

    def consume(p):
        # two hosts consuming at once: one wins, the other's transaction conflicts (nothing
        # delivered, retryable), as between two connections of one host; so does a host whose
        # view of the consumer is older than the other host's last consume (not yet polled)
        while True:
            p.send("SELECT id FROM skade_consume('lake', 'billing')")
            a = p.answer()
            if "error" not in a:
                return [r[0] for r in a["rows"]]
            assert "transaction conflict on consumer" in a["error"], a
            conflicts.append(a["error"])

    def work(p, ids):
        for i in ids:
            p.sql(f"INSERT INTO lake.ev VALUES ({i})")
            rows = consume(p)
            with lock:
                got.extend(rows)

    threads = [threading.Thread(target=work, args=(a, range(0, 15))),
               threading.Thread(target=work, args=(b, range(100, 115)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    until(lambda: a.sql("SELECT count(*) FROM lake.ev") == [[30]])
    got += consume(a)
    assert sorted(got) == list(range(15)) + list(range(100, 115))


def test_an_alter_lands_through_another_hosts_appends(bucket_lake):
    """A lone ALTER TABLE on one host while another host appends to the table: the append may
    reach this host only after the ALTER was made again on the head it knew, so its request
    loses at the log; it is made again on the newer head, not failed (as a transaction with data
    is rebased)."""
    url, host = bucket_lake
    a, b = host(), host()
    a.sql("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    until(lambda: b.sql("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'") == [[1]])
    for k in range(4):
        a.sql("BEGIN")
        a.sql(f"ALTER TABLE lake.t ADD COLUMN c{k} INTEGER")
        b.sql(f"INSERT INTO lake.t (id, v) VALUES ({k}, 'b')")
        a.sql("COMMIT")
    assert [r[0] for r in a.sql("DESCRIBE lake.t")] == ["id", "v", "c0", "c1", "c2", "c3"]
    until(lambda: a.sql("SELECT count(*) FROM lake.t") == [[4]])
    ops = [r[0] for r in a.sql("SELECT operation FROM skade_commits_since('lake', 1) ORDER BY commit_seq")]
    assert sorted(ops) == ["add_column"] * 4 + ["append"] * 4
    assert {r[1] for r in a.sql("SELECT * FROM skade_check('lake')")} == {"ok"}


def test_two_hosts_creating_one_lake_at_once_make_one(s3_env, tmp_path):
    url = f"s3://{s3_bucket(s3_env, 'race-' + uuid.uuid4().hex[:12])}/lake"
    hosts = [Process() for _ in range(3)]
    try:
        for i, p in enumerate(hosts):
            p.sql(HTTPFS.format(site_extension('duckdb_extension_httpfs', 'httpfs')))
            p.send(f"ATTACH '{url}' AS lake (TYPE skade, READ_WRITE, CACHE_PATH '{tmp_path / str(i)}', COMMIT_LOG_POLL_MS 20)")
        for p in hosts:
            assert "error" not in p.answer()
        hosts[0].sql("CREATE TABLE lake.t (x INTEGER)")
        # (another host's commit reaches this one within its poll)
        until(lambda: hosts[2].sql("SELECT count(*) FROM duckdb_tables() WHERE database_name = 'lake'") == [[1]])
        hosts[2].sql("INSERT INTO lake.t VALUES (1)")
        for p in hosts:
            until(lambda: p.sql("SELECT * FROM lake.t") == [[1]])
        uuids = {p.sql("SELECT count(*) FROM skade_commits_since('lake', 0)")[0][0] for p in hosts}
        assert uuids == {2}
    finally:
        for p in hosts:
            p.p.kill()
            p.p.wait()


def test_what_is_not_a_lake_is_refused(s3_env, tmp_path):
    bucket = s3_bucket(s3_env, "other-" + uuid.uuid4().hex[:12])
    con = connect()
    con.execute(HTTPFS.format(site_extension('duckdb_extension_httpfs', 'httpfs')))
    # DuckDB attaches a remote path read-only unless told: said at ATTACH, not at the first write
    with pytest.raises(Exception, match=r"read-only unless told otherwise: add READ_WRITE"):
        con.execute(f"ATTACH 's3://{bucket}/ro' AS ro (TYPE skade, CACHE_PATH '{tmp_path / 'c0'}')")
    with pytest.raises(Exception, match=r"does not exist \(a READ_ONLY attach creates none"):
        con.execute(f"ATTACH 's3://{bucket}/ro' AS ro (TYPE skade, READ_ONLY, CACHE_PATH '{tmp_path / 'c0'}')")
    # a prefix holding other objects
    s3_put(s3_env, bucket, "data/x.csv", b"1,2\n")
    with pytest.raises(Exception, match=r"holds objects but no skade lake"):
        con.execute(f"ATTACH 's3://{bucket}/data' AS lake (TYPE skade, READ_WRITE, CACHE_PATH '{tmp_path / 'c1'}')")
    # a cache folder of another lake
    con.execute(f"ATTACH 's3://{bucket}/one' AS one (TYPE skade, READ_WRITE, CACHE_PATH '{tmp_path / 'c2'}')")
    con.execute("DETACH one")
    with pytest.raises(Exception, match=r"holds the cache of the lake"):
        con.execute(f"ATTACH 's3://{bucket}/two' AS two (TYPE skade, READ_WRITE, CACHE_PATH '{tmp_path / 'c2'}')")
    # the lake's own layout cannot be redirected
    with pytest.raises(Exception, match=r"DATA_PATH cannot be given"):
        con.execute(f"ATTACH 's3://{bucket}/three' AS three (TYPE skade, READ_WRITE, DATA_PATH '{tmp_path}')")
    with pytest.raises(Exception, match=r"CACHE_PATH is for a lake in a bucket"):
        con.execute(f"ATTACH '{tmp_path / 'plain.skade'}' AS plain (TYPE skade, CACHE_PATH '{tmp_path / 'c3'}')")


def test_a_read_only_host_folds_the_lake_and_commits_nothing(bucket_lake, tmp_path):
    url, host = bucket_lake
    a = host()
    a.sql("CREATE TABLE lake.t (id BIGINT)")
    a.sql("INSERT INTO lake.t VALUES (1), (2)")
    reader = Process()
    reader.sql(HTTPFS.format(site_extension('duckdb_extension_httpfs', 'httpfs')))
    reader.sql(f"ATTACH '{url}' AS lake (TYPE skade, READ_ONLY, CACHE_PATH '{tmp_path / 'reader'}', COMMIT_LOG_POLL_MS 20)")
    try:
        assert reader.sql("SELECT * FROM lake.t ORDER BY id") == [[1], [2]]
        assert "read-only" in reader.fails("INSERT INTO lake.t VALUES (3)")["error"]
        assert "read-only" in reader.fails("CALL skade_compact('lake.t')")["error"]
        a.sql("INSERT INTO lake.t VALUES (3)")
        until(lambda: reader.sql("SELECT count(*) FROM lake.t") == [[3]])
        assert feed(reader) == feed(a)
    finally:
        reader.close()


def test_a_host_killed_while_committing_loses_no_acknowledged_commit(bucket_lake):
    url, host = bucket_lake
    a = host()
    a.sql("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, pad VARCHAR)")
    acked = []

    def commits():
        for i in range(10_000):
            a.send(f"INSERT INTO lake.t VALUES ({i}, repeat('x', 1000))")
            line = a.p.stdout.readline()
            if not line:
                return  # killed
            acked.append(i)

    t = threading.Thread(target=commits)
    t.start()
    until(lambda: len(acked) >= 20, timeout=60)
    a.p.kill()  # SIGKILL, mid-commit or between
    t.join()
    b = host()
    ids = [r[0] for r in b.sql("SELECT id FROM lake.t ORDER BY id")]
    # every acknowledged commit is there, and at most the one in flight beside them
    assert ids[:len(acked)] == acked and len(ids) - len(acked) <= 1
    assert all(status == "ok" for _, status in b.sql("SELECT part, status FROM skade_check('lake')"))
    b.sql("INSERT INTO lake.t VALUES (-1, 'after')")
    assert b.sql("SELECT count(*) FROM lake.t WHERE id = -1") == [[1]]


def positions(s3_env, url):
    """The log positions the lake's bucket holds."""
    bucket, prefix = url[len("s3://"):].split("/", 1)
    keys = s3_keys(s3_env, bucket, f"{prefix}/log/")
    return [int(k.rsplit("/", 1)[1][:-len(".batch")]) for k in keys
            if k.endswith(".batch") and "/checkpoints/" not in k]


def test_hosts_start_from_checkpoints_and_the_log_is_truncated_below_them(bucket_lake, s3_env, monkeypatch):
    """Checkpoints every 4 positions and no age spared (in production: 1,024 and an hour), for the
    hosts this test starts: a new host starts from the newest checkpoint, a host whose cache fell
    behind the log's truncation restores one, and neither misses a commit."""
    monkeypatch.setenv("SKADE_CHECKPOINT_EVERY", "4")
    monkeypatch.setenv("SKADE_LOG_KEEP_MS", "0")
    url, host = bucket_lake
    a = host("a")
    a.sql("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    a.sql("SELECT * FROM skade_create_consumer('lake', 'billing', 't', start := 'beginning')")
    lagging = host("lagging")
    assert lagging.sql("SELECT count(*) FROM lake.t") == [[0]]
    lagging.p.kill()
    lagging.p.wait()
    for i in range(30):
        a.sql(f"INSERT INTO lake.t VALUES ({i}, 'v{i}')")
    a.sql("DELETE FROM lake.t WHERE id < 5")
    assert until(lambda: positions(s3_env, url)[:2] != [0, 1], timeout=20), "the log was never truncated"
    want = a.sql("SELECT * FROM lake.t ORDER BY id")
    checkpoints = [k for k in s3_keys(s3_env, url[len("s3://"):].split("/", 1)[0]) if "/log/checkpoints/" in k]
    assert checkpoints, "no checkpoint was written"
    hosts = {name: host(name) for name in ("fresh", "lagging")}
    for p in hosts.values():
        assert p.sql("SELECT * FROM lake.t ORDER BY id") == want
        assert feed(p) == feed(a)
    # the consumer, restored with the rest, delivers every change once: 30 inserts, 5 deletes
    got = hosts["lagging"].sql("SELECT _change_type, count(*) FROM skade_consume('lake', 'billing') "
                               "GROUP BY 1 ORDER BY 1")
    assert got == [["DELETE", 5], ["INSERT", 30]]
    # (the cursor's move reaches a within its poll; a consume on an older view conflicts, and
    # delivers nothing: retried, as any conflict)
    delivered = []

    def consumed_by_a():
        a.send("SELECT count(*) FROM skade_consume('lake', 'billing')")
        answer = a.answer()
        if "error" in answer:
            assert "transaction conflict on consumer" in answer["error"], answer
            return False
        delivered.append(answer["rows"])
        return True
    assert until(consumed_by_a)
    assert delivered == [[[0]]], "a change was delivered twice"


def test_a_rolled_back_bucket_and_a_recreated_lake_are_refused_until_cache_reset(bucket_lake, s3_env, tmp_path):
    url, host = bucket_lake
    bucket, prefix = url[len("s3://"):].split("/", 1)
    a = host("a")
    a.sql("CREATE TABLE lake.t (id BIGINT)")
    for i in range(3):
        a.sql(f"INSERT INTO lake.t VALUES ({i})")
    a.close()
    # the bucket loses the newest commit (restored from an older copy)
    newest = max(positions(s3_env, url))
    s3_delete(s3_env, bucket, f"{prefix}/log/{newest:020}.batch")
    attach = f"ATTACH '{url}' AS lake (TYPE skade, READ_WRITE, CACHE_PATH '{tmp_path / 'a'}'"
    p = Process()
    p.sql(HTTPFS.format(site_extension('duckdb_extension_httpfs', 'httpfs')))
    e = p.fails(attach + ")")["error"]
    assert f"folded position {newest}" in e and "no longer holds" in e and "CACHE_RESET true" in e, e
    # another host commits meanwhile, at that very position: another batch there
    c = host("c")
    c.sql("INSERT INTO lake.t VALUES (100)")
    e = p.fails(attach + ")")["error"]
    assert f"at position {newest}" in e and "now holds another" in e and "CACHE_RESET true" in e, e
    p.sql(attach + ", CACHE_RESET true)")
    assert p.sql("SELECT id FROM lake.t ORDER BY id") == [[0], [1], [100]]
    e = p.fails(attach.replace("AS lake", "AS again") + ", CACHE_RESET true)")["error"]
    assert "attached in this process" in e, e
    p.sql("DETACH lake")
    c.close()
    # the prefix emptied and a new lake made there by another host
    for key in s3_keys(s3_env, bucket, prefix + "/"):
        s3_delete(s3_env, bucket, key)
    b = host("b")
    b.sql("CREATE TABLE lake.other (x INTEGER)")
    e = p.fails(attach + ")")["error"]
    assert "made again" in e and "CACHE_RESET true" in e, e
    p.sql(attach + ", CACHE_RESET true)")
    assert p.sql("SELECT table_name FROM duckdb_tables() WHERE database_name = 'lake'") == [["other"]]
    assert len(list((tmp_path / "a" / "stale").iterdir())) == 2, "each reset keeps the cache it replaced"
    p.close()


@pytest.mark.parametrize("point", ["before_log_offer", "after_log_offer", "after_log_fold", "before_checkpoint_put",
                                   "after_checkpoint_put", "after_truncation_mark"])
def test_a_host_killed_at_each_point_of_a_commit_or_checkpoint_loses_no_commit(bucket_lake, monkeypatch, point):
    """The failpoint aborts the host where it is reached (a commit's: before its log offer, after
    it, after its fold; a checkpoint's, in the poll thread after the commit that called for it was
    acknowledged): every acknowledged commit is in the lake, which a new host and the restarted one
    open and commit to."""
    monkeypatch.setenv("SKADE_CHECKPOINT_EVERY", "4")
    monkeypatch.setenv("SKADE_LOG_KEEP_MS", "0")
    url, host = bucket_lake
    a = host("a")
    a.sql("CREATE TABLE lake.t (id BIGINT)")
    monkeypatch.setenv("SKADE_FAILPOINT", point)
    victim = host("victim")
    acked = []
    for i in range(60):
        try:
            victim.sql(f"INSERT INTO lake.t VALUES ({i})")
        except AssertionError:  # (the worker died)
            break
        acked.append(i)
    assert victim.p.wait(timeout=30) != 0, f"{point} was never reached"
    monkeypatch.delenv("SKADE_FAILPOINT")
    fresh = host("fresh")
    got = [r[0] for r in fresh.sql("SELECT id FROM lake.t ORDER BY id")]
    # every acknowledged commit, and at most the one in flight when the host died
    assert got[:len(acked)] == acked and len(got) - len(acked) <= 1, (acked, got)
    back = host("victim")
    assert [r[0] for r in back.sql("SELECT id FROM lake.t ORDER BY id")] == got
    back.sql("INSERT INTO lake.t VALUES (1000)")
    assert until(lambda: fresh.sql("SELECT count(*) FROM lake.t WHERE id = 1000") == [[1]])


def test_what_a_host_killed_before_its_log_position_uploaded_is_removed_as_orphans(bucket_lake, s3_env,
                                                                                  monkeypatch):
    """A host killed after uploading a commit's data file and metadata but before winning its log
    position leaves objects no commit references: the lake never points at them, and
    skade_remove_orphan_files removes exactly those (once old enough), every snapshot intact."""
    url, host = bucket_lake
    bucket, prefix = url[len("s3://"):].split("/", 1)
    a = host("a")
    a.sql("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR)")
    a.sql("INSERT INTO lake.t SELECT i, 'v' || i FROM range(100) r(i)")
    a.sql("UPDATE lake.t SET v = 'u' WHERE id < 5")
    before = set(s3_keys(s3_env, bucket, f"{prefix}/warehouse/"))
    monkeypatch.setenv("SKADE_FAILPOINT", "before_log_offer")
    victim = host("victim")
    with pytest.raises(AssertionError):  # (the worker dies)
        victim.sql("INSERT INTO lake.t SELECT i, 'lost' FROM range(1000, 1100) r(i)")
    monkeypatch.delenv("SKADE_FAILPOINT")
    left = set(s3_keys(s3_env, bucket, f"{prefix}/warehouse/")) - before
    assert any("/data/" in k for k in left) and any(k.endswith(".metadata.json") for k in left), left
    want = a.sql("SELECT * FROM lake.t ORDER BY id")
    assert a.sql("SELECT count(*) FROM skade_remove_orphan_files('lake.t')") == [[0]], "younger than 3 days"
    found = a.sql("SELECT orphan_file_location FROM skade_remove_orphan_files('lake.t', older_than := now()) "
                  "ORDER BY 1")
    assert sorted(r[0] for r in found) == sorted(f"s3://{bucket}/{k}" for k in left)
    assert set(s3_keys(s3_env, bucket, f"{prefix}/warehouse/")) == before
    assert a.sql("SELECT * FROM lake.t ORDER BY id") == want
    fresh = host("fresh")
    assert fresh.sql("SELECT * FROM lake.t ORDER BY id") == want
    assert all(status == "ok" for _, status in fresh.sql("SELECT part, status FROM skade_check('lake')"))


def test_commit_times_never_go_back_along_commit_seq_whatever_a_hosts_clock(bucket_lake, monkeypatch):
    """A host whose clock is an hour behind, and one an hour ahead, commit in turn with a host
    whose clock is right: commit times never go back along commit_seq (a slow clock cannot move
    them back, a fast one pushes the later ones forward), so time travel by timestamp and the
    changelog's time bounds stay ordered."""
    url, host = bucket_lake
    right = host("right")
    right.sql("CREATE TABLE lake.t (id BIGINT, who VARCHAR)")
    monkeypatch.setenv("SKADE_CLOCK_OFFSET_MS", str(-3_600_000))
    behind = host("behind")
    monkeypatch.setenv("SKADE_CLOCK_OFFSET_MS", str(3_600_000))
    ahead = host("ahead")
    monkeypatch.delenv("SKADE_CLOCK_OFFSET_MS")
    order = [right, behind, right, behind, ahead, right, behind, right]
    for i, p in enumerate(order):
        p.sql(f"INSERT INTO lake.t VALUES ({i}, 'x')")
        until(lambda: all(q.sql("SELECT count(*) FROM lake.t") == [[i + 1]] for q in (right, behind, ahead)))
    times = right.sql("SELECT commit_seq, epoch_us(committed_at) FROM skade_commits_since('lake', 0) "
                      "ORDER BY commit_seq")
    assert [t for _, t in times] == sorted(t for _, t in times), times
    # the slow host's first commit took the time of the one before it, not its own clock's
    seq_behind = times[2]
    assert seq_behind[1] >= times[1][1]
    # after the fast host's commit, every later one is an hour ahead of the right clock
    import time
    assert times[-1][1] > (time.time() + 3000) * 1_000_000


@pytest.mark.parametrize("damage", ["garbage", "torn"])
def test_a_damaged_cache_is_set_aside_and_rebuilt_from_the_bucket(bucket_lake, tmp_path, damage):
    url, host = bucket_lake
    a = host("a")
    a.sql("CREATE TABLE lake.t (id BIGINT, v VARCHAR)")
    a.sql("INSERT INTO lake.t SELECT i, 'v' || i FROM range(500) r(i)")
    want = a.sql("SELECT * FROM lake.t ORDER BY id")
    a.close()
    cache = tmp_path / "a" / "catalog.skade"
    data = cache.read_bytes()
    cache.write_bytes(b"not a catalog" * 100 if damage == "garbage" else data[: len(data) // 3])
    back = host("a")
    assert back.sql("SELECT * FROM lake.t ORDER BY id") == want
    back.sql("INSERT INTO lake.t VALUES (1000, 'after')")
    assert back.sql("SELECT count(*) FROM lake.t") == [[501]]
    assert len(list((tmp_path / "a" / "stale").iterdir())) == 1
