//! The core without DuckDB: catalogs, transactions, commits, scans.

use std::path::Path;
use std::sync::Arc;

use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, StructArray};
use arrow::datatypes::{DataType, Field, Int64Type, Schema};
use iceberg::spec::Datum;
use skade::catalog::options::AttachOptions;
use skade::catalog::transaction::OnConflict;
use skade::read::filter::{Cmp, Prune};
use skade::{Catalog, ErrorKind, Transaction};

/// A fresh directory, removed when dropped. (Not the `tempfile` crate: as a dev-dependency it
/// changes features of crates the release build shares, which would compile them twice.)
struct TestDir(std::path::PathBuf);

impl TestDir {
    fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("skade-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(path: &Path) -> Catalog {
    Catalog::open(path, AttachOptions::default()).unwrap()
}

fn columns() -> Schema {
    Schema::new(vec![Field::new("id", DataType::Int64, true), Field::new("name", DataType::Utf8, true)])
}

/// A catalog in `dir` with one committed, empty table `main.t`, and the table's uuid.
fn catalog_with_table(dir: &TestDir) -> (Catalog, String) {
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create(&txn, "t");
    txn.commit().unwrap();
    (catalog, uuid)
}

fn create(txn: &Transaction, name: &str) -> String {
    let types = vec!["BIGINT".to_string(), "VARCHAR".to_string()];
    let t = txn.create_table("main", name, &columns(), &types, &[], &[], OnConflict::Error).unwrap().unwrap();
    t.record.uuid.clone()
}

fn rows(ids: std::ops::Range<i64>) -> StructArray {
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(ids.clone()));
    let name: ArrayRef = Arc::new(StringArray::from_iter_values(ids.map(|i| format!("n{i}"))));
    StructArray::from(RecordBatch::try_new(Arc::new(columns()), vec![id, name]).unwrap())
}

fn append(txn: &Transaction, uuid: &str, ids: std::ops::Range<i64>) {
    let mut w = txn.writer(uuid).unwrap();
    w.write(&rows(ids)).unwrap();
    txn.stage_files(uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(uuid).unwrap();
}

/// Appends the rows `ids` to the table `uuid` in a commit of their own.
fn commit_append(catalog: &Catalog, uuid: &str, ids: std::ops::Range<i64>) {
    let txn = catalog.begin();
    append(&txn, uuid, ids);
    txn.commit().unwrap();
}

fn ids(txn: &Transaction, uuid: &str, prune: Option<Prune>) -> (Vec<i64>, usize) {
    let plan = txn.scan(&txn.table_by_uuid(uuid).unwrap(), vec![0], prune, false).unwrap();
    let mut out = vec![];
    for t in 0..plan.task_count() {
        for b in plan.open(t).unwrap() {
            let b = b.unwrap();
            out.extend(b.column(0).as_primitive::<Int64Type>().values().iter().copied());
        }
    }
    out.sort();
    (out, plan.task_count())
}

#[test]
fn tables_survive_reopen_and_commits_are_logged() {
    let dir = TestDir::new();
    let path = dir.path().join("lake.skade");
    let uuid = {
        let catalog = open(&path);
        let txn = catalog.begin();
        let uuid = create(&txn, "t");
        append(&txn, &uuid, 0..100);
        let records = txn.commit().unwrap();
        assert_eq!(records.iter().map(|r| r.seq).collect::<Vec<_>>(), vec![1, 2]);
        commit_append(&catalog, &uuid, 100..150);
        uuid
    };
    let catalog = open(&path);
    let txn = catalog.begin();
    let (got, _) = ids(&txn, &uuid, None);
    assert_eq!(got, (0..150).collect::<Vec<_>>());
    let log = catalog.commits_since(0, 100).unwrap();
    let ops: Vec<_> = log.iter().map(|r| (r.seq, r.operation.as_str())).collect();
    assert_eq!(ops, vec![(1, "create_table"), (2, "append"), (3, "append")]);
    assert_eq!(catalog.commits_since(2, 100).unwrap().len(), 1);
    // every snapshot's commit is found from the table side too
    let info = txn.table("main", "t").unwrap().unwrap();
    for s in info.metadata.snapshots() {
        assert!(catalog.commit_seq_of(&uuid, s.snapshot_id()).unwrap().is_some());
    }
}

#[test]
fn bounds_prune_files() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    for k in 0..4 {
        commit_append(&catalog, &uuid, k * 1000..(k + 1) * 1000);
    }
    let txn = catalog.begin();
    let (all, files) = ids(&txn, &uuid, None);
    assert_eq!((all.len(), files), (4000, 4));
    let (one, files) = ids(&txn, &uuid, Some(Prune::Compare { field_id: 1, cmp: Cmp::Eq, value: Datum::long(2500) }));
    assert_eq!(files, 1, "an equality on a clustered key reads one file");
    assert!(one.contains(&2500));
    let (_, files) = ids(&txn, &uuid, Some(Prune::Compare { field_id: 1, cmp: Cmp::Gt, value: Datum::long(99_999) }));
    assert_eq!(files, 0, "out of every file's bounds: nothing is read");
}

#[test]
fn rollback_leaves_nothing() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create(&txn, "t");
    append(&txn, &uuid, 0..10);
    txn.rollback();
    assert!(catalog.state().tables.is_empty());
    assert!(catalog.commits_since(0, 10).unwrap().is_empty());
    let leftovers: Vec<_> = walk(&dir.path().join("lake.skade.data"));
    assert!(leftovers.is_empty(), "rolled-back files remain: {leftovers:?}");
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = vec![];
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(walk(&p));
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn concurrent_appends_rebase_and_ddl_conflicts_fail() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);

    let a = catalog.begin();
    let b = catalog.begin();
    append(&a, &uuid, 0..10);
    append(&b, &uuid, 10..20);
    a.commit().unwrap();
    b.commit().unwrap(); // rebased onto a's snapshot
    let (got, _) = ids(&catalog.begin(), &uuid, None);
    assert_eq!(got, (0..20).collect::<Vec<_>>());

    let a = catalog.begin();
    let b = catalog.begin();
    create(&a, "u");
    create(&b, "u");
    a.commit().unwrap();
    let err = b.commit().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{}", err.message);
    // the loser left no trace in the log
    let log = catalog.commits_since(0, 100).unwrap();
    assert_eq!(log.iter().filter(|r| r.operation == "create_table").count(), 2);
    assert_eq!(log.last().unwrap().seq as usize, log.len());
}

