//! Table functions: each returns its rows as an Arrow stream; `skade_function_schema` gives the
//! columns at bind time.

use std::ffi::c_char;

use arrow::array::RecordBatch;
use arrow::array::RecordBatchIterator;
use arrow::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};
use arrow::ffi_stream::FFI_ArrowArrayStream;

use super::catalog::SkadeCatalog;
use super::transaction::SkadeTxn;
use super::{arg, arg_list, column_list, guard, handle, out, SkadeStatus};
use crate::changelog::filters::Filters;
use crate::error::Error;
use crate::functions::{
    add_files, changelog, check, commit_log, commits_since, compact, consumers, expire_snapshots, lineage,
    lineage_delivery, lookup_stats, remove_orphan_files, serve, snapshots, tables, upgrade_table,
};

#[no_mangle]
pub unsafe extern "C" fn skade_function_schema(name: *const c_char, result: *mut FFI_ArrowSchema) -> *mut SkadeStatus {
    guard(|| {
        let schema = match arg(name, "function name")? {
            "skade_tables" => tables::schema(),
            "skade_snapshots" => snapshots::schema(),
            "skade_commits_since" => commits_since::schema(),
            "skade_lineage" => lineage::schema(),
            "skade_lineage_delivery" | "skade_lineage_flush" => lineage_delivery::schema(),
            "skade_check" => check::schema(),
            "skade_commit_log" => commit_log::schema(),
            "skade_expire_snapshots" => expire_snapshots::schema(),
            "skade_remove_orphan_files" => remove_orphan_files::schema(),
            "skade_serve" => serve::serve_schema(),
            "skade_servers" => serve::servers_schema(),
            "skade_serve_stop" => serve::stop_schema(),
            "skade_compact" => compact::schema(),
            "skade_upgrade_table" => upgrade_table::schema(),
            "skade_add_files" => add_files::schema(),
            "skade_lookup_stats" => lookup_stats::schema(),
            "skade_consumers" => consumers::schema(),
            "skade_drop_consumer" => consumers::drop_schema(),
            other => return Err(Error::internal(format!("unknown function {other}"))),
        };
        out(result, FFI_ArrowSchema::try_from(schema.as_ref())?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_tables(txn: *const SkadeTxn, result: *mut FFI_ArrowArrayStream) -> *mut SkadeStatus {
    guard(|| {
        let batch = tables::rows(&handle(txn, "transaction")?.0)?;
        let reader = RecordBatchIterator::new([Ok(batch)], tables::schema());
        out(result, super::export_stream(reader))
    })
}

/// PRAGMA database_size: the bytes of the catalog file and of the files of every table's current
/// snapshot, as the transaction sees them (`functions::database_size`).
#[no_mangle]
pub unsafe extern "C" fn skade_fn_database_size(txn: *const SkadeTxn, bytes: *mut u64) -> *mut SkadeStatus {
    guard(|| out(bytes, crate::functions::database_size::bytes(&handle(txn, "transaction")?.0)?))
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_snapshots(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let table = txn.table_by_uuid(arg(uuid, "table id")?)?;
        let batch = snapshots::rows(txn.catalog(), &table)?;
        let reader = RecordBatchIterator::new([Ok(batch)], snapshots::schema());
        out(result, super::export_stream(reader))
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_commits_since(
    catalog: *const SkadeCatalog,
    since: u64,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let catalog = handle(catalog, "catalog")?.0.clone();
        let reader = commits_since::CommitsSince::new(catalog, since);
        out(result, super::export_stream(reader))
    })
}

/// The lineage events of the transactions committed after `since`.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_lineage(
    catalog: *const SkadeCatalog,
    since: u64,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let catalog = handle(catalog, "catalog")?.0.clone();
        out(result, super::export_stream(lineage::Lineage::new(catalog, since)))
    })
}

/// Where each lineage sink of the catalog stands; with `flush`, after bringing the history table
/// up to date and waiting up to `timeout_ms` for every collector to acknowledge every event.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_lineage_delivery(
    catalog: *const SkadeCatalog,
    flush: bool,
    timeout_ms: u64,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let catalog = &handle(catalog, "catalog")?.0;
        if flush {
            crate::lineage::delivery::flush(catalog, std::time::Duration::from_millis(timeout_ms))?;
        }
        let batch = lineage_delivery::rows(catalog)?;
        let reader = RecordBatchIterator::new([Ok(batch)], lineage_delivery::schema());
        out(result, super::export_stream(reader))
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_commit_log(
    catalog: *const SkadeCatalog,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let batch = commit_log::rows(&handle(catalog, "catalog")?.0)?;
        let reader = RecordBatchIterator::new([Ok(batch)], commit_log::schema());
        out(result, super::export_stream(reader))
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_check(
    catalog: *const SkadeCatalog,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let batch = check::rows(&handle(catalog, "catalog")?.0)?;
        let reader = RecordBatchIterator::new([Ok(batch)], check::schema());
        out(result, super::export_stream(reader))
    })
}

