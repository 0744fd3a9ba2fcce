//! The C ABI between the C++ shim and the core (`cpp/include/skade_ffi.h`).
//!
//! Rules every entry follows:
//! - it catches unwinds: no panic crosses the boundary;
//! - fallible calls return `*mut SkadeStatus`: null on success, else a code and a message the
//!   shim turns into a DuckDB exception (and frees with `skade_status_free`);
//! - handles are opaque boxes freed by their `_free` function;
//! - rows cross only as the Arrow C Data Interface.
//!
//! # Safety
//! Every entry is `unsafe`: the shim must pass pointers it got from the matching constructor
//! (or valid Arrow C structs, or NUL-terminated UTF-8 strings), and must not use a handle after
//! freeing it. The header documents ownership per call.
#![allow(clippy::missing_safety_doc)]

mod catalog;
mod consumers;
mod functions;
mod macros;
mod rest;
mod scan;
mod storage;
mod table;
mod transaction;
mod views;
mod writer;

use std::ffi::{c_char, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};

use arrow::array::{ArrayData, RecordBatch, RecordBatchReader, StructArray};
use arrow::datatypes::{DataType, SchemaRef};
use arrow::error::ArrowError;
use arrow::ffi_stream::FFI_ArrowArrayStream;

use crate::catalog::transaction::OnConflict;
use crate::error::{Error, ErrorKind, Result};

/// An error crossing the boundary. Null means success.
pub struct SkadeStatus {
    code: i32,
    message: CString,
}

fn status_from(e: Error) -> *mut SkadeStatus {
    let message = CString::new(e.message.replace('\0', " ")).unwrap_or_default();
    Box::into_raw(Box::new(SkadeStatus { code: e.kind as i32, message }))
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string());
    format!("skade internal error (a bug, please report it): {what}")
}

/// Runs `f`, turning an error or a panic into a status.
pub(crate) fn guard(f: impl FnOnce() -> Result<()>) -> *mut SkadeStatus {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => std::ptr::null_mut(),
        Ok(Err(e)) => status_from(e),
        Err(p) => status_from(Error::new(ErrorKind::Internal, panic_message(p))),
    }
}

/// For infallible getters and destructors: a panic yields `fallback`.
pub(crate) fn guard_value<T>(fallback: T, f: impl FnOnce() -> T) -> T {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(fallback)
}

#[no_mangle]
pub unsafe extern "C" fn skade_status_code(status: *const SkadeStatus) -> i32 {
    guard_value(ErrorKind::Internal as i32, || unsafe { status.as_ref() }.map(|s| s.code).unwrap_or(0))
}

#[no_mangle]
pub unsafe extern "C" fn skade_status_message(status: *const SkadeStatus) -> *const c_char {
    guard_value(std::ptr::null(), || unsafe { status.as_ref() }.map(|s| s.message.as_ptr()).unwrap_or(std::ptr::null()))
}

#[no_mangle]
pub unsafe extern "C" fn skade_status_free(status: *mut SkadeStatus) {
    guard_value((), || {
        if !status.is_null() {
            drop(unsafe { Box::from_raw(status) });
        }
    })
}

/// A list of strings handed to the shim (names of schemas, tables, key columns).
pub struct SkadeStrings {
    items: Vec<CString>,
}

impl SkadeStrings {
    pub(crate) fn boxed(items: impl IntoIterator<Item = String>) -> *mut SkadeStrings {
        let items = items.into_iter().map(|s| CString::new(s.replace('\0', " ")).unwrap_or_default()).collect();
        Box::into_raw(Box::new(SkadeStrings { items }))
    }
}

#[no_mangle]
pub unsafe extern "C" fn skade_strings_len(list: *const SkadeStrings) -> usize {
    guard_value(0, || unsafe { list.as_ref() }.map(|l| l.items.len()).unwrap_or(0))
}