#[test]
fn group_commit_keeps_the_log_gapless_under_concurrency() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    std::thread::scope(|s| {
        for w in 0..8 {
            let catalog = catalog.clone();
            let uuid = uuid.clone();
            s.spawn(move || {
                for i in 0..5 {
                    let txn = catalog.begin();
                    let base = (w * 100 + i * 10) as i64;
                    append(&txn, &uuid, base..base + 1);
                    txn.commit().unwrap();
                }
            });
        }
    });
    let log = catalog.commits_since(0, 1000).unwrap();
    assert_eq!(log.len(), 41);
    for (i, r) in log.iter().enumerate() {
        assert_eq!(r.seq, i as u64 + 1);
    }
    assert_eq!(ids(&catalog.begin(), &uuid, None).0.len(), 40);
}

#[test]
fn a_file_that_is_not_a_catalog_is_left_untouched() {
    let dir = TestDir::new();
    let path = dir.path().join("notes.skade");
    std::fs::write(&path, b"just some text").unwrap();
    let err = Catalog::open(&path, AttachOptions::default()).err().unwrap();
    assert_eq!(err.kind, ErrorKind::Corrupt);
    assert!(err.message.contains("is not a skade catalog"), "{}", err.message);
    assert_eq!(std::fs::read(&path).unwrap(), b"just some text");
}

/// A catalog file copied elsewhere still names the original's files (Iceberg metadata holds
/// absolute paths): attached writable it would change and remove them, so only a read-only
/// attach is allowed, which reads the original's rows. The original attaches as before.
#[test]
fn a_copied_catalog_attaches_only_read_only() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    commit_append(&catalog, &uuid, 0..10);
    drop(catalog);
    std::fs::create_dir(dir.path().join("copy")).unwrap();
    let copy = dir.path().join("copy").join("lake.skade");
    std::fs::copy(dir.path().join("lake.skade"), &copy).unwrap();

    let err = Catalog::open(&copy, AttachOptions::default()).err().unwrap();
    assert_eq!(err.kind, ErrorKind::InvalidInput);
    assert!(
        err.message.contains("was created as") && err.message.contains("attach this copy READ_ONLY"),
        "{}",
        err.message
    );
    let read_only = Catalog::open(&copy, AttachOptions { read_only: true, ..AttachOptions::default() }).unwrap();
    assert_eq!(ids(&read_only.begin(), &uuid, None).0, (0..10).collect::<Vec<_>>());
    drop(read_only);
    let original = open(&dir.path().join("lake.skade"));
    commit_append(&original, &uuid, 10..11);
}

/// Two transactions deleting the same row cannot both commit, even when the first one's snapshot
/// was expired before the second commits (its history is gone, so it counts as a conflict).
#[test]
fn a_delete_conflicts_with_a_concurrent_delete_whose_snapshot_expired() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    commit_append(&catalog, &uuid, 0..10);
    let first = catalog.begin();
    assert_eq!(delete_where(&first, &uuid, |id| id == 1), 1);
    let second = catalog.begin();
    assert_eq!(delete_where(&second, &uuid, |id| id == 1), 1);
    second.commit().unwrap();
    commit_append(&catalog, &uuid, 10..11);
    let retention = skade::format::expire::Retention { older_than_ms: None, retain_last: Some(1) };
    assert!(catalog.expire_snapshots("main", "t", retention).unwrap().expired_snapshots >= 2);
    let err = first.commit().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{}", err.message);
    let expected: Vec<i64> = (0..11).filter(|id| *id != 1).collect();
    assert_eq!(ids(&catalog.begin(), &uuid, None).0, expected);
}

#[test]
fn two_attaches_in_one_process_share_the_store() {
    let dir = TestDir::new();
    let path = dir.path().join("lake.skade");
    let first = open(&path);
    let second = open(&path);
    let txn = first.begin();
    create(&txn, "t");
    txn.commit().unwrap();
    assert!(second.begin().table("main", "t").unwrap().is_some());
    assert!(second.state().table("main", "T").is_some(), "names are case-insensitive");
}

#[test]
fn scans_at_an_old_snapshot_see_what_was_committed_then() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create(&txn, "t");
    append(&txn, &uuid, 0..5);
    txn.commit().unwrap();
    let first = catalog.begin().table("main", "t").unwrap().unwrap().metadata.current_snapshot_id().unwrap();
    commit_append(&catalog, &uuid, 5..7);
    let t = catalog.begin();
    let table = t.table_by_uuid(&uuid).unwrap();
    let plan = t.scan(&table.at("VERSION", first).unwrap(), vec![0, 1], None, false).unwrap();
    let n: usize = (0..plan.task_count()).flat_map(|t| plan.open(t).unwrap()).map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(n, 5);
    let err = table.at("VERSION", 987654).err().unwrap();
    assert_eq!(err.kind, ErrorKind::Catalog);
    // by time: before creation is an error, after the first commit sees it
    let err = table.at("TIMESTAMP", 0).err().unwrap();
    assert!(err.message.contains("did not exist"), "{}", err.message);
    let now_us = chrono::Utc::now().timestamp_micros();
    assert!(matches!(table.at("TIMESTAMP", now_us).unwrap().version, skade::read::time_travel::Version::Snapshot(_)));
    assert_eq!(err.kind, ErrorKind::Catalog);
}

