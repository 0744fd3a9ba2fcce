//! Point lookups through deletes, upserts and time travel.

mod common;

use common::*;

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

    // deletes and an upsert in one transaction
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
