//! Sorted tables in the core (issue 43): a write sorts each file by the table's sort order and
//! records the order's id in the file's manifest entry; sorted files have bounds tight enough that
//! a filter on the sort column reads one row group of rows inserted in a scrambled order; a
//! compaction rewrites files not in the table's order into files that are.

mod common;
use common::*;
use skade::format::evolve::SchemaChange;
use skade::format::sort_order::parse_sort_keys;

/// 400,000 ids (a permutation of `0..400_000`) in a scrambled order.
fn scrambled() -> Vec<i64> {
    (0..400_000i64).map(|i| i * 7919 % 400_000).collect()
}

fn rows_of(ids: &[i64]) -> StructArray {
    let id: ArrayRef = Arc::new(Int64Array::from(ids.to_vec()));
    let name: ArrayRef = Arc::new(StringArray::from_iter_values(ids.iter().map(|i| format!("n{i}"))));
    StructArray::from(RecordBatch::try_new(Arc::new(columns()), vec![id, name]).unwrap())
}

/// SET SORTED BY (id DESC NULLS LAST) on `main.t`.
fn sort_by_id_descending(txn: &Transaction) {
    let keys = parse_sort_keys(r#"[{"expr":{"column":"id"},"descending":true,"nulls_first":false}]"#).unwrap();
    assert!(txn.alter_table("main", "t", &SchemaChange::SetSortOrder { keys }).unwrap());
}

/// The ids of every file of the table, file by file, in the order the files hold them.
fn ids_in_file_order(catalog: &Catalog, uuid: &str) -> Vec<i64> {
    let txn = catalog.begin();
    let plan = txn.scan(&txn.table_by_uuid(uuid).unwrap(), vec![0], None, false).unwrap();
    let mut out = vec![];
    for t in 0..plan.task_count() {
        for b in plan.open(t).unwrap() {
            out.extend(b.unwrap().column(0).as_primitive::<Int64Type>().values().iter().copied());
        }
    }
    out
}

#[test]
fn a_sorted_tables_files_are_sorted_record_the_order_and_prune_row_groups() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    let txn = catalog.begin();
    sort_by_id_descending(&txn);
    let order_id = txn.table_by_uuid(&uuid).unwrap().metadata.default_sort_order().order_id;
    assert_ne!(order_id, 0);
    let mut w = txn.writer(&uuid).unwrap();
    for chunk in scrambled().chunks(2048) {
        w.write(&rows_of(chunk)).unwrap();
    }
    txn.stage_files(&uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(&uuid).unwrap();
    txn.commit().unwrap();

    // one file (the rows fit one sorted run), its manifest entry naming the order
    let live = live_files(&catalog, &uuid);
    assert_eq!(live.data.len(), 1);
    assert_eq!(live.data[0].file().sort_order_id(), Some(order_id as i32));
    let ids = ids_in_file_order(&catalog, &uuid);
    assert_eq!(ids, (0..400_000).rev().collect::<Vec<_>>());

    // ids 249,990..250,020 lie in the second of the file's four row groups (ids 277,119 down to
    // 154,240): a scan with that filter reads that row group only. Unsorted, every row group
    // would hold ids of the whole range.
    let txn = catalog.begin();
    let range = Prune::And(vec![
        Prune::Compare { field_id: 1, cmp: Cmp::Ge, value: Datum::long(249_990) },
        Prune::Compare { field_id: 1, cmp: Cmp::Lt, value: Datum::long(250_020) },
    ]);
    let plan = txn.scan(&txn.table_by_uuid(&uuid).unwrap(), vec![0], Some(range), false).unwrap();
    let mut rows = 0;
    for t in 0..plan.task_count() {
        for b in plan.open(t).unwrap() {
            rows += b.unwrap().num_rows();
        }
    }
    assert_eq!(rows, 122_880, "one row group read");
}

#[test]
fn compaction_sorts_files_written_before_the_order() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    // one unsorted file: nothing to compact while the table has no order
    let txn = catalog.begin();
    let mut w = txn.writer(&uuid).unwrap();
    w.write(&rows_of(&scrambled()[..10_000])).unwrap();
    txn.stage_files(&uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(&uuid).unwrap();
    txn.commit().unwrap();
    assert_eq!(catalog.compact("main", "t").unwrap().added_data_files, 0);
    assert_eq!(live_files(&catalog, &uuid).data[0].file().sort_order_id(), None);

    // under an order it is out of order: the compaction rewrites it sorted
    let txn = catalog.begin();
    sort_by_id_descending(&txn);
    txn.commit().unwrap();
    let report = catalog.compact("main", "t").unwrap();
    assert_eq!((report.removed_data_files, report.added_data_files, report.rows), (1, 1, 10_000));
    let live = live_files(&catalog, &uuid);
    assert!(live.data[0].file().sort_order_id().is_some_and(|id| id > 0));
    let ids = ids_in_file_order(&catalog, &uuid);
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "sorted descending");
    assert_eq!(ids.len(), 10_000);
    // now in order: nothing to gain
    assert_eq!(catalog.compact("main", "t").unwrap().added_data_files, 0);

    // appends then a compaction: one file, sorted
    commit_append(&catalog, &uuid, 500_000..500_100);
    commit_append(&catalog, &uuid, 400_000..400_100);
    let report = catalog.compact("main", "t").unwrap();
    assert_eq!((report.removed_data_files, report.added_data_files), (3, 1));
    let ids = ids_in_file_order(&catalog, &uuid);
    assert!(ids.windows(2).all(|w| w[0] > w[1]), "sorted descending");
    assert_eq!(ids.len(), 10_200);
}