#[test]
fn count_only_scans_return_row_counts() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create(&txn, "t");
    append(&txn, &uuid, 0..1234);
    // a transaction reads its own uncommitted rows
    let plan = txn.scan(&txn.table_by_uuid(&uuid).unwrap(), vec![], None, false).unwrap();
    let n: usize = (0..plan.task_count()).flat_map(|t| plan.open(t).unwrap()).map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(n, 1234);
    let b = plan.open(0).unwrap().next().unwrap().unwrap();
    assert_eq!(b.num_columns(), 0);
    assert!(b.num_rows() > 0);
}

#[test]
fn commit_feed_is_gapless_even_when_the_broadcast_lags() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let mut feed = skade::catalog::events::CommitFeed::new(&catalog, 0);
    // more commits than the broadcast buffers, none consumed yet
    let commits = skade::catalog::COMMIT_EVENT_BUFFER + 200;
    for i in 0..commits {
        let txn = catalog.begin();
        txn.create_schema(&format!("t{i}"), false).unwrap();
        txn.commit().unwrap();
    }
    let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
    let seqs: Vec<u64> = rt.block_on(async {
        let mut out = vec![];
        for _ in 0..commits {
            out.push(feed.next().await.unwrap().seq);
        }
        out
    });
    assert_eq!(seqs, (1..=commits as u64).collect::<Vec<_>>());
    // a live commit arrives through the broadcast
    let txn = catalog.begin();
    txn.create_schema("live", false).unwrap();
    txn.commit().unwrap();
    let live = rt.block_on(feed.next()).unwrap();
    assert_eq!(
        (live.seq, live.operation.as_str(), live.schema.as_str()),
        (commits as u64 + 1, "create_schema", "live")
    );
}

#[test]
fn eventual_durability_flushes_in_the_background() {
    let dir = TestDir::new();
    let path = dir.path().join("lake.skade");
    let options = AttachOptions { durability: skade::catalog::options::Durability::Eventual, ..Default::default() };
    let catalog = Catalog::open(&path, options).unwrap();
    let uuid = {
        let txn = catalog.begin();
        let uuid = create(&txn, "t");
        append(&txn, &uuid, 0..10);
        txn.commit().unwrap();
        uuid
    };
    std::thread::sleep(skade::catalog::EVENTUAL_FLUSH_INTERVAL * 3);
    catalog.flush().unwrap();
    drop(catalog);
    let catalog = open(&path);
    assert_eq!(ids(&catalog.begin(), &uuid, None).0.len(), 10);
}

fn create_keyed(txn: &Transaction, name: &str) -> String {
    let types = vec!["BIGINT".to_string(), "VARCHAR".to_string()];
    let key = vec!["id".to_string()];
    let t = txn.create_table("main", name, &columns(), &types, &key, &key, OnConflict::Error).unwrap().unwrap();
    t.record.uuid.clone()
}

fn try_append(txn: &Transaction, uuid: &str, ids: std::ops::Range<i64>) -> skade::error::Result<()> {
    let mut w = txn.writer(uuid).unwrap();
    w.write(&rows(ids)).unwrap();
    txn.stage_files(uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(uuid)
}

#[test]
fn primary_keys_reject_live_and_repeated_keys() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    txn.commit().unwrap();

    let txn = catalog.begin();
    try_append(&txn, &uuid, 0..1000).unwrap();
    // a key the same transaction wrote earlier is live too
    let err = try_append(&txn, &uuid, 999..1001).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Constraint, "{}", err.message);
    assert!(err.message.contains("\"id: 999\""), "{}", err.message);
    txn.rollback();

    let txn = catalog.begin();
    try_append(&txn, &uuid, 0..1000).unwrap();
    txn.commit().unwrap();
    let txn = catalog.begin();
    let err = try_append(&txn, &uuid, 500..501).unwrap_err();
    assert!(err.message.contains("\"id: 500\""), "{}", err.message);
    // two writers of one statement with the same key
    let mut w1 = txn.writer(&uuid).unwrap();
    w1.write(&rows(2000..2001)).unwrap();
    let mut w2 = txn.writer(&uuid).unwrap();
    w2.write(&rows(2000..2001)).unwrap();
    txn.stage_files(&uuid, w1.finish().unwrap()).unwrap();
    txn.stage_files(&uuid, w2.finish().unwrap()).unwrap();
    let err = txn.end_statement(&uuid).unwrap_err();
    assert!(err.message.contains("\"id: 2000\""), "{}", err.message);
    txn.rollback();
    let (got, _) = ids(&catalog.begin(), &uuid, None);
    assert_eq!(got.len(), 1000);
}

#[test]
fn concurrent_inserts_conflict_only_when_their_keys_may_collide() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    txn.commit().unwrap();

    // disjoint key ranges: both commit (the second rebases)
    let a = catalog.begin();
    let b = catalog.begin();
    try_append(&a, &uuid, 0..10).unwrap();
    try_append(&b, &uuid, 10..20).unwrap();
    a.commit().unwrap();
    b.commit().unwrap();

    // overlapping ranges: the later commit is a retryable conflict and changes nothing
    let a = catalog.begin();
    let b = catalog.begin();
    try_append(&a, &uuid, 100..110).unwrap();
    try_append(&b, &uuid, 105..106).unwrap();
    a.commit().unwrap();
    let err = b.commit().unwrap_err();
    assert_eq!(err.kind, ErrorKind::Conflict, "{}", err.message);
    let (got, _) = ids(&catalog.begin(), &uuid, None);
    assert_eq!(got, (0..20).chain(100..110).collect::<Vec<_>>());

    // interleaved keys, one file each: judged file by file, none can collide (the span of the
    // concurrent files, 200..=204, holds this transaction's 201 and 203)
    let late = catalog.begin();
    try_append(&late, &uuid, 201..202).unwrap();
    try_append(&late, &uuid, 203..204).unwrap();
    for k in [200, 202, 204] {
        let t = catalog.begin();
        try_append(&t, &uuid, k..k + 1).unwrap();
        t.commit().unwrap();
    }
    late.commit().unwrap();
    let (got, _) = ids(&catalog.begin(), &uuid, None);
    assert_eq!(got, (0..20).chain(100..110).chain(200..205).collect::<Vec<_>>());
}

