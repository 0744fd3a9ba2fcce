//! Catalogs: opening, reopening, copies, shared attaches, the commit log and feed, durability.

mod common;

use common::*;

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

#[test]
fn a_catalog_of_a_newer_format_is_refused_before_anything_is_read() {
    let dir = TestDir::new();
    let path = dir.path().join("lake.skade");
    let (catalog, _) = catalog_with_table(&dir);
    drop(catalog);
    {
        let db = redb::Database::open(&path).unwrap();
        let tx = db.begin_write().unwrap();
        tx.open_table(skade::catalog::tables::META).unwrap().insert("format", "skade-catalog-99").unwrap();
        tx.commit().unwrap();
    }
    for read_only in [false, true] {
        let options = AttachOptions { read_only, ..AttachOptions::default() };
        let err = Catalog::open(&path, options).err().expect("a newer format opened");
        assert!(err.message.contains("catalog format 99, written by a newer skade"), "{}", err.message);
        assert!(err.message.contains(&path.display().to_string()), "{}", err.message);
    }
}

/// The generation DuckDB's catalog version is made of: equal for transactions that read the same
/// committed state, new after every commit (another transaction's included), unchanged by a
/// rollback, a failed commit or a transaction's own uncommitted changes.
#[test]
fn generations_change_with_every_commit_and_nothing_else() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    let a = catalog.begin();
    let b = catalog.begin();
    assert_eq!(a.generation(), b.generation());
    append(&a, &uuid, 0..10);
    assert_eq!(a.generation(), b.generation(), "an uncommitted change is the transaction's own");
    let before = a.generation();
    a.rollback();
    assert_eq!(catalog.begin().generation(), before, "a rollback changes no committed state");
    commit_append(&catalog, &uuid, 0..10);
    let after = catalog.begin().generation();
    assert!(after > before);
    assert_eq!(b.generation(), before, "a transaction keeps the state it began on");
    // a commit that fails (a conflict) publishes nothing
    let c = catalog.begin();
    let d = catalog.begin();
    create(&c, "u");
    create(&d, "u");
    c.commit().unwrap();
    let landed = catalog.begin().generation();
    assert!(landed > after);
    assert!(d.commit().is_err());
    assert_eq!(catalog.begin().generation(), landed);
}
