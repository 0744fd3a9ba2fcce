//! Inserts: each DuckDB sink thread streams its chunks into its own data files. A statement that
//! keeps its order (`skade_ordered_write_open`) tells its threads' writers which batch their rows
//! belong to, and stages its files in batch order when it finishes (`write::ordered`).

use std::ffi::c_char;
use std::sync::Arc;

use arrow::array::Array;
use arrow::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};

use super::transaction::SkadeTxn;
use super::{arg, free, guard, guard_value, handle, out, SkadeStatus};
use crate::catalog::Transaction;
use crate::error::Error;
use crate::io::remove_files;
use crate::write::ordered::{BatchWriter, OrderedWrite};
use crate::write::writer::{Carries, TableWriter};

pub struct SkadeWriter {
    txn: Arc<Transaction>,
    uuid: String,
    writer: Option<Inner>,
}

enum Inner {
    /// Its files are staged when it finishes, in whatever order the threads finish.
    Plain(TableWriter),
    /// One thread of an ordered write: the statement stages the files.
    Batches(BatchWriter),
}

/// A statement's ordered write of one table, shared by its threads' writers.
pub struct SkadeOrderedWrite {
    txn: Arc<Transaction>,
    uuid: String,
    write: Arc<OrderedWrite>,
}

#[no_mangle]
pub unsafe extern "C" fn skade_writer_open(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    memory_limit: u64,
    carries_rows: bool,
    result: *mut *mut SkadeWriter,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = handle(txn, "transaction")?.0.clone();
        let uuid = arg(uuid, "table id")?.to_string();
        txn.set_memory_limit(memory_limit);
        let writer = txn.writer_carrying(&uuid, if carries_rows { Carries::RowIds } else { Carries::Nothing })?;
        out(result, Box::into_raw(Box::new(SkadeWriter { txn, uuid, writer: Some(Inner::Plain(writer)) })))
    })
}

/// Appends one chunk: a struct array of the table's columns. Takes ownership of `array`.
#[no_mangle]
pub unsafe extern "C" fn skade_writer_write(
    writer: *mut SkadeWriter,
    array: *mut FFI_ArrowArray,
    schema: *const FFI_ArrowSchema,
) -> *mut SkadeStatus {
    guard(|| {
        if array.is_null() {
            return Err(Error::internal("array is null"));
        }
        let array = unsafe { std::ptr::replace(array, FFI_ArrowArray::empty()) };
        let w = unsafe { writer.as_mut() }.ok_or_else(|| Error::internal("writer handle is null"))?;
        let data = unsafe { from_ffi(array, handle(schema, "schema")?) }?;
        let columns = super::struct_array(data, "inserted rows")?;
        match w.writer.as_mut().ok_or_else(|| Error::internal("writer already finished"))? {
            Inner::Plain(inner) => inner.write(&columns),
            Inner::Batches(inner) => inner.write(&columns),
        }
    })
}

/// Appends one chunk of rows that replace the rows `row_ids` (an UPDATE's: one row id, from this
/// transaction's scans of the table, per row): on an Iceberg v3 table each keeps the `_row_id` of
/// the row it replaces. Takes ownership of `array`.
#[no_mangle]
pub unsafe extern "C" fn skade_writer_write_carried(
    writer: *mut SkadeWriter,
    array: *mut FFI_ArrowArray,
    schema: *const FFI_ArrowSchema,
    row_ids: *const i64,
    n_row_ids: usize,
) -> *mut SkadeStatus {
    guard(|| {
        if array.is_null() || (row_ids.is_null() && n_row_ids > 0) {
            return Err(Error::internal("array or row ids are null"));
        }
        let array = unsafe { std::ptr::replace(array, FFI_ArrowArray::empty()) };
        let w = unsafe { writer.as_mut() }.ok_or_else(|| Error::internal("writer handle is null"))?;
        let data = unsafe { from_ffi(array, handle(schema, "schema")?) }?;
        let columns = super::struct_array(data, "updated rows")?;
        let row_ids: &[i64] = match n_row_ids {
            0 => &[],
            n => unsafe { std::slice::from_raw_parts(row_ids, n) },
        };
        if row_ids.len() != columns.len() {
            return Err(Error::internal(format!("{} rows come with {} row ids", columns.len(), row_ids.len())));
        }
        match w.writer.as_mut().ok_or_else(|| Error::internal("writer already finished"))? {
            Inner::Plain(inner) => {
                let carried = w.txn.carried_row_ids(&w.uuid, row_ids)?;
                inner.write_carried(&columns, &[std::sync::Arc::new(carried)])
            }
            Inner::Batches(_) => Err(Error::internal("an ordered write carries no rows over")),
        }
    })
}