/// Expires snapshots of the table `uuid` as its own commit; each bound applies only when its
/// `has_` flag is set.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_expire_snapshots(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    older_than_us: i64,
    has_older_than: bool,
    retain_last: i64,
    has_retain_last: bool,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let batch = expire_snapshots::run(
            txn,
            arg(uuid, "table id")?,
            has_older_than.then_some(older_than_us),
            has_retain_last.then_some(retain_last),
        )?;
        let reader = RecordBatchIterator::new([Ok(batch)], expire_snapshots::schema());
        out(result, super::export_stream(reader))
    })
}

/// Removes the orphan files of the table `uuid` older than `older_than_us` (when
/// `has_older_than`; else 3 days old), or only lists them with `dry_run`.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_remove_orphan_files(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    older_than_us: i64,
    has_older_than: bool,
    dry_run: bool,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let batch =
            remove_orphan_files::run(txn, arg(uuid, "table id")?, has_older_than.then_some(older_than_us), dry_run)?;
        let reader = RecordBatchIterator::new([Ok(batch)], remove_orphan_files::schema());
        out(result, super::export_stream(reader))
    })
}

/// Compacts the table `uuid` as its own commit.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_compact(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let batch = compact::run(&handle(txn, "transaction")?.0, arg(uuid, "table id")?)?;
        let reader = RecordBatchIterator::new([Ok(batch)], compact::schema());
        out(result, super::export_stream(reader))
    })
}

/// Raises the format version of table `uuid` to `version`, as its own commit.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_upgrade_table(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    version: i64,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let batch = upgrade_table::run(&handle(txn, "transaction")?.0, arg(uuid, "table id")?, version)?;
        let reader = RecordBatchIterator::new([Ok(batch)], upgrade_table::schema());
        out(result, super::export_stream(reader))
    })
}

/// Adopts the Parquet files `paths` (`n_paths` of them, globs expanded) into table `uuid`, staged
/// in the transaction.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_add_files(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    paths: *const *const c_char,
    n_paths: usize,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let paths = arg_list(paths, n_paths, "file path")?;
        let batch = add_files::run(&handle(txn, "transaction")?.0, arg(uuid, "table id")?, &paths)?;
        let reader = RecordBatchIterator::new([Ok(batch)], add_files::schema());
        out(result, super::export_stream(reader))
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_changelog_schema(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    result: *mut FFI_ArrowSchema,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let table = txn.table_by_uuid(arg(uuid, "table id")?)?;
        out(result, FFI_ArrowSchema::try_from(changelog::schema(&table)?.as_ref())?)
    })
}

/// The changelog of table `uuid` over the snapshots after `from` (if `has_from`) up to `to` (if
/// `has_to`, else the current one), netted if `collapse`; with `times`, bounds are microseconds
/// since the epoch. `columns`: the output columns the query uses (the others may be NULL);
/// `filter_json` and `constants`: the query's filters on them, for pruning (as for scans).
#[no_mangle]
pub unsafe extern "C" fn skade_fn_changelog(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    from: i64,
    has_from: bool,
    to: i64,
    has_to: bool,
    times: bool,
    collapse: bool,
    columns: *const u64,
    n_columns: usize,
    filter_json: *const c_char,
    constants: *mut FFI_ArrowArray,
    constants_schema: *const FFI_ArrowSchema,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let table = txn.table_by_uuid(arg(uuid, "table id")?)?;
        let (json, constants) = unsafe { super::filters(filter_json, constants, constants_schema) }?;
        let bound = |b: i64| if times { changelog::Bound::Time(b) } else { changelog::Bound::Snapshot(b) };
        let used = column_list(columns, n_columns);
        let (from, to) = (has_from.then(|| bound(from)), has_to.then(|| bound(to)));
        let v3 = table.metadata.format_version() >= iceberg::spec::FormatVersion::V3;
        let filters = Filters::parse(json, constants.as_ref(), table.metadata.current_schema(), collapse, v3)?;
        let request = changelog::Request { from, to, collapse, used: &used, filters };
        let reader = changelog::rows(txn, &table, request)?;
        out(result, super::export_stream(reader))
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_lookup_stats(result: *mut FFI_ArrowArrayStream) -> *mut SkadeStatus {
    guard(|| {
        let reader = RecordBatchIterator::new([Ok(lookup_stats::rows()?)], lookup_stats::schema());
        out(result, super::export_stream(reader))
    })
}

/// The live rows of table `uuid` (`name` in messages) whose primary key is one of `keys` (a
/// struct array, one field per key column, named like it; one row per key), at snapshot `as_of`
/// when `has_as_of`. The rows have the columns of schema `schema_id` (the statement's binding),
/// or the call fails: the caller need not compare the stream's columns.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_lookup(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    name: *const c_char,
    schema_id: i32,
    keys: *mut FFI_ArrowArray,
    keys_schema: *const FFI_ArrowSchema,
    as_of: i64,
    has_as_of: bool,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        if keys.is_null() || keys_schema.is_null() {
            return Err(Error::internal("lookup keys are null"));
        }
        let array = unsafe { std::ptr::replace(keys, FFI_ArrowArray::empty()) };
        let keys = super::struct_array(unsafe { from_ffi(array, &*keys_schema) }?, "lookup keys")?;
        let uuid = arg(uuid, "table id")?;
        let Ok(table) = txn.table_by_uuid(uuid) else {
            return Err(Error::catalog(format!(
                "table {} was dropped since this statement was prepared: prepare it again",
                arg(name, "table name")?
            )));
        };
        if table.shape_id()? != schema_id {
            return Err(Error::invalid(format!(
                "the columns of table {} changed since this statement was prepared: prepare it again",
                arg(name, "table name")?
            )));
        }
        let found = txn.lookup(uuid, has_as_of.then_some(as_of), &keys)?;
        let facing = crate::format::duckdb_types::Facing::of(&table.metadata)?;
        let schema = facing.schema(&found.batch.schema());
        let batches: Vec<Result<RecordBatch, arrow::error::ArrowError>> = vec![Ok(facing.batch(found.batch, &schema)?)];
        out(result, super::export_stream(RecordBatchIterator::new(batches, schema)))
    })
}

