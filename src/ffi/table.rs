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

/// The columns, as the Arrow schema scans produce. A column's comment is its field's `doc`
/// metadata (the iceberg crate's mapping carries Iceberg's field doc so), its DEFAULT (v3) the
/// text under `skade.default` (the shim casts it to the column's type).
#[no_mangle]
pub unsafe extern "C" fn skade_table_arrow_schema(
    table: *const SkadeTable,
    result: *mut FFI_ArrowSchema,
) -> *mut SkadeStatus {
    guard(|| {
        let t = handle(table, "table")?;
        let iceberg = t.info.schema()?;
        let schema = arrow_schema(iceberg.as_ref())?;
        let schema = t.info.facing()?.schema(&schema); // (DuckDB's own types kept)
        let schema = crate::format::defaults::with_write_defaults(schema, &iceberg);
        out(result, FFI_ArrowSchema::try_from(schema.as_ref())?)
    })
}

/// The table's comment (COMMENT ON TABLE: the table property `comment`): one string, or none when
/// it has none. Its columns' comments are their fields' `doc` in `skade_table_arrow_schema`.
#[no_mangle]
pub unsafe extern "C" fn skade_table_comment(
    table: *const SkadeTable,
    result: *mut *mut SkadeStrings,
) -> *mut SkadeStatus {
    guard(|| {
        let t = handle(table, "table")?;
        let comment = t.info.metadata.properties().get(crate::format::evolve::COMMENT_PROPERTY);
        out(result, SkadeStrings::boxed(comment.cloned()))
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

#[cfg(test)]
mod tests {
    use std::ffi::{CStr, CString};
    use std::sync::Arc;

    use arrow::datatypes::{DataType, Field, Schema};

    use super::*;
    use crate::catalog::options::AttachOptions;
    use crate::catalog::transaction::OnConflict;
    use crate::ffi::transaction::{skade_txn_alter_table, SkadeTxn};
    use crate::ffi::{skade_status_message, skade_strings_free, skade_strings_get, skade_strings_len};
    use crate::Catalog;

    /// COMMENT ON as the shim sends it: `op` with the column (or null) and the comment (or null).
    fn comment(txn: &SkadeTxn, op: &str, column: Option<&str>, text: Option<&str>) {
        let c = |s: &str| CString::new(s).unwrap();
        let (schema, name, op) = (c("main"), c("t"), c(op));
        let (column, text) = (column.map(c), text.map(c));
        let ptr = |s: &Option<CString>| s.as_ref().map_or(std::ptr::null(), |s| s.as_ptr());
        let mut changed = false;
        let status = unsafe {
            skade_txn_alter_table(
                txn,
                schema.as_ptr(),
                name.as_ptr(),
                op.as_ptr(),
                ptr(&column),
                ptr(&text),
                false,
                std::ptr::null(),
                std::ptr::null(),
                std::ptr::null_mut(),
                &mut changed,
            )
        };
        assert!(status.is_null(), "{:?}", unsafe { CStr::from_ptr(skade_status_message(status)) });
        assert!(changed);
    }

    /// What the shim reads of `t`: its comment, each column's comment, its shape id.
    fn read_back(catalog: &Catalog) -> (Vec<String>, Vec<Option<String>>, i32) {
        let info = catalog.begin().table("main", "t").unwrap().unwrap();
        let table = SkadeTable::boxed(info).unwrap();
        let mut strings = std::ptr::null_mut();
        assert!(unsafe { skade_table_comment(table, &mut strings) }.is_null());
        let comment = (0..unsafe { skade_strings_len(strings) })
            .map(|i| unsafe { CStr::from_ptr(skade_strings_get(strings, i)) }.to_string_lossy().into_owned())
            .collect();
        unsafe { skade_strings_free(strings) };
        let mut ffi = FFI_ArrowSchema::empty();
        assert!(unsafe { skade_table_arrow_schema(table, &mut ffi) }.is_null());
        let docs = Schema::try_from(&ffi).unwrap().fields().iter().map(|f| f.metadata().get("doc").cloned()).collect();
        let shape = unsafe { skade_table_schema_id(table) };
        unsafe { skade_table_free(table) };
        (comment, docs, shape)
    }

    #[test]
    fn comments_reach_the_shim_and_survive_reopening() {
        let dir = std::env::temp_dir().join(format!("skade-ffi-comments-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let open = || Catalog::open(&dir.join("lake.skade"), AttachOptions::default()).unwrap();
        let catalog = open();
        let columns = Schema::new(vec![Field::new("id", DataType::Int64, true), Field::new("v", DataType::Utf8, true)]);
        let types = ["BIGINT".to_string(), "VARCHAR".to_string()];
        let txn = catalog.begin();
        txn.create_table("main", "t", &columns, &types, &[], &[], &[], &[], OnConflict::Error).unwrap();
        txn.commit().unwrap();
        let (_, _, plain) = read_back(&catalog);

        let txn = SkadeTxn(Arc::new(catalog.begin()));
        comment(&txn, "set_comment", None, Some("the table"));
        comment(&txn, "set_column_comment", Some("V"), Some(""));
        txn.0.commit().unwrap();
        let (table, docs, commented) = read_back(&catalog);
        assert_eq!(table, vec!["the table".to_string()]);
        assert_eq!(docs, vec![None, Some(String::new())]);
        assert_ne!(commented, plain, "a column's comment is a new shape");

        // both stay across reopening
        let txn = SkadeTxn(Arc::new(catalog.begin()));
        comment(&txn, "set_comment", None, Some("renamed"));
        txn.0.commit().unwrap();
        drop((txn, catalog));
        let catalog = open();
        let (table, docs, _) = read_back(&catalog);
        assert_eq!((table, docs), (vec!["renamed".to_string()], vec![None, Some(String::new())]));

        // null removes them
        let txn = SkadeTxn(Arc::new(catalog.begin()));
        comment(&txn, "set_comment", None, None);
        comment(&txn, "set_column_comment", Some("v"), None);
        txn.0.commit().unwrap();
        let (table, docs, _) = read_back(&catalog);
        assert_eq!((table, docs), (vec![], vec![None, None]));
        drop(catalog);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
