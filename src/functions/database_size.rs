//! `PRAGMA database_size` of a skade catalog: the bytes the lake holds as this transaction sees it,
//! the catalog file plus the data and delete files of every table's current snapshot (as DuckLake
//! counts its data files). Files only older snapshots still hold are left out: they go with
//! `skade_expire_snapshots`, and `du` shows them. Metadata and manifest files are left out too:
//! small, and not what a user sizes a lake by.

use iceberg::spec::{Snapshot, TableMetadata};

use crate::catalog::{Catalog, Transaction};
use crate::error::Result;
use crate::io::input::InputFile;

/// The snapshot summary's running total of the live files' sizes (data and deletes).
const TOTAL_FILES_SIZE: &str = "total-files-size";

pub fn bytes(txn: &Transaction) -> Result<u64> {
    let catalog = txn.catalog();
    let path = catalog.path().to_string_lossy();
    // (a catalog file that cannot be opened counts nothing: the pragma lists every database)
    let mut total = InputFile::open(&path, "catalog file").and_then(|f| f.size()).unwrap_or(0);
    for schema in txn.schemas()? {
        for record in txn.tables(&schema.name)? {
            let Some(table) = txn.table(&record.schema, &record.name)? else {
                continue;
            };
            let Some(snapshot) = table.metadata.current_snapshot() else {
                continue;
            };
            // Every snapshot skade writes keeps the total; one another engine wrote may not, and
            // then its manifests say.
            let summed: Option<u64> =
                snapshot.summary().additional_properties.get(TOTAL_FILES_SIZE).and_then(|v| v.parse().ok());
            total += match summed {
                Some(bytes) => bytes,
                None => live_files_bytes(catalog, &table.metadata, snapshot)?,
            };
        }
    }
    Ok(total)
}

/// The sizes of the live data and delete files of `snapshot`, from its manifests.
fn live_files_bytes(catalog: &Catalog, metadata: &TableMetadata, snapshot: &Snapshot) -> Result<u64> {
    let live = catalog.read_caches().manifests.snapshot_files(metadata, snapshot)?;
    Ok(live.data.iter().chain(&live.deletes).map(|e| e.file().file_size_in_bytes()).sum())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow::array::{ArrayRef, Int64Array, RecordBatch, StructArray};
    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::catalog::options::AttachOptions;
    use crate::catalog::transaction::OnConflict;

    #[test]
    fn the_size_is_the_catalog_file_and_the_live_files() {
        let dir = std::env::temp_dir().join(format!("skade-database-size-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let catalog = Catalog::open(&dir.join("lake.skade"), AttachOptions::default()).unwrap();
        let columns = Schema::new(vec![Field::new("id", DataType::Int64, true)]);
        let txn = catalog.begin();
        let types = ["BIGINT".to_string()];
        let table = txn.create_table("main", "t", &columns, &types, &[], &[], &[], &[], OnConflict::Error).unwrap();
        let uuid = table.unwrap().record.uuid.clone();
        txn.commit().unwrap();
        let catalog_file = || std::fs::metadata(dir.join("lake.skade")).unwrap().len();
        assert_eq!(bytes(&catalog.begin()).unwrap(), catalog_file(), "no snapshot, no files");
        for rows in [10, 1000] {
            let txn = catalog.begin();
            let mut writer = txn.writer(&uuid).unwrap();
            let id: ArrayRef = Arc::new(Int64Array::from_iter_values(0..rows));
            let batch = RecordBatch::try_new(Arc::new(columns.clone()), vec![id]).unwrap();
            writer.write(&StructArray::from(batch)).unwrap();
            txn.stage_files(&uuid, writer.finish().unwrap()).unwrap();
            txn.end_statement(&uuid).unwrap();
            txn.commit().unwrap();
        }
        let txn = catalog.begin();
        let table = txn.table("main", "t").unwrap().unwrap();
        let snapshot = table.metadata.current_snapshot().unwrap();
        let parquet: u64 = walk(&dir.join("lake.skade.data"))
            .iter()
            .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
            .map(|p| std::fs::metadata(p).unwrap().len())
            .sum();
        assert!(parquet > 0);
        // the summary's total and the manifests agree, with the files on disk
        assert_eq!(live_files_bytes(&catalog, &table.metadata, snapshot).unwrap(), parquet);
        assert_eq!(bytes(&txn).unwrap(), catalog_file() + parquet);
        drop((txn, catalog));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        let mut out = vec![];
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                out.extend(walk(&path));
            } else {
                out.push(path);
            }
        }
        out
    }
}
