//! Macros (`catalog::macros`) over the C ABI. A macro's kind crosses as "scalar" or "table".

use std::ffi::c_char;

use super::transaction::SkadeTxn;
use super::{arg, guard, handle, on_conflict, out, SkadeStatus, SkadeStrings};
use crate::catalog::state::MacroKind;
use crate::error::{Error, Result};

fn kind(p: *const c_char) -> Result<MacroKind> {
    let text = arg(p, "macro kind")?;
    MacroKind::parse(text).ok_or_else(|| Error::internal(format!("unknown macro kind {text}")))
}

/// The macros of a schema, three strings each: [kind, name, sql, kind, name, sql, ...]. All of
/// them at once: a schema's function lookups ask for names that are no macro far more often than
/// for one that is, and the shim answers those from this list.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_macros(
    txn: *const SkadeTxn,
    schema: *const c_char,
    result: *mut *mut SkadeStrings,
) -> *mut SkadeStatus {
    guard(|| {
        let macros = handle(txn, "transaction")?.0.macros(arg(schema, "schema name")?)?;
        let parts = macros.iter().flat_map(|m| [m.kind.as_str().to_string(), m.name.clone(), m.sql.clone()]);
        out(result, SkadeStrings::boxed(parts))
    })
}

/// CREATE MACRO: `sql` the statement as DuckDB prints it. `created`: false when it existed and
/// was ignored.
#[no_mangle]
pub unsafe extern "C" fn skade_txn_create_macro(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    macro_kind: *const c_char,
    sql: *const c_char,
    conflict: i32,
    created: *mut bool,
) -> *mut SkadeStatus {
    guard(|| {
        let done = handle(txn, "transaction")?.0.create_macro(
            arg(schema, "schema name")?,
            arg(name, "macro name")?,
            kind(macro_kind)?,
            arg(sql, "macro definition")?,
            on_conflict(conflict)?,
        )?;
        out(created, done)
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_txn_drop_macro(
    txn: *const SkadeTxn,
    schema: *const c_char,
    name: *const c_char,
    macro_kind: *const c_char,
    if_exists: bool,
) -> *mut SkadeStatus {
    guard(|| {
        handle(txn, "transaction")?.0.drop_macro(
            arg(schema, "schema name")?,
            arg(name, "macro name")?,
            kind(macro_kind)?,
            if_exists,
        )
    })
}
