//! The REST catalog servers (`skade_serve`, `skade_servers`, `skade_serve_stop`).

use std::ffi::c_char;

use arrow::array::{RecordBatch, RecordBatchIterator};
use arrow::ffi_stream::FFI_ArrowArrayStream;

use super::transaction::SkadeTxn;
use super::{arg, guard, handle, optional_arg, out, SkadeStatus};
use crate::error::{Error, Result};
use crate::functions::serve;
use crate::rest::ServeOptions;

fn rows(batch: RecordBatch, result: *mut FFI_ArrowArrayStream) -> Result<()> {
    let schema = batch.schema();
    out(result, super::export_stream(RecordBatchIterator::new([Ok(batch)], schema)))
}

/// Starts serving the lake of `txn`, attached as `lake`, on `port` (0: any free one); the
/// optional strings may be null.
#[no_mangle]
pub unsafe extern "C" fn skade_fn_serve(
    txn: *const SkadeTxn,
    lake: *const c_char,
    host: *const c_char,
    port: i64,
    token: *const c_char,
    client_id: *const c_char,
    client_secret: *const c_char,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| {
        let port = u16::try_from(port)
            .map_err(|_| Error::invalid(format!("skade_serve: port {port} is not a TCP port (0 to 65535)")))?;
        let options = ServeOptions {
            host: optional_arg(host, "host")?.map(str::to_string),
            port,
            token: optional_arg(token, "token")?.map(str::to_string),
            client_id: optional_arg(client_id, "client_id")?.map(str::to_string),
            client_secret: optional_arg(client_secret, "client_secret")?.map(str::to_string),
        };
        rows(serve::serve(&handle(txn, "transaction")?.0, arg(lake, "lake")?, &options)?, result)
    })
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_servers(result: *mut FFI_ArrowArrayStream) -> *mut SkadeStatus {
    guard(|| rows(serve::servers()?, result))
}

#[no_mangle]
pub unsafe extern "C" fn skade_fn_serve_stop(
    lake_or_address: *const c_char,
    result: *mut FFI_ArrowArrayStream,
) -> *mut SkadeStatus {
    guard(|| rows(serve::stop(arg(lake_or_address, "lake or address")?)?, result))
}
