//! Scans: planned once per query, then read file by file from DuckDB's threads.

use std::ffi::c_char;

use arrow::array::{RecordBatch, RecordBatchIterator};
use arrow::ffi::{FFI_ArrowArray, FFI_ArrowSchema};
use arrow::ffi_stream::FFI_ArrowArrayStream;

use super::table::SkadeTable;
use super::transaction::SkadeTxn;
use super::{free, guard, guard_value, handle, out, SkadeStatus};
use crate::format::duckdb_types::Facing;
use crate::read::filter::Prune;
use crate::read::scan::ScanPlan;

/// A planned scan, and how its rows leave for DuckDB (the columns' kept DuckDB types).
pub struct SkadeScan(ScanPlan, Facing);

/// Plans a scan of `table` as it was bound (so a statement that replaces the table still reads
/// the version it named). `columns` are top-level column indexes in output order (none:
/// count only). `filter_json` describes DuckDB's pushed-down filters, whose constants are the
/// one-row struct `constants` (may be null). The table's version (AT clause) decides the snapshot.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn skade_scan_open(
    txn: *const SkadeTxn,
    table: *const SkadeTable,
    columns: *const u64,
    n_columns: usize,
    lineage: bool,
    row_ids: bool,
    filter_json: *const c_char,
    constants: *mut FFI_ArrowArray,
    constants_schema: *const FFI_ArrowSchema,
    result: *mut *mut SkadeScan,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let columns: Vec<usize> = if n_columns == 0 {
            vec![]
        } else {
            unsafe { std::slice::from_raw_parts(columns, n_columns) }.iter().map(|&c| c as usize).collect()
        };
        let table = &handle(table, "table")?.info;
        let (json, constants) = unsafe { super::filters(filter_json, constants, constants_schema) }?;
        let prune = Prune::parse(json, constants.as_ref(), table.schema()?.as_ref())?;
        // each task's stream carries its own schema (dictionary-encoded strings, narrow
        // decimals): the shim converts per stream
        let plan = txn.scan_with_lineage(table, columns, prune, row_ids, lineage)?.with_duckdb_types();
        let facing = table.facing()?;
        out(result, Box::into_raw(Box::new(SkadeScan(plan, facing))))
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_scan_free(scan: *mut SkadeScan) {
    free(scan)
}

#[no_mangle]
pub unsafe extern "C" fn skade_scan_task_count(scan: *const SkadeScan) -> u64 {
    guard_value(0, || unsafe { scan.as_ref() }.map(|s| s.0.task_count() as u64).unwrap_or(0))
}

#[no_mangle]
pub unsafe extern "C" fn skade_scan_task_rows(scan: *const SkadeScan, task: u64) -> u64 {
    guard_value(0, || unsafe { scan.as_ref() }.map(|s| s.0.task_rows(task as usize)).unwrap_or(0))
}

#[no_mangle]
pub unsafe extern "C" fn skade_scan_estimated_rows(scan: *const SkadeScan) -> u64 {
    guard_value(0, || unsafe { scan.as_ref() }.map(|s| s.0.estimated_rows()).unwrap_or(0))
}

/// The Arrow stream of one planned file. Each stream is independent: DuckDB threads read
/// different tasks concurrently.
#[no_mangle]
pub unsafe extern "C" fn skade_scan_task_stream(
    scan: *const SkadeScan,
    task: u64,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let scan = handle(scan, "scan")?;
        let reader = scan.1.reader(scan.0.open(task as usize)?);
        out(result, super::export_stream(reader))
    })
}

/// The column statistics of a scan of `table` (as bound, at its version) for DuckDB's optimizer:
/// `result` streams one two-row batch of the table's columns, row 0 their lower bounds and row 1
/// their upper bounds (NULL: unknown); `null_free[i]` says whether column i holds no NULL.
/// `n_columns` is the table's column count (the length of `null_free`). `max_rows` gets the rows
/// of the data files the scan reads, before deletes: no scan returns more.
#[no_mangle]
pub unsafe extern "C" fn skade_scan_column_stats(
    txn: *const SkadeTxn,
    table: *const SkadeTable,
    null_free: *mut bool,
    n_columns: usize,
    max_rows: *mut u64,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let table = &handle(table, "table")?.info;
        let (bounds, no_nulls, rows) = txn.column_stats(table)?;
        out(max_rows, rows)?;
        if no_nulls.len() != n_columns || null_free.is_null() {
            return Err(crate::error::Error::internal(format!(
                "column statistics: the table has {} columns, the caller expects {n_columns}",
                no_nulls.len()
            )));
        }
        unsafe { std::slice::from_raw_parts_mut(null_free, n_columns) }.copy_from_slice(&no_nulls);
        // In the DuckDB types the table keeps (as its rows leave). A bound a kept type cannot hold
        // would fail the scan too; here it only makes every bound unknown.
        let facing = table.facing()?;
        let schema = facing.schema(&bounds.schema());
        let bounds = match facing.batch(bounds, &schema) {
            Ok(bounds) => bounds,
            Err(_) => unknown_bounds(&schema)?,
        };
        let reader = RecordBatchIterator::new([Ok(bounds)], schema);
        out(result, super::export_stream(reader))
    })
}

/// Two rows of NULL in every column of `schema`.
fn unknown_bounds(schema: &arrow::datatypes::SchemaRef) -> crate::error::Result<RecordBatch> {
    let columns = schema.fields().iter().map(|f| arrow::array::new_null_array(f.data_type(), 2)).collect();
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}