#[test]
fn concurrent_writers_of_disjoint_keys_never_conflict() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    txn.commit().unwrap();
    // eight threads, each inserting one row per commit with its own keys (k * 1e9 + n)
    let conflicts = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for k in 0..8i64 {
            let (catalog, uuid, conflicts) = (&catalog, &uuid, &conflicts);
            scope.spawn(move || {
                for n in 0..25 {
                    let key = k * 1_000_000_000 + n;
                    loop {
                        let t = catalog.begin();
                        try_append(&t, uuid, key..key + 1).unwrap();
                        match t.commit() {
                            Ok(_) => break,
                            Err(e) if e.kind == ErrorKind::Conflict => {
                                conflicts.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            }
                            Err(e) => panic!("{}", e.message),
                        }
                    }
                }
            });
        }
    });
    assert_eq!(conflicts.into_inner(), 0, "disjoint keys rebase without a conflict");
    assert_eq!(ids(&catalog.begin(), &uuid, None).0.len(), 200);

    // a true duplicate still fails: two transactions insert one new key concurrently
    let a = catalog.begin();
    let b = catalog.begin();
    try_append(&a, &uuid, -7..-6).unwrap();
    try_append(&b, &uuid, -7..-6).unwrap();
    a.commit().unwrap();
    assert_eq!(b.commit().unwrap_err().kind, ErrorKind::Conflict);
}

#[test]
fn a_statement_whose_keys_exceed_their_budget_is_checked_by_reading_them_back() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    append(&txn, &uuid, 1_000_000..1_000_100);
    txn.commit().unwrap();
    // 4 KB of memory: a budget of 1 KB, exceeded after a few dozen keys
    let statement = |batches: &[std::ops::Range<i64>]| {
        let txn = catalog.begin();
        txn.set_memory_limit(4096);
        let mut w = txn.writer(&uuid).unwrap();
        for ids in batches {
            w.write(&rows(ids.clone())).unwrap();
        }
        txn.stage_files(&uuid, w.finish().unwrap()).unwrap();
        let ended = txn.end_statement(&uuid);
        (txn, ended)
    };
    // a key repeated far apart in one statement
    let (_, ended) = statement(&[0..5000, 4999..5000]);
    let err = ended.unwrap_err();
    assert_eq!(err.kind, ErrorKind::Constraint, "{}", err.message);
    assert!(err.message.contains("\"id: 4999\""), "{}", err.message);
    // a key that is live already
    let (_, ended) = statement(&[0..5000, 1_000_050..1_000_051]);
    assert!(ended.unwrap_err().message.contains("\"id: 1000050\""));
    // distinct new keys pass, and commit
    let (txn, ended) = statement(&[0..5000, 5000..9000]);
    ended.unwrap();
    txn.commit().unwrap();
    assert_eq!(ids(&catalog.begin(), &uuid, None).0.len(), 9100);
}

/// Deletes the rows whose id satisfies `pred`, through the row ids of a scan (as DELETE does).
fn delete_where(txn: &Transaction, uuid: &str, pred: impl Fn(i64) -> bool) -> u64 {
    let plan = txn.scan(&txn.table_by_uuid(uuid).unwrap(), vec![0], None, true).unwrap();
    let mut doomed = vec![];
    for t in 0..plan.task_count() {
        for b in plan.open(t).unwrap() {
            let b = b.unwrap();
            let ids = b.column(0).as_primitive::<Int64Type>();
            let row_ids = b.column(1).as_primitive::<Int64Type>();
            doomed.extend((0..b.num_rows()).filter(|&i| pred(ids.value(i))).map(|i| row_ids.value(i)));
        }
    }
    txn.delete_rows(uuid, &doomed).unwrap()
}

/// How many manifests of the current snapshot have each (content, tier).
fn manifests_by_tier(catalog: &Catalog, uuid: &str) -> std::collections::BTreeMap<(String, u32), usize> {
    let md = catalog.begin().table_by_uuid(uuid).unwrap().metadata;
    let cache = skade::format::manifests::ManifestCache::default();
    let mut out = std::collections::BTreeMap::new();
    for m in cache.manifest_list(&md, md.current_snapshot().unwrap()).unwrap().iter() {
        *out.entry((format!("{:?}", m.content), skade::format::snapshot::manifest_tier(m))).or_default() += 1;
    }
    out
}

/// Merges are tiered: each file's entry is written once as added and at most once per tier
/// above, rather than the whole history being rewritten every 16 commits.
#[test]
fn merges_rewrite_each_file_once_per_tier() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    const COMMITS: usize = 300;
    for c in 0..COMMITS as i64 {
        commit_append(&catalog, &uuid, c..c + 1);
    }
    let tiers = manifests_by_tier(&catalog, &uuid);
    assert!(tiers.keys().any(|(_, tier)| *tier == 2), "300 one-file manifests reach tier 2: {tiers:?}");
    let mut entries_written = 0;
    for path in walk(dir.path()).into_iter().filter(|p| p.to_string_lossy().ends_with("-m0.avro")) {
        let manifest = iceberg::spec::Manifest::parse_avro(&std::fs::read(&path).unwrap()).unwrap();
        entries_written += manifest.entries().len();
    }
    // added once, then at most once in tier 1 and once in tier 2 (merging every small manifest
    // into one wrote ~3,000 here)
    assert!(entries_written <= 3 * COMMITS, "{entries_written} manifest entries written for {COMMITS} files");
    let (got, _) = ids(&catalog.begin(), &uuid, None);
    assert_eq!(got, (0..COMMITS as i64).collect::<Vec<_>>());
}