/// Closes the writer's files and adds them to the running statement (see
/// `skade_txn_end_statement`); `rows` gets the row count. A writer of an ordered write hands its
/// last batch to the statement instead (`skade_ordered_write_finish` stages the files).
#[no_mangle]
pub unsafe extern "C" fn skade_writer_finish(writer: *mut SkadeWriter, rows: *mut u64) -> *mut SkadeStatus {
    guard(|| {
        let w = unsafe { writer.as_mut() }.ok_or_else(|| Error::internal("writer handle is null"))?;
        match w.writer.take().ok_or_else(|| Error::internal("writer already finished"))? {
            Inner::Plain(inner) => {
                let n = inner.rows();
                let written = inner.finish()?;
                w.txn.stage_files(&w.uuid, written)?;
                out(rows, n)
            }
            Inner::Batches(inner) => out(rows, inner.finish()?),
        }
    })
}

/// Frees the writer; if it was not finished, the files it wrote are removed.
#[no_mangle]
pub unsafe extern "C" fn skade_writer_free(writer: *mut SkadeWriter) {
    guard_value((), || {
        if writer.is_null() {
            return;
        }
        let w = unsafe { Box::from_raw(writer) };
        // (a batch writer removes its own when dropped)
        if let Some(Inner::Plain(inner)) = w.writer {
            if let Ok(written) = inner.finish() {
                remove_files(written.files.iter().map(|f| f.file_path()));
            }
        }
    })
}

/// Starts a statement's write of table `uuid` that keeps the rows' order: its threads' writers
/// (`skade_ordered_write_writer`) are told the batch of their rows.
#[no_mangle]
pub unsafe extern "C" fn skade_ordered_write_open(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    memory_limit: u64,
    result: *mut *mut SkadeOrderedWrite,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = handle(txn, "transaction")?.0.clone();
        let uuid = arg(uuid, "table id")?.to_string();
        txn.set_memory_limit(memory_limit);
        txn.writer(&uuid)?; // (fails now, not in a thread, if the table cannot be written)
        let (opener, table) = (txn.clone(), uuid.clone());
        let write = OrderedWrite::new(Box::new(move || opener.writer(&table)));
        out(result, Box::into_raw(Box::new(SkadeOrderedWrite { txn, uuid, write })))
    })
}

/// A writer for one thread of the ordered write (free it with `skade_writer_free`).
#[no_mangle]
pub unsafe extern "C" fn skade_ordered_write_writer(
    ordered: *const SkadeOrderedWrite,
    result: *mut *mut SkadeWriter,
) -> *mut SkadeStatus {
    guard(|| {
        let o = handle(ordered, "ordered write")?;
        let writer = Inner::Batches(o.write.writer());
        out(
            result,
            Box::into_raw(Box::new(SkadeWriter { txn: o.txn.clone(), uuid: o.uuid.clone(), writer: Some(writer) })),
        )
    })
}

/// The rows the writer is given from now on are batch `batch`'s (DuckDB's batch index); every
/// batch below `min_batch` has ended in every thread. Call it before the batch's first rows.
#[no_mangle]
pub unsafe extern "C" fn skade_writer_start_batch(
    writer: *mut SkadeWriter,
    batch: u64,
    min_batch: u64,
) -> *mut SkadeStatus {
    guard(|| {
        let w = unsafe { writer.as_mut() }.ok_or_else(|| Error::internal("writer handle is null"))?;
        match w.writer.as_mut() {
            Some(Inner::Batches(inner)) => inner.start_batch(batch, min_batch),
            _ => Err(Error::internal("not a writer of an ordered write, or finished")),
        }
    })
}

/// Once every thread's writer finished: writes the rows still held and adds the statement's
/// files to it in their batches' order (then end the statement: `skade_txn_end_statement`).
#[no_mangle]
pub unsafe extern "C" fn skade_ordered_write_finish(ordered: *const SkadeOrderedWrite) -> *mut SkadeStatus {
    guard(|| {
        let o = handle(ordered, "ordered write")?;
        let mut written = o.write.finish()?.into_iter();
        while let Some(next) = written.next() {
            if let Err(e) = o.txn.stage_files(&o.uuid, next) {
                let rest: Vec<_> = written.flat_map(|w| w.files).collect();
                remove_files(rest.iter().map(|f| f.file_path()));
                return Err(e);
            }
        }
        Ok(())
    })
}

/// Frees the ordered write; files it wrote and did not stage are removed.
#[no_mangle]
pub unsafe extern "C" fn skade_ordered_write_free(ordered: *mut SkadeOrderedWrite) {
    free(ordered)
}
