//! Compiles the C++ shim (cpp/) against the DuckDB headers that libduckdb-sys publishes.
//! Keep the flags stable: see docs/design/build.md for what recompiles all of DuckDB.
//!
//! Each .cpp is compiled only when it (or a shim header, or the flags) changed: objects are
//! cached under OUT_DIR by a hash of their inputs, since every file includes all of duckdb.hpp
//! and compiling the whole shim takes over a minute on two cores.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-changed=cpp");
    println!("cargo:rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_EXTENSION").is_none() {
        return; // the core alone (cargo test --no-default-features) needs no DuckDB
    }
    let duckdb_include = std::env::var("DEP_DUCKDB_INCLUDE")
        .expect("DEP_DUCKDB_INCLUDE is not set: libduckdb-sys must be built with feature `bundled`");
    let mut sources = vec![];
    collect(Path::new("cpp"), "cpp", &mut sources);
    sources.sort();
    let mut headers = vec![];
    collect(Path::new("cpp/include"), "h", &mut headers);
    collect(Path::new("cpp/include"), "hpp", &mut headers);
    headers.sort();

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
        .flag_if_supported("-Wno-class-memaccess");

    // What every object depends on besides its own source.
    let mut common = DefaultHasher::new();
    duckdb_include.hash(&mut common);
    format!("{:?}", build.get_compiler().args()).hash(&mut common);
    for h in &headers {
        std::fs::read(h).expect("cannot read a shim header").hash(&mut common);
    }
    let common = common.finish();

    let cache = PathBuf::from(std::env::var("OUT_DIR").unwrap()).join("shim-objects");
    std::fs::create_dir_all(&cache).expect("cannot create the object cache");
    let mut objects = vec![];
    let mut stale = vec![];
    for src in &sources {
        let mut h = DefaultHasher::new();
        common.hash(&mut h);
        std::fs::read(src).expect("cannot read a shim source").hash(&mut h);
        let stem = src.to_string_lossy().replace(['/', '.'], "_");
        let object = cache.join(format!("{stem}-{:016x}.o", h.finish()));
        if !object.exists() {
            stale.push((src.clone(), object.clone()));
        }
        objects.push(object);
    }
    if !stale.is_empty() {
        let mut compile = build.clone();
        compile.files(stale.iter().map(|(src, _)| src));
        let compiled = compile.compile_intermediates();
        // cc returns one object per source, in order.
        for ((_, object), built) in stale.iter().zip(compiled) {
            std::fs::copy(&built, object).expect("cannot cache a compiled object");
        }
    }
    let mut link = cc::Build::new();
    link.cpp(true).objects(&objects);
    link.compile("skade_shim");
}

fn collect(dir: &Path, extension: &str, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("cpp/ is missing") {
        let path = entry.expect("cannot list cpp/").path();
        if path.is_dir() {
            collect(&path, extension, out);
        } else if path.extension().is_some_and(|e| e == extension) {
            out.push(path);
        }
    }
}
