#!/usr/bin/env python3
"""Builds skade.duckdb_extension for one DuckDB version: the C++ shim compiled against that
version's headers, linked with the Rust core (one static library, the same for every version) and
that version's DuckDB library, with DuckDB's metadata footer; then the same file gzipped into a
local extension repository, in the layout `INSTALL skade FROM '<dir>'` reads.

  build/release/v<version>/skade.duckdb_extension            LOAD '<this file>'
  build/repository/v<version>/linux_amd64/skade.duckdb_extension.gz

Each shim object is cached by a hash of its source, the shim's headers and the compiler command,
so an edit recompiles one file (every file includes all of duckdb.hpp: seconds each).

Usage: build_extension.py VERSION CORE_LIBRARY
"""
import concurrent.futures
import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import build_duckdb  # noqa: E402

PLATFORM = "linux_amd64"
# The Rust standard library's system dependencies (`rustc --print native-static-libs`).
RUST_SYSTEM_LIBS = ["-lgcc_s", "-lutil", "-lrt", "-lpthread", "-lm", "-ldl", "-lc"]


def shim_sources() -> list:
    found = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "cpp")):
        found += [os.path.join(dirpath, f) for f in files if f.endswith(".cpp")]
    return sorted(found)


def shim_headers() -> list:
    found = []
    for dirpath, _, files in os.walk(os.path.join(ROOT, "cpp", "include")):
        found += [os.path.join(dirpath, f) for f in files if f.endswith((".h", ".hpp"))]
    return sorted(found)


def compile_command(version: str, includes: list) -> list:
    major, minor, patch = version.split(".")
    # DuckDB 1.x is C++11 and 2.x C++17: the shim is compiled with the standard of the DuckDB it
    # is built against (its headers, inline code and class layouts must be seen the same way).
    std = "c++11" if major == "1" else "c++17"
    return [
        os.environ.get("CXX", "g++"), f"-std={std}", "-O3", "-fPIC", "-fvisibility=hidden",
        "-ffunction-sections", "-fdata-sections",
        "-DNDEBUG",  # must match DuckDB's release build: never define DEBUG
        f"-DSKADE_DUCKDB_MAJOR={major}", f"-DSKADE_DUCKDB_MINOR={minor}", f"-DSKADE_DUCKDB_PATCH={patch}",
        *[f"-I{d}" for d in includes], "-I", os.path.join(ROOT, "cpp", "include"),
        "-Wall", "-Wno-unused-parameter", "-Wno-sign-compare", "-Wno-redundant-move",
        "-Wno-deprecated-copy", "-Wno-class-memaccess", "-Wno-unused-function",
        # 2.0 deprecates APIs 1.5 has no replacement for (ToUnifiedFormat with a count)
        "-Wno-deprecated-declarations",
    ]


def compile_shim(version: str, includes: list, cache: str) -> list:
    command = compile_command(version, includes)
    # What an object depends on besides its source, independent of where the clone lives (so a
    # CI run in a fresh directory reuses the objects): the command, the shim's headers, and the
    # DuckDB sources' identity (build_duckdb's pinned hash).
    common = hashlib.sha256(repr(command).replace(ROOT, "<root>").encode())
    common.update(build_duckdb.SOURCES[version][1].encode())
    for h in shim_headers():
        common.update(os.path.relpath(h, ROOT).encode())
        common.update(open(h, "rb").read())
    os.makedirs(cache, exist_ok=True)
    objects, stale = [], []
    for src in shim_sources():
        h = common.copy()
        h.update(open(src, "rb").read())
        stem = os.path.relpath(src, ROOT).replace("/", "_").replace(".", "_")
        obj = os.path.join(cache, f"{stem}-{h.hexdigest()[:16]}.o")
        objects.append(obj)
        if not os.path.exists(obj):
            stale.append((src, obj))

    def compile_one(job):
        src, obj = job
        tmp = obj + ".tmp"
        result = subprocess.run(command + ["-c", src, "-o", tmp], capture_output=True, text=True)
        if result.returncode != 0:
            return f"{os.path.relpath(src, ROOT)} (DuckDB {version}):\n{result.stderr}"
        os.replace(tmp, obj)
        return None

    current = {os.path.basename(o) for o in objects}
    for name in os.listdir(cache):  # objects of older sources: the cache holds the current ones
        if name.endswith(".o") and name not in current:
            os.remove(os.path.join(cache, name))
    if stale:
        print(f"build_extension: compiling {len(stale)} shim file(s) for DuckDB {version}", file=sys.stderr)
        jobs = int(os.environ.get("SKADE_JOBS") or os.cpu_count() or 2)
        with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
            errors = [e for e in pool.map(compile_one, stale) if e]
        if errors:
            sys.exit("build_extension: the shim does not compile:\n" + "\n".join(errors))
    return objects