#[test]
fn many_small_commits_keep_the_manifest_count_bounded() {
    use skade::format::snapshot::MAX_INHERITED_MANIFESTS;
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    let mut expected: Vec<i64> = vec![];
    let mut at_20 = None;
    for c in 0..80i64 {
        let txn = catalog.begin();
        append(&txn, &uuid, c * 10..c * 10 + 10);
        expected.extend(c * 10..c * 10 + 10);
        if c % 5 == 4 {
            // position deletes (this table has no key) pile up in delete manifests too
            let n = delete_where(&txn, &uuid, |id| id % 10 == c % 10 && id < c * 10);
            assert!(n > 0);
            expected.retain(|id| !(id % 10 == c % 10 && *id < c * 10));
        }
        txn.commit().unwrap();
        // per content and tier, at most 16 carried forward and this commit's new one
        for (group, n) in manifests_by_tier(&catalog, &uuid) {
            assert!(n <= MAX_INHERITED_MANIFESTS + 1, "commit {c}: {n} manifests of {group:?}");
        }
        if c == 20 {
            let t = catalog.begin();
            at_20 = Some((t.table_by_uuid(&uuid).unwrap().metadata.current_snapshot_id().unwrap(), expected.clone()));
        }
    }
    let (got, _) = ids(&catalog.begin(), &uuid, None);
    assert_eq!(got, expected);
    // merged manifests keep the history: an old snapshot reads what it read then
    let (sid, then) = at_20.unwrap();
    let t = catalog.begin();
    let plan = t.scan(&t.table_by_uuid(&uuid).unwrap().at("VERSION", sid).unwrap(), vec![0], None, false).unwrap();
    let mut old = vec![];
    for task in 0..plan.task_count() {
        for b in plan.open(task).unwrap() {
            old.extend(b.unwrap().column(0).as_primitive::<Int64Type>().values().iter().copied());
        }
    }
    old.sort_unstable();
    assert_eq!(old, then);
}

#[test]
fn row_groups_are_pruned_by_their_statistics_and_keep_positions_exact() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create(&txn, "t");
    append(&txn, &uuid, 0..400_000); // one file, four row groups of 122,880 rows
    txn.commit().unwrap();
    let in_third = |id: i64| (250_000..250_010).contains(&id) || id == 300_000;
    let txn = catalog.begin();
    assert_eq!(delete_where(&txn, &uuid, in_third), 11);
    txn.commit().unwrap();

    let txn = catalog.begin();
    let range = Prune::And(vec![
        Prune::Compare { field_id: 1, cmp: Cmp::Ge, value: Datum::long(249_990) },
        Prune::Compare { field_id: 1, cmp: Cmp::Lt, value: Datum::long(250_020) },
    ]);
    let plan = txn.scan(&txn.table_by_uuid(&uuid).unwrap(), vec![0], Some(range), true).unwrap();
    let mut rows = 0;
    let mut seen = vec![];
    for b in plan.open(0).unwrap() {
        let b = b.unwrap();
        rows += b.num_rows();
        let ids = b.column(0).as_primitive::<Int64Type>();
        let row_ids = b.column(1).as_primitive::<Int64Type>();
        for i in 0..b.num_rows() {
            // a row id's position is the row's position in the file, skipped groups included
            assert_eq!(row_ids.value(i) & 0xFFFF_FFFF, ids.value(i), "row id of {}", ids.value(i));
            seen.push(ids.value(i));
        }
    }
    assert_eq!(rows, 122_880 - 11, "only the third row group is read, minus its deleted rows");
    assert!(seen.contains(&249_990) && !seen.contains(&250_005) && !seen.contains(&300_000));
}

/// Writes `batch` as a plain Parquet file, without Iceberg field ids (as some other writers do).
fn write_plain_parquet(path: &Path, batch: &RecordBatch) -> u64 {
    let file = std::fs::File::create(path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
    std::fs::metadata(path).unwrap().len()
}

#[test]
fn deletes_written_by_another_engine_apply() {
    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat};
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    append(&txn, &uuid, 0..100);
    txn.commit().unwrap();
    let data_file = {
        let t = catalog.begin();
        let md = t.table_by_uuid(&uuid).unwrap().metadata;
        let cache = skade::format::manifests::ManifestCache::default();
        let files = cache.snapshot_files(&md, md.current_snapshot().unwrap()).unwrap();
        files.data[0].file().file_path().to_string()
    };

    // position deletes of rows 0..5, and equality deletes of keys 50 and 51, no field ids
    let positions = RecordBatch::try_new(
        Arc::new(Schema::new(vec![
            Field::new("file_path", DataType::Utf8, false),
            Field::new("pos", DataType::Int64, false),
        ])),
        vec![Arc::new(StringArray::from(vec![data_file.as_str(); 5])), Arc::new(Int64Array::from_iter_values(0..5))],
    )
    .unwrap();
    let keys = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
        vec![Arc::new(Int64Array::from(vec![50, 51]))],
    )
    .unwrap();
    let pos_path = dir.path().join("foreign-pos.parquet");
    let eq_path = dir.path().join("foreign-eq.parquet");
    let pos_size = write_plain_parquet(&pos_path, &positions);
    let eq_size = write_plain_parquet(&eq_path, &keys);
    let file = |content, path: &Path, rows, size, ids| {
        DataFileBuilder::default()
            .content(content)
            .file_path(path.to_str().unwrap().to_string())
            .file_format(DataFileFormat::Parquet)
            .record_count(rows)
            .file_size_in_bytes(size)
            .equality_ids(ids)
            .partition_spec_id(0)
            .build()
            .unwrap()
    };
    let txn = catalog.begin();
    txn.add_delete_files(
        &uuid,
        vec![
            file(DataContentType::PositionDeletes, &pos_path, 5, pos_size, None),
            file(DataContentType::EqualityDeletes, &eq_path, 2, eq_size, Some(vec![1])),
        ],
    )
    .unwrap();
    txn.commit().unwrap();
    let (got, _) = ids(&catalog.begin(), &uuid, None);
    let expected: Vec<i64> = (5..100).filter(|i| *i != 50 && *i != 51).collect();
    assert_eq!(got, expected);
}

