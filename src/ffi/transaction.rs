//! Transactions and the DDL and lookups that run inside them.

use std::ffi::c_char;
use std::sync::Arc;

use arrow::datatypes::Schema as ArrowSchema;
use arrow::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};

use super::catalog::SkadeCatalog;
use super::table::SkadeTable;
use super::{arg, arg_list, free, guard, handle, out, SkadeStatus, SkadeStrings};
use crate::catalog::store::ColumnRecord;
use crate::catalog::Transaction;
use crate::error::Error;
use crate::format::evolve::SchemaChange;
use crate::format::partition::parse_keys;
use crate::format::sort_order::parse_sort_keys;

pub struct SkadeTxn(pub(crate) Arc<Transaction>);

/// A transaction of the catalog attached in DuckDB as `database` (its messages name tables in
/// it: `lake.orders`); a null `database`: named by schema and table.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_begin(
    catalog: *const SkadeCatalog,
    database: *const c_char,
    result: *mut *mut SkadeTxn,
) -> *mut SkadeStatus {
    guard(|| {
        let c = &handle(catalog, "catalog")?.0;
        let txn = match database.is_null() {
            true => c.begin(),
            false => c.begin_as(arg(database, "database name")?),
        };
        out(result, Box::into_raw(Box::new(SkadeTxn(Arc::new(txn)))))
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_generation(txn: *const SkadeTxn, result: *mut u64) -> *mut SkadeStatus {
    guard(|| out(result, handle(txn, "transaction")?.0.generation()))
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_commit(txn: *const SkadeTxn) -> *mut SkadeStatus {
    guard(|| handle(txn, "transaction")?.0.commit().map(|_| ()))
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_rollback(txn: *const SkadeTxn) -> *mut SkadeStatus {
    guard(|| {
        handle(txn, "transaction")?.0.rollback();
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_free(txn: *mut SkadeTxn) {
    free(txn)
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_schemas(txn: *const SkadeTxn, result: *mut *mut SkadeStrings) -> *mut SkadeStatus {
    guard(|| {
        let names = handle(txn, "transaction")?.0.schemas()?.iter().map(|s| s.name.clone()).collect::<Vec<_>>();
        out(result, SkadeStrings::boxed(names))
    })
}

/// The schema's name as stored, or null when it does not exist.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_schema(
    txn: *const SkadeTxn,
    name: *const c_char,
    result: *mut *mut SkadeStrings,
) -> *mut SkadeStatus {
    guard(|| {
        let s = handle(txn, "transaction")?.0.schema(arg(name, "schema name")?)?;
        out(result, s.map(|s| SkadeStrings::boxed([s.name.clone()])).unwrap_or(std::ptr::null_mut()))
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_tables(
    txn: *const SkadeTxn,
    schema: *const c_char,
    result: *mut *mut SkadeStrings,
) -> *mut SkadeStatus {
    guard(|| {
        let t = handle(txn, "transaction")?.0.tables(arg(schema, "schema name")?)?;
        out(result, SkadeStrings::boxed(t.iter().map(|t| t.name.clone())))
    })
}

/// The table, or null when it does not exist.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_table(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    result: *mut *mut SkadeTable,
) -> *mut SkadeStatus {
    guard(|| {
        let t = handle(txn, "transaction")?.0.table(arg(schema, "schema name")?, arg(name, "table name")?)?;
        out(result, t.map(SkadeTable::boxed).transpose()?.unwrap_or(std::ptr::null_mut()))
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_create_schema(
    txn: *const SkadeTxn,
    name: *const c_char,
    if_not_exists: bool,
) -> *mut SkadeStatus {
    guard(|| handle(txn, "transaction")?.0.create_schema(arg(name, "schema name")?, if_not_exists))
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_drop_schema(
    txn: *const SkadeTxn,
    name: *const c_char,
    if_exists: bool,
    cascade: bool,
) -> *mut SkadeStatus {
    guard(|| handle(txn, "transaction")?.0.drop_schema(arg(name, "schema name")?, if_exists, cascade))
}

/// `on_conflict`: 0 error, 1 ignore (IF NOT EXISTS), 2 replace (OR REPLACE). `partitioned_by`
/// and `sorted_by`: the keys of PARTITIONED BY and SORTED BY as JSON lists (as ALTER's
/// set_partitioned_by and set_sorted_by take them), or null. `result` is null when the table
/// existed and was ignored.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn skade_txn_create_table(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    columns: *const FFI_ArrowSchema,
    duckdb_types: *const *const c_char,
    n_columns: usize,
    not_null: *const *const c_char,
    n_not_null: usize,
    primary_key: *const *const c_char,
    n_primary_key: usize,
    partitioned_by: *const c_char,
    sorted_by: *const c_char,
    on_conflict: i32,
    result: *mut *mut SkadeTable,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let columns = ArrowSchema::try_from(handle(columns, "column schema")?)?;
        let on_conflict = super::on_conflict(on_conflict)?;
        let table = txn.create_table(
            arg(schema, "schema name")?,
            arg(name, "table name")?,
            &columns,
            &arg_list(duckdb_types, n_columns, "column type")?,
            &arg_list(not_null, n_not_null, "column name")?,
            &arg_list(primary_key, n_primary_key, "column name")?,
            &match partitioned_by.is_null() {
                true => Vec::new(),
                false => parse_keys(arg(partitioned_by, "partition keys")?)?,
            },
            &match sorted_by.is_null() {
                true => Vec::new(),
                false => parse_sort_keys(arg(sorted_by, "sort keys")?)?,
            },
            on_conflict,
        )?;
        out(result, table.map(SkadeTable::boxed).transpose()?.unwrap_or(std::ptr::null_mut()))
    })
}

/// Deletes rows by the row ids this transaction's scans produced.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_delete_rows(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    row_ids: *const i64,
    n: usize,
    deleted: *mut u64,
) -> *mut SkadeStatus {
    guard(|| {
        let ids = if n == 0 { &[][..] } else { std::slice::from_raw_parts(row_ids, n) };
        let count = handle(txn, "transaction")?.0.delete_rows(arg(uuid, "table id")?, ids)?;
        out(deleted, count)
    })
}

/// Ends a statement that wrote rows to the table `uuid`: checks its primary key (a constraint
/// error if a new key is duplicated or already live) and makes its files part of the transaction.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_end_statement(txn: *const SkadeTxn, uuid: *const c_char) -> *mut SkadeStatus {
    guard(|| handle(txn, "transaction")?.0.end_statement(arg(uuid, "table id")?))
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_drop_table(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    if_exists: bool,
) -> *mut SkadeStatus {
    guard(|| handle(txn, "transaction")?.0.drop_table(arg(schema, "schema name")?, arg(name, "table name")?, if_exists))
}

/// ALTER TABLE `schema.name`. `op`: add_column, drop_column, rename_column, alter_type,
/// drop_not_null, set_not_null, add_primary_key, set_partitioned_by, set_sorted_by,
/// set_comment, set_column_comment, set_default or rename_table (add_primary_key, set_partitioned_by and
/// set_sorted_by take their keys in `to`, JSON lists; none: RESET; the set_*comment operations
/// take the comment in `to`, null to remove it); add_field, drop_field, rename_field and alter_field_type are the first
/// four for a field inside a column. `column` names the column (or, for rename_table, nothing);
/// for the *_field operations it is the field's path, a JSON list of names from the column down
/// (add_field: the new field's). `to` the new name (rename_*, rename_table); `if_flag` is IF NOT
/// EXISTS (add_*) or IF EXISTS (drop_*); `column_type` a one-column Arrow schema of the new type as
/// DuckDB exports it and `duckdb_type` its name (add_*, alter_*type). `default`: add_column's
/// DEFAULT, or set_default's (SET DEFAULT; null: DROP DEFAULT), one row in `column_type` (moved
/// out; null: none). `changed`: whether anything changed.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn skade_txn_alter_table(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    op: *const c_char,
    column: *const c_char,
    to: *const c_char,
    if_flag: bool,
    column_type: *const FFI_ArrowSchema,
    duckdb_type: *const c_char,
    default: *mut FFI_ArrowArray,
    changed: *mut bool,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let (schema, name) = (arg(schema, "schema name")?, arg(name, "table name")?);
        let default = match default.is_null() || column_type.is_null() {
            true => None,
            false => {
                let array = unsafe { std::ptr::replace(default, FFI_ArrowArray::empty()) };
                let row = super::struct_array(unsafe { from_ffi(array, &*column_type) }?, "column default")?;
                Some(row.column(0).clone())
            }
        };
        let typed = || -> crate::error::Result<(arrow::datatypes::Field, String)> {
            let columns = ArrowSchema::try_from(handle(column_type, "column type")?)?;
            let field = columns.fields().first().ok_or_else(|| Error::internal("no column type"))?;
            Ok((field.as_ref().clone(), arg(duckdb_type, "column type name")?.to_string()))
        };
        let column_ptr = column;
        let column = || arg(column_ptr, "column name").map(str::to_string);
        // (the *_field operations name a field inside a column: `column` is its path, a JSON list)
        let path = || -> crate::error::Result<Vec<String>> {
            let path: Vec<String> = serde_json::from_str(arg(column_ptr, "field path")?)
                .map_err(|e| Error::internal(format!("malformed field path: {e}")))?;
            match path.len() {
                0 => Err(Error::internal("an empty field path")),
                _ => Ok(path),
            }
        };
        // (set_comment, set_column_comment: `to` is the comment, null to remove it)
        let comment = (!to.is_null()).then(|| arg(to, "comment").map(str::to_string)).transpose();
        let to = || arg(to, "new name").map(str::to_string);
        let change = match arg(op, "ALTER operation")? {
            "rename_table" => {
                txn.rename_table(schema, name, &to()?)?;
                return out(changed, true);
            }
            "add_column" => {
                let (field, duckdb_type) = typed()?;
                let field = field.with_name(column()?);
                SchemaChange::AddColumn { parent: vec![], field, duckdb_type, if_not_exists: if_flag, default }
            }
            "add_field" => {
                let (field, duckdb_type) = typed()?;
                let mut parent = path()?;
                let name = parent.pop().unwrap_or_default();
                SchemaChange::AddColumn {
                    parent,
                    field: field.with_name(name),
                    duckdb_type,
                    if_not_exists: if_flag,
                    default,
                }
            }
            "drop_column" => SchemaChange::DropColumn { path: vec![column()?], if_exists: if_flag },
            "drop_field" => SchemaChange::DropColumn { path: path()?, if_exists: if_flag },
            "rename_column" => SchemaChange::RenameColumn { path: vec![column()?], to: to()? },
            "rename_field" => SchemaChange::RenameColumn { path: path()?, to: to()? },
            "alter_type" => {
                let (field, duckdb_type) = typed()?;
                SchemaChange::ChangeType { path: vec![column()?], field, duckdb_type }
            }
            "alter_field_type" => {
                let (field, duckdb_type) = typed()?;
                SchemaChange::ChangeType { path: path()?, field, duckdb_type }
            }
            "drop_not_null" => SchemaChange::DropNotNull { name: column()? },
            "set_not_null" => SchemaChange::SetNotNull { name: column()? },
            "set_default" => SchemaChange::SetDefault { name: column()?, default },
            // (`to`: the key's columns, a JSON list)
            "add_primary_key" => SchemaChange::AddPrimaryKey {
                columns: serde_json::from_str(&to()?)
                    .map_err(|e| Error::internal(format!("malformed PRIMARY KEY columns: {e}")))?,
            },
            // (`to`: the partition keys as the shim describes them, JSON)
            "set_partitioned_by" => SchemaChange::SetPartitioning { keys: parse_keys(&to()?)? },
            // (`to`: the sort keys as the shim describes them, JSON)
            "set_sorted_by" => SchemaChange::SetSortOrder { keys: parse_sort_keys(&to()?)? },
            "set_comment" => SchemaChange::SetComment { comment: comment? },
            "set_column_comment" => SchemaChange::SetColumnComment { path: vec![column()?], comment: comment? },
            other => return Err(Error::internal(format!("unknown ALTER operation {other}"))),
        };
        out(changed, txn.alter_table(schema, name, &change)?)
    })
}

/// Notes that the transaction read a file (`path` as the query named it, or a URL): a lineage
/// input of its commit.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_read_file(txn: *const SkadeTxn, path: *const c_char) -> *mut SkadeStatus {
    guard(|| handle(txn, "transaction")?.0.note_input(crate::lineage::inputs::file(arg(path, "path")?)))
}

/// Notes that the transaction read the table `qualified_name` of another attached DuckDB
/// database (`database_path` its file, empty for one in memory named `database`), with its
/// columns' names and DuckDB types.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_read_table(
    txn: *const SkadeTxn,
    database_path: *const c_char,
    database: *const c_char,
    qualified_name: *const c_char,
    column_names: *const *const c_char,
    column_types: *const *const c_char,
    column_count: usize,
) -> *mut SkadeStatus {
    guard(|| {
        let names = arg_list(column_names, column_count, "column names")?;
        let types = arg_list(column_types, column_count, "column types")?;
        let columns = names.into_iter().zip(types).map(|(name, data_type)| ColumnRecord { name, data_type }).collect();
        let input = crate::lineage::inputs::duckdb_table(
            arg(database_path, "database path")?,
            arg(database, "database name")?,
            arg(qualified_name, "table name")?,
            columns,
        );
        handle(txn, "transaction")?.0.note_input(input)
    })
}

/// Notes that the transaction read `table` of another skade catalog.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_read_skade_table(
    txn: *const SkadeTxn,
    table: *const SkadeTable,
) -> *mut SkadeStatus {
    guard(|| {
        let input = crate::lineage::inputs::skade_table(&handle(table, "table")?.info);
        handle(txn, "transaction")?.0.note_input(input)
    })
}