def link(objects: list, core: str, archives: list, output: str) -> None:
    exports = output + ".exports"
    with open(exports, "w") as f:
        # Only the entry point: the Rust core, DuckDB's copy and the shim stay private, so they
        # cannot clash with the host's symbols.
        f.write("{ global: skade_duckdb_cpp_init; local: *; };\n")
    command = [os.environ.get("CXX", "g++"), "-shared", "-o", output + ".tmp", *objects, core,
               "-Wl,--start-group", *archives, "-Wl,--end-group",
               "-Wl,--gc-sections", f"-Wl,--version-script={exports}", "-Wl,--no-undefined",
               *RUST_SYSTEM_LIBS]
    subprocess.run(command, check=True)
    os.replace(output + ".tmp", output)


def main() -> None:
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[-1])
    version, core = sys.argv[1], os.path.abspath(sys.argv[2])
    if not os.path.exists(core):
        sys.exit(f"build_extension: the core library {core} is missing (cargo build --release)")
    duckdb = build_duckdb.build(version)
    cache = os.path.join(build_duckdb.cache_dir(), "shim", version)
    objects = compile_shim(version, duckdb["includes"], cache)
    work = os.path.join(ROOT, "build", "work", f"v{version}")
    os.makedirs(work, exist_ok=True)
    library = os.path.join(work, "libskade.so")
    extension = os.path.join(ROOT, "build", "release", f"v{version}", "skade.duckdb_extension")
    packed = os.path.join(ROOT, "build", "repository", f"v{version}", PLATFORM, "skade.duckdb_extension.gz")
    # Up to date when both outputs exist and were made from exactly these inputs (object names
    # are content hashes; the core and DuckDB's archives by size and time): a revert or a deleted
    # source changes the list, so it relinks.
    def identity(path):
        st = os.stat(path)
        return [path, st.st_size, st.st_mtime_ns]

    manifest = json.dumps({"objects": objects, "core": identity(core),
                           "archives": [identity(a) for a in duckdb["archives"]],
                           "tools": [identity(__file__), identity(os.path.join(ROOT, "extension", "append_metadata.py"))]})
    stamp = os.path.join(work, "inputs.json")
    if (os.path.exists(extension) and os.path.exists(packed) and os.path.exists(stamp)
            and open(stamp).read() == manifest):
        print(f"build_extension: {os.path.relpath(extension, ROOT)} is up to date", file=sys.stderr)
        return
    if os.path.exists(stamp):
        os.remove(stamp)
    link(objects, core, duckdb["archives"], library)

    subprocess.run([sys.executable, os.path.join(ROOT, "extension", "append_metadata.py"), "--strip",
                    "--duckdb-version", f"v{version}", "--platform", PLATFORM, library, extension], check=True)
    os.makedirs(os.path.dirname(packed), exist_ok=True)
    with open(extension, "rb") as src, gzip.open(packed + ".tmp", "wb", compresslevel=6) as dst:
        shutil.copyfileobj(src, dst)
    os.replace(packed + ".tmp", packed)
    with open(stamp, "w") as f:
        f.write(manifest)
    print(f"build_extension: {os.path.relpath(extension, ROOT)} "
          f"({os.path.getsize(extension) / 1e6:.1f} MB) and {os.path.relpath(packed, ROOT)}", file=sys.stderr)


if __name__ == "__main__":
    main()
