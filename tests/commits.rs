//! Commits of concurrent transactions: what rebases and what conflicts, and primary-key checks.

mod common;

use common::*;

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

/// Appends to one table build on the request still in flight (docs/design/commit.md, "Many
/// writers into one table"): eight threads of one-row commits, with a thread deleting meanwhile,
/// each get a snapshot, a commit_seq and a changelog row of their own; the snapshots form one
/// chain; a key inserted by several threads at once lands exactly once.
#[test]
fn chained_appends_keep_one_snapshot_and_one_commit_each() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    txn.commit().unwrap();
    let first = catalog.head_seq();
    let start = {
        commit_append(&catalog, &uuid, -100..-90);
        current_snapshot(&catalog, &uuid)
    };
    let landed = std::sync::Mutex::new(vec![]);
    let duplicates = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for k in 0..8i64 {
            let (catalog, uuid, landed, duplicates) = (&catalog, &uuid, &landed, &duplicates);
            scope.spawn(move || {
                for n in 0..20 {
                    // every thread also races the others for the keys 0..20 (one of them wins each)
                    for key in [k * 1_000_000 + n + 1_000, n] {
                        let t = catalog.begin();
                        if try_append(&t, uuid, key..key + 1).is_err() {
                            duplicates.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            continue; // (a key live already)
                        }
                        match t.commit() {
                            Ok(_) => landed.lock().unwrap().push(key),
                            Err(e) if e.kind == ErrorKind::Conflict => {
                                duplicates.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            }
                            Err(e) => panic!("{}", e.message),
                        }
                    }
                }
            });
        }
        let (catalog, uuid) = (&catalog, &uuid);
        scope.spawn(move || {
            for id in -100..-90 {
                let t = catalog.begin();
                assert_eq!(delete_where(&t, uuid, |v| v == id), 1);
                // (a delete that lost to another commit's delete would retry; none deletes these)
                t.commit().unwrap();
            }
        });
    });
    let mut landed = landed.into_inner().unwrap();
    landed.sort_unstable();
    let mut expected: Vec<i64> = (0..8).flat_map(|k| (0..20).map(move |n| k * 1_000_000 + n + 1_000)).collect();
    expected.extend(0..20);
    expected.sort_unstable();
    assert_eq!(landed, expected, "every distinct key landed once, each racing key exactly once");
    assert_eq!(duplicates.into_inner(), 7 * 20);
    assert_eq!(ids(&catalog.begin(), &uuid, None).0, expected);
    // one commit (gapless seqs) and one snapshot per transaction, the snapshots one chain
    let log = catalog.commits_since(first, 10_000).unwrap();
    let seqs: Vec<u64> = log.iter().map(|r| r.seq).collect();
    assert_eq!(seqs, (first + 1..=first + log.len() as u64).collect::<Vec<_>>());
    assert_eq!(log.len(), 1 + 10 + expected.len());
    let md = catalog.begin().table_by_uuid(&uuid).unwrap().metadata;
    let mut at = md.current_snapshot().unwrap().clone();
    let mut chain = 1;
    while let Some(parent) = at.parent_snapshot_id() {
        at = md.snapshot_by_id(parent).unwrap().clone();
        chain += 1;
    }
    assert_eq!(chain, log.len());
    // the changelog has each transaction's row in its own snapshot
    let rows = changes(&catalog, &uuid, start, false);
    assert_eq!(rows.iter().filter(|r| r.2 == "INSERT").count(), expected.len());
    assert_eq!(rows.iter().filter(|r| r.2 == "DELETE").count(), 10);
}
