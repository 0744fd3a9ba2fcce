//! Compiles the C++ shim (cpp/) against the DuckDB headers that libduckdb-sys publishes.
//! Keep the flags stable: see docs/design/build.md for what recompiles all of DuckDB.

use std::path::Path;

fn main() {
    println!("cargo:rerun-if-changed=cpp");
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_EXTENSION").is_none() {
        return; // the core alone (cargo test --no-default-features) needs no DuckDB
    }
    let duckdb_include = std::env::var("DEP_DUCKDB_INCLUDE")
        .expect("DEP_DUCKDB_INCLUDE is not set: libduckdb-sys must be built with feature `bundled`");
    let mut sources = vec![];
    collect_sources(Path::new("cpp"), &mut sources);
    sources.sort();
    let mut build = cc::Build::new();
    build
        .cpp(true)
        .std("c++11") // the standard DuckDB itself is compiled with here
        .include(&duckdb_include)
        .include("cpp/include")
        .define("NDEBUG", None) // must match DuckDB's release build: never define DEBUG
        .flag_if_supported("-Wno-unused-parameter")
        .flag_if_supported("-Wno-sign-compare")
        .flag_if_supported("-Wno-redundant-move")
        .flag_if_supported("-Wno-deprecated-copy")
        .flag_if_supported("-Wno-class-memaccess")
        .files(&sources);
    build.compile("skade_shim");
}

fn collect_sources(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("cpp/ is missing") {
        let path = entry.expect("cannot list cpp/").path();
        if path.is_dir() {
            collect_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "cpp") {
            out.push(path);
        }
    }
}
