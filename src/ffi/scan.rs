//! Scans: planned once per query, then read file by file from DuckDB's threads.

use std::ffi::c_char;

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
        let plan = txn.scan(table, columns, prune, row_ids)?.with_duckdb_types();
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
