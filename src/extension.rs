//! The DuckDB entry point. DuckDB looks up `<file base name>_duckdb_cpp_init` in the loaded file;
//! a Rust cdylib exports only Rust symbols, so the export is this trampoline into the shim's
//! C++ initializer. It is `C-unwind` because DuckDB's contract is that a failing init throws a
//! C++ exception to the loader: that exception passes through this one frame, which holds no
//! Rust state (docs/design/c-abi.md). No other entry lets a C++ exception reach Rust.

// Links DuckDB's static library (the shim's symbols resolve against it).
use libduckdb_sys as _;

extern "C-unwind" {
    fn skade_cpp_init(loader: *mut std::ffi::c_void);
}

/// # Safety
/// Called by DuckDB's extension loader with its `ExtensionLoader&`.
#[no_mangle]
pub unsafe extern "C-unwind" fn skade_duckdb_cpp_init(loader: *mut std::ffi::c_void) {
    skade_cpp_init(loader)
}
