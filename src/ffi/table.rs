//! A table as the shim sees it: names, identity, columns, key.

use std::ffi::{c_char, CString};

use arrow::ffi::FFI_ArrowSchema;

use super::{free, guard, guard_value, handle, out, SkadeStatus, SkadeStrings};
use crate::catalog::TableInfo;
use crate::error::Result;
use crate::format::schema::arrow_schema;
use crate::write::writer::keeps_arrival_order;

pub struct SkadeTable {
    pub(crate) info: TableInfo,
    schema_name: CString,
    name: CString,
    uuid: CString,
}

impl SkadeTable {
    pub(crate) fn boxed(info: TableInfo) -> Result<*mut SkadeTable> {
        let c = |s: &str| CString::new(s.replace('\0', " ")).unwrap_or_default();
        Ok(Box::into_raw(Box::new(SkadeTable {
            schema_name: c(&info.record.schema),
            name: c(&info.record.name),
            uuid: c(&info.record.uuid),
            info,
        })))
    }
}

/// The same table read at an AT clause: `unit` VERSION (a snapshot id) or TIMESTAMP
/// (microseconds since the epoch, UTC).
#[no_mangle]
pub unsafe extern "C" fn skade_table_at(
    table: *const SkadeTable,
    unit: *const c_char,
    value: i64,
    result: *mut *mut SkadeTable,
) -> *mut SkadeStatus {
    guard(|| {
        let t = handle(table, "table")?;
        let pinned = t.info.at(super::arg(unit, "AT unit")?, value)?;
        out(result, SkadeTable::boxed(pinned)?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_table_free(table: *mut SkadeTable) {
    free(table)
}

#[no_mangle]
pub unsafe extern "C" fn skade_table_name(table: *const SkadeTable) -> *const c_char {
    guard_value(std::ptr::null(), || unsafe { table.as_ref() }.map(|t| t.name.as_ptr()).unwrap_or(std::ptr::null()))
}

#[no_mangle]
pub unsafe extern "C" fn skade_table_schema_name(table: *const SkadeTable) -> *const c_char {
    guard_value(std::ptr::null(), || {
        unsafe { table.as_ref() }.map(|t| t.schema_name.as_ptr()).unwrap_or(std::ptr::null())
    })
}

/// The table's identity (its Iceberg uuid): scans and writes name the table by it.
#[no_mangle]
pub unsafe extern "C" fn skade_table_uuid(table: *const SkadeTable) -> *const c_char {
    guard_value(std::ptr::null(), || unsafe { table.as_ref() }.map(|t| t.uuid.as_ptr()).unwrap_or(std::ptr::null()))
}

/// The id of the columns a read of the table sees (its schema, pinned by an AT clause or
/// current, and the DuckDB types it keeps: `TableInfo::shape_id`). A (uuid, id) pair never changes
/// meaning, so the shim caches what it derives from the columns under it.
#[no_mangle]
pub unsafe extern "C" fn skade_table_schema_id(table: *const SkadeTable) -> i32 {
    guard_value(-1, || unsafe { table.as_ref() }.and_then(|t| t.info.shape_id().ok()).unwrap_or(-1))
}

/// The columns, as the Arrow schema scans produce.
#[no_mangle]
pub unsafe extern "C" fn skade_table_arrow_schema(
    table: *const SkadeTable,
    result: *mut FFI_ArrowSchema,
) -> *mut SkadeStatus {
    guard(|| {
        let t = handle(table, "table")?;
        let schema = arrow_schema(t.info.schema()?.as_ref())?;
        let schema = t.info.facing()?.schema(&schema); // (DuckDB's own types kept)
        out(result, FFI_ArrowSchema::try_from(schema.as_ref())?)
    })
}

/// Primary-key column names in the order PRIMARY KEY declared them (Iceberg's identifier fields
/// are a set: the order is a table property, see `schema::declared_key_ids`).
#[no_mangle]
pub unsafe extern "C" fn skade_table_primary_key(
    table: *const SkadeTable,
    result: *mut *mut SkadeStrings,
) -> *mut SkadeStatus {
    guard(|| {
        let t = handle(table, "table")?;
        let schema = t.info.metadata.current_schema();
        let ids = crate::format::schema::declared_key_ids(schema, t.info.metadata.properties());
        let names: Vec<String> =
            ids.into_iter().filter_map(|id| schema.name_by_field_id(id).map(str::to_string)).collect();
        out(result, SkadeStrings::boxed(names))
    })
}

/// Whether the table's new files keep their rows in the order written (no sort order, primary
/// key or partitioning reorders them): only then does a statement's order need keeping.
#[no_mangle]
pub unsafe extern "C" fn skade_table_keeps_arrival_order(table: *const SkadeTable) -> bool {
    guard_value(false, || unsafe { table.as_ref() }.is_some_and(|t| keeps_arrival_order(&t.info.metadata)))
}

/// Rows in the current snapshot (from its summary; deletes not subtracted), for DuckDB's planner.
#[no_mangle]
pub unsafe extern "C" fn skade_table_estimated_rows(table: *const SkadeTable) -> u64 {
    guard_value(0, || {
        unsafe { table.as_ref() }
            .and_then(|t| t.info.metadata.current_snapshot().cloned())
            .and_then(|s| s.summary().additional_properties.get("total-records").and_then(|v| v.parse().ok()))
            .unwrap_or(0)
    })
}