/// The (id, name) rows `Transaction::lookup` finds for `keys`, at `as_of`.
fn lookup(txn: &Transaction, uuid: &str, as_of: Option<i64>, keys: &[i64]) -> Vec<(i64, String)> {
    let key: ArrayRef = Arc::new(Int64Array::from(keys.to_vec()));
    let keys = StructArray::from(vec![(Arc::new(Field::new("id", DataType::Int64, true)), key)]);
    let b = txn.lookup(uuid, as_of, &keys).unwrap().batch;
    let ids = b.column(0).as_primitive::<Int64Type>();
    let names = b.column(1).as_string::<i32>();
    (0..b.num_rows()).map(|i| (ids.value(i), names.value(i).to_string())).collect()
}

#[test]
fn lookups_find_the_live_row_through_deletes_upserts_and_time_travel() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    txn.commit().unwrap();
    for range in [0..5000, 5000..10_000] {
        commit_append(&catalog, &uuid, range);
    }
    let before = catalog.begin().table_by_uuid(&uuid).unwrap().metadata.current_snapshot_id();
    let n = |i: i64| format!("n{i}");
    let txn = catalog.begin();
    assert_eq!(lookup(&txn, &uuid, None, &[0, 4999, 5000, 9999]), [0, 4999, 5000, 9999].map(|i| (i, n(i))));
    assert!(lookup(&txn, &uuid, None, &[-1, 10_000, 1 << 40]).is_empty(), "absent keys");

    // deletes (equality deletes on a keyed table) and an upsert in one transaction
    let txn = catalog.begin();
    delete_where(&txn, &uuid, |id| id % 1000 == 7 || id == 42);
    let mut w = txn.writer(&uuid).unwrap();
    let id: ArrayRef = Arc::new(Int64Array::from(vec![42]));
    let name: ArrayRef = Arc::new(StringArray::from(vec!["upserted"]));
    w.write(&StructArray::from(RecordBatch::try_new(Arc::new(columns()), vec![id, name]).unwrap())).unwrap();
    txn.stage_files(&uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(&uuid).unwrap();
    // the transaction sees its own writes; another one does not yet
    assert_eq!(lookup(&txn, &uuid, None, &[42, 7, 8]), [(42, "upserted".to_string()), (8, n(8))]);
    assert_eq!(lookup(&catalog.begin(), &uuid, None, &[42, 7]), [(42, n(42)), (7, n(7))]);
    txn.commit().unwrap();

    let txn = catalog.begin();
    assert_eq!(lookup(&txn, &uuid, None, &[7, 1007, 9007, 42, 43]), [(42, "upserted".to_string()), (43, n(43))]);
    // as of the snapshot before: the old rows
    assert_eq!(lookup(&txn, &uuid, before, &[7, 42]), [(7, n(7)), (42, n(42))]);
    // a key list: one row per key found, in the order given, each key once
    assert_eq!(lookup(&txn, &uuid, None, &[9, 8, 9, 7]), [(9, n(9)), (8, n(8))]);
    // every live key at once equals a scan
    let (all, _) = ids(&txn, &uuid, None);
    let found = lookup(&txn, &uuid, None, &(0..10_000).collect::<Vec<_>>());
    assert_eq!(found.iter().map(|r| r.0).collect::<Vec<_>>(), all);
    // errors: an unknown snapshot; a table without a key
    let keys = StructArray::from(vec![(
        Arc::new(Field::new("id", DataType::Int64, true)),
        Arc::new(Int64Array::from(vec![1])) as ArrayRef,
    )]);
    let err = txn.lookup(&uuid, Some(12345), &keys).unwrap_err();
    assert!(err.message.contains("has no snapshot 12345"), "{}", err.message);
    let plain = create(&txn, "plain");
    let err = txn.lookup(&plain, None, &keys).unwrap_err();
    assert!(err.message.contains("has no primary key"), "{}", err.message);
}

#[test]
fn scans_whose_filters_pin_the_key_are_lookups() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    append(&txn, &uuid, 0..3000);
    txn.commit().unwrap();
    let txn = catalog.begin();
    delete_where(&txn, &uuid, |id| id == 5);
    txn.commit().unwrap();
    let eq = |v: i64| Prune::Compare { field_id: 1, cmp: Cmp::Eq, value: Datum::long(v) };
    let txn = catalog.begin();
    // one planned task holding the rows found, not one per data file
    assert_eq!(ids(&txn, &uuid, Some(eq(6))), (vec![6], 1));
    assert_eq!(ids(&txn, &uuid, Some(eq(5))), (vec![], 1));
    let list =
        Prune::In { field_id: 1, values: vec![Datum::long(4), Datum::long(5), Datum::long(2999), Datum::long(3000)] };
    assert_eq!(ids(&txn, &uuid, Some(list)).0, vec![4, 2999]);
    // a range does not pin the key: the usual scan, pruned to the first row group (2,048 rows of
    // a keyed table, one of them deleted)
    let range = Prune::Compare { field_id: 1, cmp: Cmp::Lt, value: Datum::long(3) };
    assert_eq!(ids(&txn, &uuid, Some(range)).0.len(), 2047);
}

/// (id, name, _change_type, _full_reload) of `uuid`'s changelog after snapshot `from`, sorted.
fn changes(catalog: &Catalog, uuid: &str, from: i64, collapse: bool) -> Vec<(i64, String, String, bool)> {
    use skade::functions::changelog::{rows, Bound, Request};
    let txn = catalog.begin();
    let table = txn.table_by_uuid(uuid).unwrap();
    let mut out = vec![];
    for b in rows(&txn, &table, Request { from: Some(Bound::Snapshot(from)), collapse, ..Default::default() }).unwrap()
    {
        let b = b.unwrap();
        let change = arrow::compute::cast(b.column(2), &DataType::Utf8).unwrap();
        for i in 0..b.num_rows() {
            out.push((
                b.column(0).as_primitive::<Int64Type>().value(i),
                b.column(1).as_string::<i32>().value(i).to_string(),
                change.as_string::<i32>().value(i).to_string(),
                b.column(4).as_boolean().value(i),
            ));
        }
    }
    out.sort();
    out
}

