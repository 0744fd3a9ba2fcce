//! The changelog of snapshots that remove files.

mod common;

use common::*;

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

/// Another writer's upsert by equality deletes (skade writes position deletes only): one snapshot
/// of deleted keys and new rows is UPDATE pairs and DELETEs in the changelog, and lookups and
/// scans apply the deletes.
#[test]
fn equality_deletes_of_other_writers_pair_into_updates() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "k");
    txn.commit().unwrap();
    commit_append(&catalog, &uuid, 0..3000);
    let before = current_snapshot(&catalog, &uuid);
    let txn = catalog.begin();
    txn.add_delete_files(&uuid, vec![foreign_equality_deletes(dir.path(), "eq.parquet", &[5, 6, 2500])]).unwrap();
    let mut w = txn.writer(&uuid).unwrap();
    let id: ArrayRef = Arc::new(Int64Array::from(vec![5, 6]));
    let name: ArrayRef = Arc::new(StringArray::from(vec!["five", "six"]));
    w.write(&StructArray::from(RecordBatch::try_new(Arc::new(columns()), vec![id, name]).unwrap())).unwrap();
    txn.stage_files(&uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(&uuid).unwrap();
    txn.commit().unwrap();

    let c = |i: i64, name: &str, change: &str| (i, name.to_string(), change.to_string(), false);
    let expected = vec![
        c(5, "five", "UPDATE_AFTER"),
        c(5, "n5", "UPDATE_BEFORE"),
        c(6, "n6", "UPDATE_BEFORE"),
        c(6, "six", "UPDATE_AFTER"),
        c(2500, "n2500", "DELETE"),
    ];
    assert_eq!(changes(&catalog, &uuid, before, false), expected);
    assert_eq!(changes(&catalog, &uuid, before, true), expected);
    let txn = catalog.begin();
    assert_eq!(
        lookup(&txn, &uuid, None, &[5, 6, 7, 2500]),
        vec![(5, "five".into()), (6, "six".into()), (7, "n7".into())]
    );
    let (got, _) = ids(&txn, &uuid, None);
    assert_eq!(got.len(), 2999);
    assert!(!got.contains(&2500));
}
