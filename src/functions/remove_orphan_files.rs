//! `skade_remove_orphan_files(table, older_than := ts, dry_run := bool)`: removes the files in the
//! table's folders that no commit references and that are older than `older_than` (by default 3
//! days, Iceberg's default: a writer still uploading is never that old); one row per file, its
//! location (with `dry_run`, the files it would remove). As with Iceberg's, an `older_than`
//! shorter than the longest transaction can remove the files of one still open (in another
//! connection, process or host), which then commits pointers to missing files: keep it to days.

use std::sync::Arc;

use arrow::array::{ArrayRef, RecordBatch, StringArray};
use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

use crate::catalog::Transaction;
use crate::error::{Error, Result};

/// Iceberg's `remove_orphan_files` default age.
const DEFAULT_AGE_MS: i64 = 3 * 24 * 3600 * 1000;

pub fn schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("orphan_file_location", DataType::Utf8, false)]))
}

/// `older_than_us`: microseconds since the epoch, or None for 3 days ago.
pub fn run(txn: &Transaction, uuid: &str, older_than_us: Option<i64>, dry_run: bool) -> Result<RecordBatch> {
    let now_ms = chrono::Utc::now().timestamp_millis();
    let older_than_ms = older_than_us.map(|us| us.div_euclid(1000)).unwrap_or(now_ms - DEFAULT_AGE_MS);
    if older_than_ms > now_ms {
        return Err(Error::invalid(
            "skade_remove_orphan_files: older_than is in the future, which would remove files being written now",
        ));
    }
    let table = txn.table_by_uuid(uuid)?;
    let removed = txn.catalog().remove_orphan_files_as(
        txn.database(),
        &table.record.schema,
        &table.record.name,
        older_than_ms,
        dry_run,
    )?;
    let column: ArrayRef = Arc::new(StringArray::from(removed));
    Ok(RecordBatch::try_new(schema(), vec![column])?)
}
