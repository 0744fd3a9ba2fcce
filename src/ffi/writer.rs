//! Inserts: each DuckDB sink thread streams its chunks into its own data files.

use std::ffi::c_char;
use std::sync::Arc;

use arrow::ffi::{from_ffi, FFI_ArrowArray, FFI_ArrowSchema};

use super::transaction::SkadeTxn;
use super::{arg, guard, guard_value, handle, out, SkadeStatus};
use crate::catalog::Transaction;
use crate::error::Error;
use crate::io::remove_files;
use crate::write::writer::TableWriter;

pub struct SkadeWriter {
    txn: Arc<Transaction>,
    uuid: String,
    writer: Option<TableWriter>,
}

#[no_mangle]
pub unsafe extern "C" fn skade_writer_open(
    txn: *const SkadeTxn,
    uuid: *const c_char,
    memory_limit: u64,
    result: *mut *mut SkadeWriter,
) -> *mut SkadeStatus {
    guard(|| {
        let txn = handle(txn, "transaction")?.0.clone();
        let uuid = arg(uuid, "table id")?.to_string();
        txn.set_memory_limit(memory_limit);
        let writer = txn.writer(&uuid)?;
        out(result, Box::into_raw(Box::new(SkadeWriter { txn, uuid, writer: Some(writer) })))
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
        w.writer.as_mut().ok_or_else(|| Error::internal("writer already finished"))?.write(&columns)
    })
}

/// Closes the writer's files and adds them to the running statement (see
/// `skade_txn_end_statement`); `rows` gets the row count.
#[no_mangle]
pub unsafe extern "C" fn skade_writer_finish(writer: *mut SkadeWriter, rows: *mut u64) -> *mut SkadeStatus {
    guard(|| {
        let w = unsafe { writer.as_mut() }.ok_or_else(|| Error::internal("writer handle is null"))?;
        let inner = w.writer.take().ok_or_else(|| Error::internal("writer already finished"))?;
        let n = inner.rows();
        let written = inner.finish()?;
        w.txn.stage_files(&w.uuid, written)?;
        out(rows, n)
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
        if let Some(inner) = w.writer {
            if let Ok(written) = inner.finish() {
                remove_files(written.files.iter().map(|f| f.file_path()));
            }
        }
    })
}
