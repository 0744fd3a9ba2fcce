//! Scans: pruning by bounds and statistics, time travel, row counts, foreign delete files, pinned keys.

mod common;

use common::*;

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
    // one task per 122,880 positions: each row group is read by the task it starts in
    assert_eq!(plan.task_count(), 4);
    let mut rows = 0;
    let mut seen = vec![];
    let mut per_task = vec![];
    for b in (0..plan.task_count()).flat_map(|t| plan.open(t).unwrap().map(move |b| (t, b))) {
        let (task, b) = b;
        per_task.push(task);
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
    assert!(per_task.iter().all(|&t| t == 2), "by the third task");
    assert!(seen.contains(&249_990) && !seen.contains(&250_005) && !seen.contains(&300_000));
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

#[test]
fn scans_whose_filters_pin_the_key_are_lookups() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    append(&txn, &uuid, 0..300_000);
    txn.commit().unwrap();
    let txn = catalog.begin();
    delete_where(&txn, &uuid, |id| id == 5);
    txn.commit().unwrap();
    let eq = |v: i64| Prune::Compare { field_id: 1, cmp: Cmp::Eq, value: Datum::long(v) };
    let txn = catalog.begin();
    // one planned task holding the rows found, not one per data file
    assert_eq!(ids(&txn, &uuid, Some(eq(6))), (vec![6], 1));
    assert_eq!(ids(&txn, &uuid, Some(eq(5))), (vec![], 1));
    let list = Prune::In {
        field_id: 1,
        values: vec![Datum::long(4), Datum::long(5), Datum::long(299_999), Datum::long(300_000)],
    };
    assert_eq!(ids(&txn, &uuid, Some(list)).0, vec![4, 299_999]);
    // a range does not pin the key: the usual scan, pruned to the first row group (122,880 rows,
    // one of them deleted)
    let range = Prune::Compare { field_id: 1, cmp: Cmp::Lt, value: Datum::long(3) };
    assert_eq!(ids(&txn, &uuid, Some(range)).0.len(), 122_879);
}

/// Other writers' equality deletes on a file read by several tasks: each task applies the
/// positions they remove (found once per file and set of delete files), with row ids and counts
/// exact, and a later DELETE through those row ids removes exactly the rows it names.
#[test]
fn equality_deletes_become_positions_shared_by_a_files_tasks() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    append(&txn, &uuid, 0..300_000); // one file, three tasks
    txn.commit().unwrap();
    let txn = catalog.begin();
    let gone = [0, 1, 122_879, 122_880, 150_000, 299_999];
    txn.add_delete_files(&uuid, vec![foreign_equality_deletes(dir.path(), "eq.parquet", &gone)]).unwrap();
    txn.commit().unwrap();

    let txn = catalog.begin();
    let (got, tasks) = ids(&txn, &uuid, None);
    assert_eq!(tasks, 3);
    let expected: Vec<i64> = (0..300_000).filter(|i| !gone.contains(i)).collect();
    assert_eq!(got, expected);
    // a count reads no column, yet the equality deletes apply
    let plan = txn.scan(&txn.table_by_uuid(&uuid).unwrap(), vec![], None, false).unwrap();
    let n: usize = (0..plan.task_count()).flat_map(|t| plan.open(t).unwrap()).map(|b| b.unwrap().num_rows()).sum();
    assert_eq!(n, 300_000 - gone.len());
    // row ids skip the deleted rows: deleting through them removes exactly the rows chosen
    assert_eq!(delete_where(&txn, &uuid, |id| id % 1000 == 0 || id == 122_881), 300 - 2 + 1);
    txn.commit().unwrap();
    let (got, _) = ids(&catalog.begin(), &uuid, None);
    let expected: Vec<i64> = (0..300_000).filter(|i| !gone.contains(i) && i % 1000 != 0 && *i != 122_881).collect();
    assert_eq!(got, expected);
}

/// A row group may run past its task's positions (another writer's larger row groups): the task
/// applies the equality deletes of every position it reads, not only of its own range.
#[test]
fn equality_deletes_apply_on_row_groups_larger_than_a_task() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create_keyed(&txn, "t");
    append(&txn, &uuid, 0..300_000);
    txn.commit().unwrap();
    // the one data file again as a single row group (same rows and field ids), as others write
    let path = live_files(&catalog, &uuid).data[0].file().file_path().to_string();
    let reader =
        parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&path).unwrap())
            .unwrap()
            .build()
            .unwrap();
    let schema = arrow::array::RecordBatchReader::schema(&reader);
    let batches: Vec<RecordBatch> = reader.map(|b| b.unwrap()).collect();
    let props =
        parquet::file::properties::WriterProperties::builder().set_max_row_group_row_count(Some(1 << 20)).build();
    let mut w =
        parquet::arrow::ArrowWriter::try_new(std::fs::File::create(&path).unwrap(), schema, Some(props)).unwrap();
    for b in &batches {
        w.write(b).unwrap();
    }
    w.close().unwrap();
    let txn = catalog.begin();
    let gone = [5, 122_879, 122_880, 200_000, 299_999];
    txn.add_delete_files(&uuid, vec![foreign_equality_deletes(dir.path(), "eq.parquet", &gone)]).unwrap();
    txn.commit().unwrap();

    let txn = catalog.begin();
    let (got, tasks) = ids(&txn, &uuid, None);
    assert_eq!(tasks, 3, "the first task reads the whole row group, the others nothing");
    let expected: Vec<i64> = (0..300_000).filter(|i| !gone.contains(i)).collect();
    assert_eq!(got, expected);
}
