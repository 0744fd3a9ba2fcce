//! Helpers the core tests share: catalogs in fresh directories, tables of (id, name) rows.
#![allow(dead_code, unused_imports)]

pub mod s3;

pub use arrow::array::{ArrayRef, AsArray, Int64Array, RecordBatch, StringArray, StructArray};
pub use arrow::datatypes::{DataType, Field, Int64Type, Schema};
pub use iceberg::spec::Datum;
pub use skade::catalog::options::AttachOptions;
pub use skade::catalog::transaction::OnConflict;
pub use skade::read::filter::{Cmp, Prune};
pub use skade::{Catalog, ErrorKind, Transaction};
pub use std::path::Path;
pub use std::sync::Arc;

/// A fresh directory, removed when dropped. (Not the `tempfile` crate: as a dev-dependency it
/// changes features of crates the release build shares, which would compile them twice.)
pub struct TestDir(pub std::path::PathBuf);

impl TestDir {
    pub fn new() -> Self {
        static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let dir = std::env::temp_dir().join(format!("skade-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        TestDir(dir)
    }
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

pub fn open(path: &Path) -> Catalog {
    Catalog::open(path, AttachOptions::default()).unwrap()
}

pub fn columns() -> Schema {
    Schema::new(vec![Field::new("id", DataType::Int64, true), Field::new("name", DataType::Utf8, true)])
}

/// A catalog in `dir` with one committed, empty table `main.t`, and the table's uuid.
pub fn catalog_with_table(dir: &TestDir) -> (Catalog, String) {
    let catalog = open(&dir.path().join("lake.skade"));
    let txn = catalog.begin();
    let uuid = create(&txn, "t");
    txn.commit().unwrap();
    (catalog, uuid)
}

pub fn create(txn: &Transaction, name: &str) -> String {
    let types = vec!["BIGINT".to_string(), "VARCHAR".to_string()];
    let t = txn.create_table("main", name, &columns(), &types, &[], &[], &[], &[], OnConflict::Error).unwrap().unwrap();
    t.record.uuid.clone()
}

pub fn rows(ids: std::ops::Range<i64>) -> StructArray {
    let id: ArrayRef = Arc::new(Int64Array::from_iter_values(ids.clone()));
    let name: ArrayRef = Arc::new(StringArray::from_iter_values(ids.map(|i| format!("n{i}"))));
    StructArray::from(RecordBatch::try_new(Arc::new(columns()), vec![id, name]).unwrap())
}

pub fn append(txn: &Transaction, uuid: &str, ids: std::ops::Range<i64>) {
    let mut w = txn.writer(uuid).unwrap();
    w.write(&rows(ids)).unwrap();
    txn.stage_files(uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(uuid).unwrap();
}

/// Appends the rows `ids` to the table `uuid` in a commit of their own.
pub fn commit_append(catalog: &Catalog, uuid: &str, ids: std::ops::Range<i64>) {
    let txn = catalog.begin();
    append(&txn, uuid, ids);
    txn.commit().unwrap();
}

pub fn ids(txn: &Transaction, uuid: &str, prune: Option<Prune>) -> (Vec<i64>, usize) {
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

pub fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
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

pub fn create_keyed(txn: &Transaction, name: &str) -> String {
    let types = vec!["BIGINT".to_string(), "VARCHAR".to_string()];
    let key = vec!["id".to_string()];
    let t =
        txn.create_table("main", name, &columns(), &types, &key, &key, &[], &[], OnConflict::Error).unwrap().unwrap();
    t.record.uuid.clone()
}

pub fn try_append(txn: &Transaction, uuid: &str, ids: std::ops::Range<i64>) -> skade::error::Result<()> {
    let mut w = txn.writer(uuid).unwrap();
    w.write(&rows(ids)).unwrap();
    txn.stage_files(uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(uuid)
}

/// Deletes the rows whose id satisfies `pred`, through the row ids of a scan (as DELETE does).
pub fn delete_where(txn: &Transaction, uuid: &str, pred: impl Fn(i64) -> bool) -> u64 {
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
pub fn manifests_by_tier(catalog: &Catalog, uuid: &str) -> std::collections::BTreeMap<(String, u32), usize> {
    let md = catalog.begin().table_by_uuid(uuid).unwrap().metadata;
    let cache = skade::format::manifests::ManifestCache::default();
    let mut out = std::collections::BTreeMap::new();
    for m in cache.manifest_list(&md, md.current_snapshot().unwrap()).unwrap().iter() {
        *out.entry((format!("{:?}", m.content), skade::format::snapshot::manifest_tier(m))).or_default() += 1;
    }
    out
}

/// Writes `batch` as a plain Parquet file, without Iceberg field ids (as some other writers do).
pub fn write_plain_parquet(path: &Path, batch: &RecordBatch) -> u64 {
    let file = std::fs::File::create(path).unwrap();
    let mut writer = parquet::arrow::ArrowWriter::try_new(file, batch.schema(), None).unwrap();
    writer.write(batch).unwrap();
    writer.close().unwrap();
    std::fs::metadata(path).unwrap().len()
}

/// The (id, name) rows `Transaction::lookup` finds for `keys`, at `as_of`.
pub fn lookup(txn: &Transaction, uuid: &str, as_of: Option<i64>, keys: &[i64]) -> Vec<(i64, String)> {
    let key: ArrayRef = Arc::new(Int64Array::from(keys.to_vec()));
    let keys = StructArray::from(vec![(Arc::new(Field::new("id", DataType::Int64, true)), key)]);
    let b = txn.lookup(uuid, as_of, &keys).unwrap().batch;
    let ids = b.column(0).as_primitive::<Int64Type>();
    let names = b.column(1).as_string::<i32>();
    (0..b.num_rows()).map(|i| (ids.value(i), names.value(i).to_string())).collect()
}

/// (id, name, _change_type, _full_reload) of `uuid`'s changelog after snapshot `from`, sorted.
pub fn changes(catalog: &Catalog, uuid: &str, from: i64, collapse: bool) -> Vec<(i64, String, String, bool)> {
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

pub fn current_snapshot(catalog: &Catalog, uuid: &str) -> i64 {
    catalog.begin().table_by_uuid(uuid).unwrap().metadata.current_snapshot_id().unwrap()
}

pub fn live_files(catalog: &Catalog, uuid: &str) -> skade::format::manifests::SnapshotFiles {
    let md = catalog.begin().table_by_uuid(uuid).unwrap().metadata;
    skade::format::manifests::ManifestCache::default().snapshot_files(&md, md.current_snapshot().unwrap()).unwrap()
}

/// An equality-delete file over the key `id` (field id 1) of the keys `keys`, as another Iceberg
/// writer makes them (skade itself writes position deletes only), described for `add_delete_files`.
pub fn foreign_equality_deletes(dir: &Path, name: &str, keys: &[i64]) -> iceberg::spec::DataFile {
    use iceberg::spec::{DataContentType, DataFileBuilder, DataFileFormat};
    let batch = RecordBatch::try_new(
        Arc::new(Schema::new(vec![Field::new("id", DataType::Int64, false)])),
        vec![Arc::new(Int64Array::from(keys.to_vec()))],
    )
    .unwrap();
    let path = dir.join(name);
    let size = write_plain_parquet(&path, &batch);
    DataFileBuilder::default()
        .content(DataContentType::EqualityDeletes)
        .file_path(path.to_str().unwrap().to_string())
        .file_format(DataFileFormat::Parquet)
        .record_count(keys.len() as u64)
        .file_size_in_bytes(size)
        .equality_ids(Some(vec![1]))
        .partition_spec_id(0)
        .build()
        .unwrap()
}
