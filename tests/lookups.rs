//! Point lookups through deletes, upserts and time travel.

mod common;

use common::*;

/// A keyed table `main.t` of keys 0..10,000 (names "n<key>") in two committed files.
fn keyed_table_of_two_files(dir: &TestDir) -> (Catalog, String) {
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    txn.commit().unwrap();
    for range in [0..5000, 5000..10_000] {
        commit_append(&catalog, &uuid, range);
    }
    (catalog, uuid)
}

/// Writes the row (id, name) in `txn`, as one statement.
fn write_row(txn: &Transaction, uuid: &str, id: i64, name: &str) {
    let mut w = txn.writer(uuid).unwrap();
    let id: ArrayRef = Arc::new(Int64Array::from(vec![id]));
    let name: ArrayRef = Arc::new(StringArray::from(vec![name]));
    w.write(&StructArray::from(RecordBatch::try_new(Arc::new(columns()), vec![id, name]).unwrap())).unwrap();
    txn.stage_files(uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(uuid).unwrap();
}

#[test]
fn lookups_find_the_live_row_through_deletes_upserts_and_time_travel() {
    let dir = TestDir::new();
    let (catalog, uuid) = keyed_table_of_two_files(&dir);
    let before = catalog.begin().table_by_uuid(&uuid).unwrap().metadata.current_snapshot_id();
    let n = |i: i64| format!("n{i}");
    let txn = catalog.begin();
    assert_eq!(lookup(&txn, &uuid, None, &[0, 4999, 5000, 9999]), [0, 4999, 5000, 9999].map(|i| (i, n(i))));
    assert!(lookup(&txn, &uuid, None, &[-1, 10_000, 1 << 40]).is_empty(), "absent keys");

    // deletes and an upsert in one transaction
    let txn = catalog.begin();
    delete_where(&txn, &uuid, |id| id % 1000 == 7 || id == 42);
    write_row(&txn, &uuid, 42, "upserted");
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
    let upserted = |i: i64| if i == 42 { "upserted".to_string() } else { n(i) };
    assert_eq!(found, all.iter().map(|&i| (i, upserted(i))).collect::<Vec<_>>());
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

/// Another writer's equality deletes on a column other than the key: a key list's candidates are
/// checked on their decoded rows, and a key whose newest row is deleted so is not answered from
/// an older file; equality deletes on the key itself apply too.
#[test]
fn lookups_apply_other_writers_equality_deletes_on_any_column() {
    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat};
    let dir = TestDir::new();
    let (catalog, uuid) = keyed_table_of_two_files(&dir);
    let deletes = |name: &str, column: Field, values: ArrayRef, field_id: i32| {
        let rows = values.len() as u64;
        let batch = RecordBatch::try_new(Arc::new(Schema::new(vec![column])), vec![values]).unwrap();
        let path = dir.path().join(name);
        let size = write_plain_parquet(&path, &batch);
        DataFileBuilder::default()
            .content(DataContentType::EqualityDeletes)
            .file_path(path.to_str().unwrap().to_string())
            .file_format(DataFileFormat::Parquet)
            .record_count(rows)
            .file_size_in_bytes(size)
            .equality_ids(Some(vec![field_id]))
            .partition_spec_id(0)
            .build()
            .unwrap()
    };
    let names: ArrayRef = Arc::new(StringArray::from(vec!["n5", "n6000", "n6001"]));
    let txn = catalog.begin();
    txn.add_delete_files(
        &uuid,
        vec![
            deletes("eq-name.parquet", Field::new("name", DataType::Utf8, false), names, 2),
            deletes("eq-id.parquet", Field::new("id", DataType::Int64, false), Arc::new(Int64Array::from(vec![7])), 1),
        ],
    )
    .unwrap();
    txn.commit().unwrap();
    let n = |i: i64| (i, format!("n{i}"));
    let txn = catalog.begin();
    assert_eq!(lookup(&txn, &uuid, None, &[5, 6, 6000, 7, 8, 6001, 5000]), [n(6), n(8), n(5000)]);
    assert_eq!(lookup(&txn, &uuid, None, &[6000]), []);

    // 6001 rewritten after the deletes: its new row is live, its old one stays deleted
    let txn = catalog.begin();
    delete_where(&txn, &uuid, |id| id == 6001);
    write_row(&txn, &uuid, 6001, "n6001");
    txn.commit().unwrap();
    let txn = catalog.begin();
    assert_eq!(lookup(&txn, &uuid, None, &[6001, 6000, 5]), [n(6001)]);
    let (all, _) = ids(&txn, &uuid, None);
    let found = lookup(&txn, &uuid, None, &(0..10_000).collect::<Vec<_>>());
    assert_eq!(found, all.iter().map(|&i| n(i)).collect::<Vec<_>>(), "a key list equals a scan");
    assert_eq!(all.len(), 10_000 - 3);
}