#[test]
fn dropping_a_sort_column_is_refused_and_reset_lifts_the_order() {
    let dir = TestDir::new();
    let (catalog, uuid) = catalog_with_table(&dir);
    let txn = catalog.begin();
    sort_by_id_descending(&txn);
    let drop = SchemaChange::DropColumn { path: vec!["id".into()], if_exists: false };
    let err = txn.alter_table("main", "t", &drop).unwrap_err();
    assert!(err.message.contains("the table is sorted by it"), "{err}");
    let reset = SchemaChange::SetSortOrder { keys: vec![] };
    assert!(txn.alter_table("main", "t", &reset).unwrap());
    assert!(!txn.alter_table("main", "t", &reset).unwrap(), "unsorted already");
    assert!(txn.alter_table("main", "t", &drop).unwrap());
    txn.commit().unwrap();
    let md = catalog.begin().table_by_uuid(&uuid).unwrap().metadata;
    assert!(md.default_sort_order().is_unsorted());
    assert_eq!(md.sort_orders_iter().count(), 2, "the unsorted order and the one set");
}

#[test]
fn partitioned_and_keyed_tables_sort_each_file_and_lookups_find_their_rows() {
    use skade::format::partition::parse_keys;
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    let spec = parse_keys(r#"[{"function":{"name":"bucket","args":[{"constant":"4"},{"column":"id"}]}}]"#).unwrap();
    assert!(txn.alter_table("main", "t", &SchemaChange::SetPartitioning { keys: spec }).unwrap());
    // by name descending (then by the key): not the key's order
    let keys = parse_sort_keys(r#"[{"expr":{"column":"name"},"descending":true,"nulls_first":false}]"#).unwrap();
    assert!(txn.alter_table("main", "t", &SchemaChange::SetSortOrder { keys }).unwrap());
    txn.commit().unwrap();

    let txn = catalog.begin();
    let mut w = txn.writer(&uuid).unwrap();
    for chunk in scrambled()[..20_000].chunks(1000) {
        w.write(&rows_of(chunk)).unwrap();
    }
    let written = w.finish().unwrap();
    assert_eq!(written.files.len(), 4, "one file per bucket");
    assert!(written.files.iter().all(|f| f.sort_order_id().is_some_and(|id| id > 0)));
    txn.stage_files(&uuid, written).unwrap();
    txn.end_statement(&uuid).unwrap();
    txn.commit().unwrap();

    // each file (a scan task of at most 20,000 rows: one per file) sorted by name descending
    let txn = catalog.begin();
    let plan = txn.scan(&txn.table_by_uuid(&uuid).unwrap(), vec![1], None, false).unwrap();
    assert_eq!(plan.task_count(), 4);
    let mut rows = 0;
    for t in 0..plan.task_count() {
        let names: Vec<String> = plan
            .open(t)
            .unwrap()
            .flat_map(|b| {
                let b = b.unwrap();
                (0..b.num_rows()).map(|i| b.column(0).as_string::<i32>().value(i).to_string()).collect::<Vec<_>>()
            })
            .collect();
        assert!(names.windows(2).all(|w| w[0] > w[1]), "task {t} sorted by name descending");
        rows += names.len();
    }
    assert_eq!(rows, 20_000);
    let mut found = lookup(&txn, &uuid, None, &[15_838, 0]);
    found.sort();
    assert_eq!(found, vec![(0, "n0".to_string()), (15_838, "n15838".to_string())]);
}
