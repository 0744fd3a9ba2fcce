//! The extension's own tokio runtime. DuckDB's threads have none, and the iceberg crate's I/O is
//! async, so every entry from the C ABI blocks on this runtime at the boundary.

use std::future::Future;
use std::sync::OnceLock;

static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();

pub fn runtime() -> &'static tokio::runtime::Runtime {
    RUNTIME.get_or_init(|| {
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(2).max(2);
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(threads)
            .thread_name("skade-io")
            .enable_all()
            .build()
            .expect("skade: cannot start the tokio runtime")
    })
}

/// Runs a future to completion from a thread that is not a runtime worker (a DuckDB thread, a
/// test). Inside a runtime worker it would panic, so the core never calls it from async code.
pub fn block_on<F: Future>(f: F) -> F::Output {
    runtime().block_on(f)
}
