//! Named consumers and waits over the C ABI: each call returns its rows as an Arrow stream. A
//! waiting call polls the shim's `interrupted` callback (DuckDB's interruption of the query).

use std::ffi::{c_char, c_void};
use std::time::Duration;

use arrow::array::RecordBatchIterator;
use arrow::ffi::FFI_ArrowSchema;
use arrow::ffi_stream::FFI_ArrowArrayStream;

use super::transaction::SkadeTxn;
use super::{arg, arg_list, column_list, export_stream, guard, guard_value, handle, optional_arg, out, SkadeStatus};
use crate::error::{Error, Result};
use crate::functions::{commits_since, consumers};
use crate::stream::consume::{self, ReadOptions};
use crate::stream::wait::{wait_for_commit, WaitFor};

/// Asks the shim whether the query was interrupted (must not unwind).
pub type InterruptedFn = Option<unsafe extern "C" fn(*mut c_void) -> bool>;

fn interruption(f: InterruptedFn, context: *mut c_void) -> impl Fn() -> bool {
    move || match f {
        Some(f) => guard_value(false, || unsafe { f(context) }),
        None => false,
    }
}

fn one_row(batch: arrow::array::RecordBatch, result: *mut FFI_ArrowArrayStream) -> Result<()> {
    let schema = batch.schema();
    out(result, export_stream(RecordBatchIterator::new([Ok(batch)], schema)))
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_consumers(
    txn: *const SkadeTxn,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| one_row(consumers::list(&handle(txn, "transaction")?.0)?, result))
}

/// Creates (`reset` false) or resets the consumer `name`; `tables` only for a create. The start
/// is `start` (NULL: none), `at_snapshot` if `has_snapshot`, `at_commit` if `has_commit`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn skade_fn_start_consumer(
    txn: *const SkadeTxn,
    name: *const c_char,
    reset: bool,
    tables: *const *const c_char,
    n_tables: usize,
    start: *const c_char,
    at_snapshot: i64,
    has_snapshot: bool,
    at_commit: i64,
    has_commit: bool,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let name = arg(name, "consumer name")?;
        let start = consumers::start(
            optional_arg(start, "start")?,
            has_snapshot.then_some(at_snapshot),
            has_commit.then_some(at_commit),
        )?;
        let batch = if reset {
            consumers::reset(txn, name, start)?
        } else {
            consumers::create(txn, name, &arg_list(tables, n_tables, "table name")?, start)?
        };
        one_row(batch, result)
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_drop_consumer(
    txn: *const SkadeTxn,
    name: *const c_char,
    if_exists: bool,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| one_row(consumers::drop(&handle(txn, "transaction")?.0, arg(name, "consumer name")?, if_exists)?, result))
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_acknowledge(
    txn: *const SkadeTxn,
    name: *const c_char,
    seq: i64,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| one_row(consumers::acknowledge(&handle(txn, "transaction")?.0, arg(name, "consumer name")?, seq)?, result))
}

/// The columns of the consumer `name`'s rows.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_consume_schema(
    txn: *const SkadeTxn,
    name: *const c_char,
    result: *mut FFI_ArrowSchema,
) -> *mut SkadeStatus {
    guard(|| {
        let schema = consume::schema(&handle(txn, "transaction")?.0, arg(name, "consumer name")?)?;
        out(result, FFI_ArrowSchema::try_from(schema.as_ref())?)
    })
}

/// The rows of the consumer `name`'s pending commits (at most `max_commits` if >= 0); with
/// `advance`, the advance past them is staged in the transaction (a read in the statement
/// `statement`, DuckDB's query id). With nothing pending it waits up to `wait_ms` (if >= 0) for
/// a commit. `n_batches` receives how many batches the stream has (the shim converts a small
/// read on one thread).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn skade_fn_consume(
    txn: *const SkadeTxn,
    name: *const c_char,
    max_commits: i64,
    advance: bool,
    statement: u64,
    wait_ms: i64,
    columns: *const u64,
    n_columns: usize,
    interrupted: InterruptedFn,
    context: *mut c_void,
    result: *mut FFI_ArrowArrayStream,
    n_batches: *mut usize,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let name = arg(name, "consumer name")?;
        let used = column_list(columns, n_columns);
        let options = ReadOptions {
            max_commits: u64::try_from(max_commits).ok(),
            advance,
            wait: u64::try_from(wait_ms).ok().map(Duration::from_millis),
            used,
            statement,
        };
        let schema = consume::schema(txn, name)?;
        let rows = consume::read(txn, name, options, schema, &interruption(interrupted, context))?;
        out(n_batches, rows.size_hint().0)?; // exact: the batches are in a vector
        out(result, export_stream(rows))
    })
}

/// Waits up to `timeout_ms` for a commit after `since` (with `consumer` non-NULL: after that
/// consumer's cursor, of its tables); its rows are those of `skade_commits_since`.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_wait(
    txn: *const SkadeTxn,
    since: i64,
    consumer: *const c_char,
    timeout_ms: i64,
    interrupted: InterruptedFn,
    context: *mut c_void,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = &handle(txn, "transaction")?.0;
        let timeout = Duration::from_millis(timeout_ms.max(0) as u64);
        let found = match optional_arg(consumer, "consumer name")? {
            Some(name) => {
                let c = txn.consumer(name)?;
                let tables = c.tables.iter().map(|t| t.uuid.clone()).collect();
                let wait = WaitFor { after: c.cursor, tables: Some(&tables), timeout, consumer: Some(&c) };
                wait_for_commit(txn.catalog(), &wait, &interruption(interrupted, context))?
            }
            None => {
                let head = txn.catalog().head_seq();
                if since as u64 > head {
                    return Err(Error::invalid(format!(
                        "skade_wait: since_seq {since} is past the last commit, {head} (skade_commits_since lists them)"
                    )));
                }
                let wait = WaitFor { after: since.max(0) as u64, tables: None, timeout, consumer: None };
                wait_for_commit(txn.catalog(), &wait, &interruption(interrupted, context))?
            }
        };
        one_row(commits_since::batch(&found)?, result)
    })
}