/// The i-th string, valid while the list lives; null when out of range.
#[no_mangle]
pub unsafe extern "C" fn skade_strings_get(list: *const SkadeStrings, i: usize) -> *const c_char {
    guard_value(std::ptr::null(), || {
        unsafe { list.as_ref() }.and_then(|l| l.items.get(i)).map(|s| s.as_ptr()).unwrap_or(std::ptr::null())
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_strings_free(list: *mut SkadeStrings) {
    guard_value((), || {
        if !list.is_null() {
            drop(unsafe { Box::from_raw(list) });
        }
    })
}

/// Exports `reader` as an Arrow C stream. arrow-rs's stream callbacks do not catch unwinds, so
/// every `next` runs under `catch_unwind` here: a panic while decoding becomes a stream error.
pub(crate) fn export_stream(reader: impl RecordBatchReader + Send + 'static) -> FFI_ArrowArrayStream {
    let schema = reader.schema();
    FFI_ArrowArrayStream::new(Box::new(GuardedReader { inner: Box::new(reader), schema, failed: false }))
}

struct GuardedReader {
    inner: Box<dyn RecordBatchReader + Send>,
    schema: SchemaRef,
    failed: bool,
}

impl Iterator for GuardedReader {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        match catch_unwind(AssertUnwindSafe(|| self.inner.next())) {
            Ok(item) => item,
            Err(p) => {
                self.failed = true; // the reader's state is unknown after a panic
                Some(Err(ArrowError::ExternalError(Box::new(Error::internal(panic_message(p))))))
            }
        }
    }
}

impl RecordBatchReader for GuardedReader {
    fn schema(&self) -> SchemaRef {
        self.schema.clone()
    }
}

/// A struct array from the shim (rows of a table, filter constants), checked to be one.
pub(crate) fn struct_array(data: ArrayData, what: &str) -> Result<StructArray> {
    if !matches!(data.data_type(), DataType::Struct(_)) {
        return Err(Error::internal(format!("{what} is not a struct array but {}", data.data_type())));
    }
    Ok(StructArray::from(data))
}

/// A query's filters from the shim: their JSON description ("" for none) and the constants it
/// refers to (moved out of `constants`).
pub(crate) unsafe fn filters<'a>(
    json: *const c_char,
    constants: *mut arrow::ffi::FFI_ArrowArray,
    constants_schema: *const arrow::ffi::FFI_ArrowSchema,
) -> Result<(&'a str, Option<StructArray>)> {
    let constants = if constants.is_null() || constants_schema.is_null() {
        None
    } else {
        let array = unsafe { std::ptr::replace(constants, arrow::ffi::FFI_ArrowArray::empty()) };
        Some(struct_array(unsafe { arrow::ffi::from_ffi(array, &*constants_schema) }?, "filter constants")?)
    };
    let json = if json.is_null() { "" } else { arg(json, "filter")? };
    Ok((json, constants))
}

/// Borrows a NUL-terminated UTF-8 argument.
pub(crate) fn arg<'a>(p: *const c_char, what: &str) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::internal(format!("{what} is null")));
    }
    unsafe { CStr::from_ptr(p) }.to_str().map_err(|_| Error::invalid(format!("{what} is not valid UTF-8")))
}

/// Borrows a NUL-terminated UTF-8 argument that may be absent (null: a parameter not given).
pub(crate) fn optional_arg<'a>(p: *const c_char, what: &str) -> Result<Option<&'a str>> {
    match p.is_null() {
        true => Ok(None),
        false => arg(p, what).map(Some),
    }
}

/// Borrows an array of `n` NUL-terminated strings.
pub(crate) fn arg_list(p: *const *const c_char, n: usize, what: &str) -> Result<Vec<String>> {
    if n == 0 {
        return Ok(vec![]);
    }
    if p.is_null() {
        return Err(Error::internal(format!("{what} is null")));
    }
    let ptrs = unsafe { std::slice::from_raw_parts(p, n) };
    ptrs.iter().map(|&s| arg(s, what).map(str::to_string)).collect()
}

/// Borrows the `n` column positions a query uses (none: all of them).
/// A CREATE's conflict rule as the shim passes it: 0 error, 1 ignore (IF NOT EXISTS), 2 replace
/// (OR REPLACE).
pub(crate) fn on_conflict(code: i32) -> Result<OnConflict> {
    match code {
        0 => Ok(OnConflict::Error),
        1 => Ok(OnConflict::Ignore),
        2 => Ok(OnConflict::Replace),
        other => Err(Error::internal(format!("unknown on_conflict {other}"))),
    }
}

pub(crate) fn column_list(p: *const u64, n: usize) -> Vec<usize> {
    if p.is_null() || n == 0 {
        return vec![];
    }
    unsafe { std::slice::from_raw_parts(p, n) }.iter().map(|&c| c as usize).collect()
}

/// Writes `value` to an out-pointer the shim supplied.
pub(crate) fn out<T>(p: *mut T, value: T) -> Result<()> {
    if p.is_null() {
        return Err(Error::internal("out-pointer is null"));
    }
    unsafe { p.write(value) };
    Ok(())
}

/// Borrows a live handle.
pub(crate) fn handle<'a, T>(p: *const T, what: &str) -> Result<&'a T> {
    unsafe { p.as_ref() }.ok_or_else(|| Error::internal(format!("{what} handle is null")))
}

/// Frees a handle made by `Box::into_raw`.
pub(crate) fn free<T>(p: *mut T) {
    guard_value((), || {
        if !p.is_null() {
            drop(unsafe { Box::from_raw(p) });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_internal_errors() {
        let st = guard(|| panic!("boom"));
        assert!(!st.is_null());
        unsafe {
            assert_eq!(skade_status_code(st), ErrorKind::Internal as i32);
            let msg = CStr::from_ptr(skade_status_message(st)).to_str().unwrap().to_string();
            assert!(msg.contains("boom"), "{msg}");
            skade_status_free(st);
        }
    }

    #[test]
    fn errors_keep_kind_and_message() {
        let st = guard(|| Err(Error::catalog("no such table")));
        unsafe {
            assert_eq!(skade_status_code(st), ErrorKind::Catalog as i32);
            skade_status_free(st);
        }
        assert!(guard(|| Ok(())).is_null());
    }
}