fn current_snapshot(catalog: &Catalog, uuid: &str) -> i64 {
    catalog.begin().table_by_uuid(uuid).unwrap().metadata.current_snapshot_id().unwrap()
}

fn live_files(catalog: &Catalog, uuid: &str) -> skade::format::manifests::SnapshotFiles {
    let md = catalog.begin().table_by_uuid(uuid).unwrap().metadata;
    skade::format::manifests::ManifestCache::default().snapshot_files(&md, md.current_snapshot().unwrap()).unwrap()
}

/// Another engine's copy-on-write writes remove files: the changelog reads their rows at the
/// parent as deletions, drops rows carried over unchanged, and falls back to a flagged full
/// reload where rows come back to life (a delete file removed alone).
#[test]
fn changelogs_decode_snapshots_that_remove_files() {
    use iceberg::spec::Operation;
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let keyed = create_keyed(&txn, "k");
    let log = create(&txn, "u");
    txn.commit().unwrap();
    for uuid in [&keyed, &log] {
        for range in [0..100, 100..200] {
            commit_append(&catalog, uuid, range);
        }
    }
    let d = |i: i64, change: &str| (i, format!("n{i}"), change.to_string(), false);
    for (uuid, kind) in [(&keyed, "keyed"), (&log, "log")] {
        let before = current_snapshot(&catalog, uuid);
        let first = live_files(&catalog, uuid).data.into_iter().min_by_key(|e| e.sequence_number).unwrap();
        // copy-on-write: the first file again without rows 10..20 and with row 50 changed
        let txn = catalog.begin();
        let mut w = txn.writer(uuid).unwrap();
        w.write(&rows(0..10)).unwrap();
        w.write(&rows(20..50)).unwrap();
        let id: ArrayRef = Arc::new(Int64Array::from(vec![50]));
        let name: ArrayRef = Arc::new(StringArray::from(vec!["changed"]));
        w.write(&StructArray::from(RecordBatch::try_new(Arc::new(columns()), vec![id, name]).unwrap())).unwrap();
        w.write(&rows(51..100)).unwrap();
        let files = w.finish().unwrap().files;
        txn.rewrite_files(uuid, files, vec![first.file().file_path().to_string()], Operation::Overwrite).unwrap();
        txn.commit().unwrap();

        let mut expected: Vec<_> = (10..20).map(|i| d(i, "DELETE")).collect();
        let (old, new) = if kind == "keyed" { ("UPDATE_BEFORE", "UPDATE_AFTER") } else { ("DELETE", "INSERT") };
        expected.push(d(50, old));
        expected.push((50, "changed".into(), new.into(), false));
        expected.sort();
        assert_eq!(changes(&catalog, uuid, before, false), expected, "{kind}: carry-overs vanish");
        assert_eq!(changes(&catalog, uuid, before, true), expected, "{kind}: collapsed");
    }

    // A delete file removed alone: its rows come back, which no per-row delta can express.
    let txn = catalog.begin();
    assert_eq!(delete_where(&txn, &log, |i| (150..160).contains(&i)), 10);
    txn.commit().unwrap();
    let before = current_snapshot(&catalog, &log);
    let delete_file = live_files(&catalog, &log).deletes[0].file().file_path().to_string();
    let txn = catalog.begin();
    txn.rewrite_files(&log, vec![], vec![delete_file], Operation::Overwrite).unwrap();
    txn.commit().unwrap();
    let reload = changes(&catalog, &log, before, false);
    assert_eq!(reload.len(), 200 - 10, "every live row at the end of the window");
    assert!(reload.iter().all(|(_, _, change, flagged)| change == "INSERT" && *flagged));
    // Netted, the window is the difference between its ends: exact, not flagged.
    assert_eq!(changes(&catalog, &log, before, true), (150..160).map(|i| d(i, "INSERT")).collect::<Vec<_>>());

    // A compaction is a `replace`: no row changed.
    let before = current_snapshot(&catalog, &keyed);
    let report = catalog.compact("main", "k").unwrap();
    assert_eq!((report.removed_data_files, report.added_data_files, report.rows), (2, 1, 190));
    assert!(changes(&catalog, &keyed, before, false).is_empty());
    let (got, _) = ids(&catalog.begin(), &keyed, None);
    let expected: Vec<i64> = (0..200).filter(|i| !(10..20).contains(i)).collect();
    assert_eq!(got, expected);
}

#[test]
fn manifests_and_lists_cached_at_commit_are_what_their_files_say() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    // appends (new manifests, then merged small ones), deletes, and a compaction (rewrites)
    for i in 0..24i64 {
        commit_append(&catalog, &uuid, i * 10..i * 10 + 10);
        if i % 6 == 5 {
            let txn = catalog.begin();
            delete_where(&txn, &uuid, |id| id % 7 == 0);
            txn.commit().unwrap();
        }
        if i == 20 {
            catalog.compact("main", "t").unwrap();
        }
        let md = catalog.begin().table_by_uuid(&uuid).unwrap().metadata;
        let snapshot = md.current_snapshot().unwrap();
        let cached = catalog.read_caches().manifests.manifest_list(&md, snapshot).unwrap();
        let parsed = skade::format::manifests::parse_manifest_list(snapshot.manifest_list(), &md).unwrap();
        assert_eq!(*cached, parsed, "after commit {i}");
        // manifests cached as written (merged ones) are what their files say too
        let ids = |e: &skade::format::manifests::FileEntry| {
            (e.entry.as_ref().clone(), e.snapshot_id, e.sequence_number, e.file_sequence_number)
        };
        for m in &parsed {
            let cached = catalog.read_caches().manifests.manifest(m).unwrap();
            let parsed = skade::format::manifests::parse_manifest(m).unwrap();
            assert_eq!(cached.iter().map(ids).collect::<Vec<_>>(), parsed.iter().map(ids).collect::<Vec<_>>());
        }
    }
}

