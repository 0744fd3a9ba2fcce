//! `Transaction::add_files` (skade_add_files): Parquet files written without Iceberg field ids,
//! adopted where they lie, are read through the table's name mapping in the transaction and after
//! it, pruned by their footers' bounds, shown by the changelog as inserts, key-checked and looked
//! up on a keyed table, refused whole when one does not fit, and never removed by maintenance.

mod common;

use arrow::array::Int32Array;
use common::*;
use iceberg::spec::Operation;
use skade::format::expire::Retention;

/// A Parquet file of rows `ids` as another writer makes one: no field ids, `ID` in capitals and
/// narrower than the table's BIGINT; with an `extra` column when asked.
fn export(dir: &Path, name: &str, ids: std::ops::Range<i64>, extra: bool) -> String {
    let mut fields = vec![Field::new("ID", DataType::Int32, true), Field::new("name", DataType::Utf8, true)];
    let mut columns: Vec<ArrayRef> = vec![
        Arc::new(Int32Array::from_iter_values(ids.clone().map(|i| i as i32))),
        Arc::new(StringArray::from_iter_values(ids.clone().map(|i| format!("n{i}")))),
    ];
    if extra {
        fields.push(Field::new("extra", DataType::Int64, true));
        columns.push(Arc::new(Int64Array::from_iter_values(ids)));
    }
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join(name);
    write_plain_parquet(&path, &RecordBatch::try_new(Arc::new(Schema::new(fields)), columns).unwrap());
    std::fs::canonicalize(&path).unwrap().to_str().unwrap().to_string()
}

#[test]
fn adopted_files_are_read_committed_and_never_removed() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    commit_append(&catalog, &uuid, 0..10);
    let before = current_snapshot(&catalog, &uuid);
    let exports = dir.path().join("exports");
    let a = export(&exports, "a.parquet", 10..20, false);
    let b = export(&exports, "b.parquet", 20..25, false);

    let txn = catalog.begin();
    let (_, added) = txn.add_files(&uuid, &[a.clone(), b.clone()]).unwrap();
    assert_eq!((added.files, added.rows), (2, 15));
    // the transaction reads the rows before their names are committed, pruned by their bounds
    assert_eq!(ids(&txn, &uuid, None).0, (0..25).collect::<Vec<_>>());
    let from_20 = Prune::Compare { field_id: 1, cmp: Cmp::Ge, value: Datum::long(20) };
    assert_eq!(ids(&txn, &uuid, Some(from_20.clone())), ((20..25).collect(), 1));
    txn.commit().unwrap();

    let md = catalog.begin().table_by_uuid(&uuid).unwrap().metadata;
    assert_eq!(md.current_snapshot().unwrap().summary().operation, Operation::Append);
    let mapping = md.properties().get("schema.name-mapping.default").expect("a name mapping");
    assert!(mapping.contains("\"ID\"") && mapping.contains("\"name\""), "{mapping}");
    assert_eq!(ids(&catalog.begin(), &uuid, Some(from_20)), ((20..25).collect(), 1));
    let inserted = changes(&catalog, &uuid, before, false);
    assert_eq!(inserted.len(), 15);
    assert!(inserted.iter().all(|(id, name, change, _)| *name == format!("n{id}") && change == "INSERT"));

    // compaction, then expiry of everything before it: the table's own old file goes, the
    // adopted ones stay where they were
    let own: Vec<_> = live_files(&catalog, &uuid)
        .data
        .iter()
        .map(|e| e.file().file_path().to_string())
        .filter(|p| *p != a && *p != b)
        .collect();
    assert_eq!(own.len(), 1);
    catalog.compact("main", "t").unwrap();
    let retention = Retention { older_than_ms: None, retain_last: Some(1) };
    assert!(catalog.expire_snapshots("main", "t", retention).unwrap().expired_snapshots > 0);
    assert!(!Path::new(&own[0]).exists());
    assert!(Path::new(&a).exists() && Path::new(&b).exists());
    assert_eq!(ids(&catalog.begin(), &uuid, None).0, (0..25).collect::<Vec<_>>());
}

#[test]
fn a_file_that_does_not_fit_refuses_the_call_and_a_rollback_keeps_the_files() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    let exports = dir.path().join("exports");
    let good = export(&exports, "good.parquet", 0..5, false);
    let bad = export(&exports, "bad.parquet", 5..10, true);
    let txn = catalog.begin();
    let err = txn.add_files(&uuid, &[good.clone(), bad]).unwrap_err();
    assert!(err.message.contains("bad.parquet") && err.message.contains("column extra"), "{}", err.message);
    assert!(!txn.has_changes());
    let missing = exports.join("missing.parquet").to_str().unwrap().to_string();
    assert!(txn.add_files(&uuid, &[missing]).unwrap_err().message.contains("missing.parquet"));

    txn.add_files(&uuid, std::slice::from_ref(&good)).unwrap();
    assert_eq!(ids(&txn, &uuid, None).0, (0..5).collect::<Vec<_>>());
    txn.rollback();
    assert!(Path::new(&good).exists());
    assert!(ids(&catalog.begin(), &uuid, None).0.is_empty());
}

#[test]
fn keys_of_adopted_files_are_checked_and_looked_up() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "k");
    txn.commit().unwrap();
    commit_append(&catalog, &uuid, 0..10);
    let exports = dir.path().join("exports");
    let fresh = export(&exports, "fresh.parquet", 10..20, false);
    let clash = export(&exports, "clash.parquet", 5..6, false);

    let txn = catalog.begin();
    txn.add_files(&uuid, &[fresh]).unwrap();
    assert_eq!(lookup(&txn, &uuid, None, &[15, 3]), vec![(15, "n15".to_string()), (3, "n3".to_string())]);
    let err = txn.add_files(&uuid, &[clash]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Constraint);
    assert!(err.message.contains("Duplicate key \"id: 5\""), "{}", err.message);
    txn.commit().unwrap();
    assert_eq!(lookup(&catalog.begin(), &uuid, None, &[19]), vec![(19, "n19".to_string())]);
}