#[cfg(test)]
mod tests {
    use std::ffi::{CStr, CString};
    use std::sync::Arc;

    use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray, StructArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::ffi_stream::ArrowArrayStreamReader;

    use super::*;
    use crate::catalog::options::AttachOptions;
    use crate::catalog::transaction::OnConflict;
    use crate::ffi::{skade_status_free, skade_status_message};
    use crate::Catalog;

    /// Key 1 looked up through the C entry point, bound with `schema_id`: rows found, or the error.
    fn lookup(txn: &SkadeTxn, uuid: &str, schema_id: i32) -> std::result::Result<usize, String> {
        let id: ArrayRef = Arc::new(Int64Array::from(vec![1]));
        let keys = StructArray::from(vec![(Arc::new(Field::new("id", DataType::Int64, true)), id)]);
        let mut array = FFI_ArrowArray::new(&keys.to_data());
        let schema = FFI_ArrowSchema::try_from(keys.data_type()).unwrap();
        let mut stream = FFI_ArrowArrayStream::empty();
        let (uuid, name) = (CString::new(uuid).unwrap(), CString::new("lake.t").unwrap());
        let status = unsafe {
            skade_fn_lookup(txn, uuid.as_ptr(), name.as_ptr(), schema_id, &mut array, &schema, 0, false, &mut stream)
        };
        if !status.is_null() {
            let message = unsafe { CStr::from_ptr(skade_status_message(status)) }.to_string_lossy().into_owned();
            unsafe { skade_status_free(status) };
            return Err(message);
        }
        let reader = unsafe { ArrowArrayStreamReader::from_raw(&mut stream) }.unwrap();
        Ok(reader.map(|b| b.unwrap().num_rows()).sum())
    }

    #[test]
    fn a_lookup_bound_to_another_schema_fails_instead_of_returning_other_columns() {
        let dir = std::env::temp_dir().join(format!("skade-ffi-lookup-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let catalog = Catalog::open(&dir.join("lake.skade"), AttachOptions::default()).unwrap();
        let columns =
            Schema::new(vec![Field::new("id", DataType::Int64, false), Field::new("v", DataType::Utf8, true)]);
        let (types, key) = (["BIGINT".to_string(), "VARCHAR".to_string()], ["id".to_string()]);
        let txn = catalog.begin();
        let table =
            txn.create_table("main", "t", &columns, &types, &key, &key, &[], &[], OnConflict::Error).unwrap().unwrap();
        let (uuid, schema_id) = (table.record.uuid.clone(), table.shape_id().unwrap());
        let mut writer = txn.writer(&uuid).unwrap();
        let id: ArrayRef = Arc::new(Int64Array::from(vec![1, 2]));
        let v: ArrayRef = Arc::new(StringArray::from(vec!["a", "b"]));
        writer.write(&StructArray::from(RecordBatch::try_new(Arc::new(columns), vec![id, v]).unwrap())).unwrap();
        txn.stage_files(&uuid, writer.finish().unwrap()).unwrap();
        txn.end_statement(&uuid).unwrap();
        txn.commit().unwrap();

        let txn = SkadeTxn(Arc::new(catalog.begin()));
        assert_eq!(lookup(&txn, &uuid, schema_id), Ok(1));
        let err = lookup(&txn, &uuid, schema_id + 1).unwrap_err();
        assert!(err.contains("the columns of table lake.t changed since this statement was prepared"), "{err}");
        drop((txn, catalog));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