/// Expiry removes the metadata files of expired states: the new log keeps no entry older than the
/// oldest kept snapshot and every file it lists exists; the files the log stopped listing (it
/// holds 100) go too, unless written after the oldest kept snapshot. Rows and the kept snapshots
/// stay readable, and the table's properties are unchanged. A dropped table of the same name
/// left its files in the same folder: they are not this table's, and stay.
#[test]
fn expiry_removes_the_metadata_files_of_expired_states() {
    let dir = TestDir::new();
    let (catalog, dropped) = catalog_with_table(&dir);
    for i in 0..3 {
        commit_append(&catalog, &dropped, i..i + 1);
    }
    let dropped_location = catalog.begin().table_by_uuid(&dropped).unwrap().metadata.location().to_string();
    let txn = catalog.begin();
    txn.drop_table("main", "t", false).unwrap();
    txn.commit().unwrap();
    let txn = catalog.begin();
    let uuid = create(&txn, "t");
    txn.commit().unwrap();
    let on_disk = |location: &str| -> Vec<std::path::PathBuf> {
        let files = walk(Path::new(&format!("{location}/metadata")));
        files.into_iter().filter(|p| p.to_string_lossy().ends_with(".metadata.json")).collect()
    };
    let mut next = 0i64;
    for round in 0..2 {
        // more commits than the log holds: the oldest files are no longer listed anywhere
        for _ in 0..130 {
            commit_append(&catalog, &uuid, next..next + 1);
            next += 1;
        }
        let info = catalog.begin().table_by_uuid(&uuid).unwrap();
        assert_eq!(info.metadata.location(), dropped_location, "one folder for both tables named t");
        let properties = info.metadata.properties().clone();
        assert!(on_disk(info.metadata.location()).len() > 130, "round {round}");
        let retention = skade::format::expire::Retention { older_than_ms: None, retain_last: Some(10) };
        catalog.expire_snapshots("main", "t", retention).unwrap();

        let info = catalog.begin().table_by_uuid(&uuid).unwrap();
        let md = &info.metadata;
        assert_eq!(md.properties(), &properties, "round {round}");
        assert_eq!(skade::format::metadata::read(&info.record.metadata_location).unwrap(), **md);
        let oldest = md.snapshots().map(|s| s.timestamp_ms()).min().unwrap();
        let log = md.metadata_log();
        assert!(!log.is_empty() && log.iter().all(|e| e.timestamp_ms >= oldest), "round {round}");
        let files = on_disk(md.location());
        for e in log {
            assert!(Path::new(&e.metadata_file).exists(), "round {round}: {} is gone", e.metadata_file);
        }
        let listed: Vec<&str> =
            log.iter().map(|e| e.metadata_file.as_str()).chain([info.record.metadata_location.as_str()]).collect();
        let theirs = |f: &std::path::PathBuf| std::fs::read_to_string(f).unwrap().contains(&dropped);
        assert_eq!(files.iter().filter(|f| theirs(f)).count(), 4, "round {round}: the dropped table's files");
        for f in files.iter().filter(|f| !theirs(f)) {
            if !listed.contains(&f.to_str().unwrap()) {
                let written = std::fs::metadata(f).unwrap().modified().unwrap();
                let ms = written.duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() as i64;
                assert!(ms >= oldest, "round {round}: {} describes an expired state", f.display());
            }
        }
        // ~10 kept states, not the 130+ written
        assert!(files.len() < 35, "round {round}: {} metadata files left", files.len());
        let (all, _) = ids(&catalog.begin(), &uuid, None);
        assert_eq!(all, (0..next).collect::<Vec<_>>(), "round {round}");
        // the oldest kept snapshot (the tenth newest append) reads as it was
        let first_kept = md.snapshots().min_by_key(|s| s.sequence_number()).unwrap().snapshot_id();
        let txn = catalog.begin();
        let table = txn.table_by_uuid(&uuid).unwrap().at("VERSION", first_kept).unwrap();
        let plan = txn.scan(&table, vec![0], None, false).unwrap();
        let n: usize = (0..plan.task_count()).flat_map(|t| plan.open(t).unwrap()).map(|b| b.unwrap().num_rows()).sum();
        assert_eq!(n as i64, next - 9, "round {round}");
    }
}

/// metadata.json is written by skade's own serializer (snapshot texts reused across commits):
/// the iceberg crate must parse every file back to the metadata it was written from, through
/// appends, deletes, a compaction, snapshot expiry and a reopen (texts made afresh).
#[test]
fn metadata_files_parse_back_to_what_was_written() {
    let dir = TestDir::new();
    let path = dir.path().join("lake.skade");
    let check = |catalog: &Catalog, uuid: &str, step: &str| {
        let info = catalog.begin().table_by_uuid(uuid).unwrap();
        let parsed = skade::format::metadata::read(&info.record.metadata_location).unwrap();
        assert_eq!(parsed, *info.metadata, "{step}");
    };
    let (catalog, uuid) = catalog_with_table(&dir);
    check(&catalog, &uuid, "created");
    for i in 0..12i64 {
        commit_append(&catalog, &uuid, i * 10..i * 10 + 10);
        check(&catalog, &uuid, &format!("append {i}"));
        if i % 4 == 3 {
            let txn = catalog.begin();
            delete_where(&txn, &uuid, |id| id % 5 == 0);
            txn.commit().unwrap();
            check(&catalog, &uuid, &format!("delete after append {i}"));
        }
    }
    catalog.compact("main", "t").unwrap();
    check(&catalog, &uuid, "compaction");
    let retention = skade::format::expire::Retention { older_than_ms: None, retain_last: Some(5) };
    assert!(catalog.expire_snapshots("main", "t", retention).unwrap().expired_snapshots > 0);
    check(&catalog, &uuid, "expiry");
    drop(catalog);
    let catalog = open(&path);
    commit_append(&catalog, &uuid, 1000..1010);
    check(&catalog, &uuid, "append after reopen");
}
