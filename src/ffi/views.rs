//! Views (`catalog::views`) over the C ABI.

use std::ffi::c_char;

use arrow::datatypes::Schema as ArrowSchema;
use arrow::ffi::FFI_ArrowSchema;

use super::transaction::SkadeTxn;
use super::{arg, arg_list, guard, handle, optional_arg, out, SkadeStatus, SkadeStrings};
use crate::format::view::{ViewColumns, ViewDefinition};

#[no_mangle]
pub unsafe extern "C" fn skade_txn_views(
    txn: *const SkadeTxn,
    schema: *const c_char,
    result: *mut *mut SkadeStrings,
) -> *mut SkadeStatus {
    guard(|| {
        let views = handle(txn, "transaction")?.0.views(arg(schema, "schema name")?)?;
        out(result, SkadeStrings::boxed(views.iter().map(|v| v.name.clone())))
    })
}

/// The view as DuckDB rebuilds it: [name, sql, has comment ("0"/"1"), comment, alias count,
/// aliases..., then (column, comment) pairs]; null when no view has that name.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_view(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    result: *mut *mut SkadeStrings,
) -> *mut SkadeStatus {
    guard(|| {
        let view = handle(txn, "transaction")?.0.view(arg(schema, "schema name")?, arg(name, "view name")?)?;
        let Some(view) = view else {
            return out(result, std::ptr::null_mut());
        };
        let d = view.definition;
        let mut parts = vec![
            view.record.name.clone(),
            d.sql,
            if d.comment.is_some() { "1" } else { "0" }.to_string(),
            d.comment.unwrap_or_default(),
            d.aliases.len().to_string(),
        ];
        parts.extend(d.aliases);
        for (column, comment) in d.column_comments {
            parts.push(column);
            parts.push(comment);
        }
        out(result, SkadeStrings::boxed(parts))
    })
}

/// CREATE VIEW: `sql` the SELECT as DuckDB prints it, `aliases` the declared column names,
/// `columns` the bound columns' Arrow export and `duckdb_types` their types. `on_conflict` as for
/// tables. `created`: false when it existed and was ignored.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn skade_txn_create_view(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    sql: *const c_char,
    aliases: *const *const c_char,
    n_aliases: usize,
    comment: *const c_char,
    columns: *const FFI_ArrowSchema,
    duckdb_types: *const *const c_char,
    n_columns: usize,
    on_conflict: i32,
    created: *mut bool,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let arrow = ArrowSchema::try_from(handle(columns, "column schema")?)?;
        let types = arg_list(duckdb_types, n_columns, "column type")?;
        let on_conflict = super::on_conflict(on_conflict)?;
        let definition = ViewDefinition {
            sql: arg(sql, "view query")?.to_string(),
            aliases: arg_list(aliases, n_aliases, "column alias")?,
            namespace: String::new(),
            comment: optional_arg(comment, "comment")?.map(str::to_string),
            column_comments: vec![],
        };
        let columns = ViewColumns { arrow: &arrow, duckdb_types: &types };
        let done =
            txn.create_view(arg(schema, "schema name")?, arg(name, "view name")?, definition, &columns, on_conflict)?;
        out(created, done)
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_drop_view(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    if_exists: bool,
) -> *mut SkadeStatus {
    guard(|| handle(txn, "transaction")?.0.drop_view(arg(schema, "schema name")?, arg(name, "view name")?, if_exists))
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_rename_view(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    to: *const c_char,
) -> *mut SkadeStatus {
    guard(|| {
        handle(txn, "transaction")?.0.rename_view(
            arg(schema, "schema name")?,
            arg(name, "view name")?,
            arg(to, "new view name")?,
        )
    })
}

/// COMMENT ON VIEW (`column` null) or on a view's column; a null `comment` removes it.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_comment_view(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    column: *const c_char,
    comment: *const c_char,
) -> *mut SkadeStatus {
    guard(|| {
        handle(txn, "transaction")?.0.comment_view(
            arg(schema, "schema name")?,
            arg(name, "view name")?,
            optional_arg(column, "column name")?,
            optional_arg(comment, "comment")?,
        )
    })
}
