#!/usr/bin/env python3
"""Builds the DuckDB static libraries the extension links, one per supported DuckDB version.

A C++ extension must be compiled against the exact DuckDB it loads into and carries its own copy
of the DuckDB code it calls (the hosts -- the CLI, the Python module -- export no symbols an
extension could bind to). The sources are DuckDB's own, from the PyPI source distribution of the
`duckdb` package (its `external/duckdb` tree), pinned by hash below. They are built with DuckDB's
CMake (Release, Ninja, unity build) into `<cache>/duckdb/<version>/`, outside the clone, so a
rebuild is a no-op until the version or the configuration below changes.

Only the library itself is built: no shell, tests or extensions. skade never runs DuckDB's
functions itself (the host has them), and a link map shows the shim's references reach ~93% of the
library's objects anyway (docs/design/build.md), so the rest cannot be trimmed by picking objects.

Usage: build_duckdb.py VERSION   (prints the include directories and the archives to link, as JSON)
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import urllib.request

# version -> (sdist URL, sha256, git commit DuckDB reports in PRAGMA version)
SOURCES = {
    "1.5.5": (
        "https://files.pythonhosted.org/packages/7d/19/e57151753576373c6696a12022648546cca6038e8833fda2908ee2342d9b/duckdb-1.5.5.tar.gz",
        "72f33ee57ca7595b23957671a2cc7f7fe2be0ecc2d68f63abedcfcaa3a5c1238",
        "d8cdaa33fd",
    ),
    "2.0.1": (
        "https://files.pythonhosted.org/packages/49/d8/ebb8ff07c617d1a8c25e7f7718a6955d2d5f7e539ec5219be1da478c0a42/duckdb-2.0.1.tar.gz",
        "5b3f493140e35b75298ee0fc606d98e3065e8601e64fe81b09326de7a6fd68e0",
        "8d78114e90",
    ),
}

# Extensions DuckDB's build would otherwise link into the library (the host provides them).
SKIP_EXTENSIONS = "core_functions;parquet;json;icu;jemalloc;autocomplete;tpch;tpcds"


def cache_dir() -> str:
    return os.environ.get("SKADE_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "skade")


# CMake and Ninja from PyPI, in a virtualenv of their own beside the builds: the build directories
# remember the tools' paths (CMake's regeneration rule), so the tools must outlive any clone.
BUILD_TOOLS = ["cmake==4.4.5", "ninja==1.13.2"]


def tool(name: str) -> str:
    venv = os.path.join(cache_dir(), "build-tools")
    stamp = os.path.join(venv, ".installed")
    python = os.path.join(venv, "bin", "python")
    # (a venv outlives the interpreter it was made from if the machine's Python moves)
    if (not os.path.exists(stamp) or open(stamp).read() != repr(BUILD_TOOLS)
            or subprocess.run([python, "-c", "pass"], capture_output=True).returncode != 0):
        print(f"build_duckdb: installing {' '.join(BUILD_TOOLS)} into {venv}", file=sys.stderr)
        subprocess.run([sys.executable, "-m", "venv", "--clear", venv], check=True)
        subprocess.run([os.path.join(venv, "bin", "pip"), "install", "--quiet", "--disable-pip-version-check",
                        *BUILD_TOOLS], check=True)
        with open(stamp, "w") as f:
            f.write(repr(BUILD_TOOLS))
    return os.path.join(venv, "bin", name)


def fetch(version: str, root: str) -> str:
    """Downloads and unpacks the pinned sources once; returns DuckDB's source directory."""
    url, sha256, _ = SOURCES[version]
    src = os.path.join(root, "src")
    complete = os.path.join(src, ".complete")  # holds the sha256 the tree was unpacked from
    if os.path.exists(complete) and open(complete).read() == sha256:
        return src
    os.makedirs(root, exist_ok=True)
    archive = os.path.join(root, f"duckdb-{version}.tar.gz")
    if not os.path.exists(archive) or digest(archive) != sha256:
        print(f"build_duckdb: downloading DuckDB {version} sources", file=sys.stderr)
        tmp = archive + ".part"
        try:
            with urllib.request.urlopen(url, timeout=300) as r, open(tmp, "wb") as f:
                shutil.copyfileobj(r, f)
        except OSError as e:
            sys.exit(f"build_duckdb: cannot download DuckDB {version}'s sources from {url}: {e}")
        if digest(tmp) != sha256:
            os.remove(tmp)
            sys.exit(f"build_duckdb: {url} does not have the pinned sha256 {sha256}")
        os.replace(tmp, archive)
    shutil.rmtree(src, ignore_errors=True)
    prefix = f"duckdb-{version}/external/duckdb/"
    with tarfile.open(archive) as tar:
        members = []
        for m in tar.getmembers():
            if m.name.startswith(prefix) and len(m.name) > len(prefix):
                m.name = m.name[len(prefix):]
                members.append(m)
        tar.extractall(src, members=members, filter="data")
    with open(complete, "w") as f:
        f.write(sha256)
    return src


def digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def compiler(variable: str, default: str) -> str:
    name = os.environ.get(variable, default)
    found = shutil.which(name)
    if not found:
        sys.exit(f"build_duckdb: the compiler {name} is not installed (set {variable} to another)")
    return found


def configure_args(version: str, src: str, build: str) -> list:
    _, sha256, commit = SOURCES[version]
    describe = f"v{version}-0-g{commit}"
    return [
        tool("cmake"), "-S", src, "-B", build, "-G", "Ninja",
        f"-DCMAKE_MAKE_PROGRAM={tool('ninja')}",
        # the compilers the shim is compiled with too (build_extension.py)
        f"-DCMAKE_C_COMPILER={compiler('CC', 'gcc')}", f"-DCMAKE_CXX_COMPILER={compiler('CXX', 'g++')}",
        "-DCMAKE_BUILD_TYPE=Release",  # NDEBUG, never DEBUG: the class layouts must match the host's
        f"-DOVERRIDE_GIT_DESCRIBE={describe}",
        "-DDUCKDB_EXPLICIT_PLATFORM=linux_amd64",
        "-DDUCKDB_OPTIMIZATION_PROFILE=EXTENSION",  # 2.0: what DuckDB's own extensions are built with
        "-DBUILD_SHELL=OFF", "-DBUILD_UNITTESTS=OFF", "-DBUILD_BENCHMARKS=OFF",
        "-DENABLE_SANITIZER=OFF", "-DENABLE_UBSAN=OFF",
        f"-DSKIP_EXTENSIONS={SKIP_EXTENSIONS}",
        "-DCMAKE_POSITION_INDEPENDENT_CODE=ON",
        "-Wno-dev", "--no-warn-unused-cli",
        f"-DSKADE_SOURCES_SHA256={sha256}",  # (unused by CMake: it puts the sources in the stamp)
    ]


def build(version: str) -> dict:
    if version not in SOURCES:
        sys.exit(f"build_duckdb: DuckDB {version} is not supported (supported: {', '.join(SOURCES)})")
    root = os.path.join(cache_dir(), "duckdb", version)
    src = fetch(version, root)
    out = os.path.join(root, "build")
    args = configure_args(version, src, out)
    stamp = os.path.join(out, ".skade-configure")
    # What the build depends on: the arguments but not where the tools live.
    wanted = json.dumps([a for a in args[1:] if not a.startswith("-DCMAKE_MAKE_PROGRAM=")])
    if not os.path.exists(stamp) or open(stamp).read() != wanted:
        shutil.rmtree(out, ignore_errors=True)
        subprocess.run(args, check=True, stdout=subprocess.DEVNULL)
        with open(stamp, "w") as f:
            f.write(wanted)
    jobs = os.environ.get("SKADE_JOBS") or str(os.cpu_count() or 2)
    # DuckDB 1.5 keeps the (here empty) list of linked-in extensions in a library of its own
    targets = ["duckdb_static"]
    listed = subprocess.run([tool("ninja"), "-C", out, "-t", "targets", "all"], check=True,
                            capture_output=True, text=True).stdout
    if "\nduckdb_generated_extension_loader: phony" in listed:
        targets.append("duckdb_generated_extension_loader")
    # stdout carries the JSON answer: the build's progress goes to stderr
    subprocess.run([tool("ninja"), "-C", out, "-j", jobs, *targets], check=True, stdout=sys.stderr)
    archives = [os.path.join(out, "src", "libduckdb_static.a")]
    if "duckdb_generated_extension_loader" in targets:
        archives.append(os.path.join(out, "extension", "libduckdb_generated_extension_loader.a"))
    third_party = os.path.join(out, "third_party")
    for dirpath, _, files in sorted(os.walk(third_party)):
        archives += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".a")]
    # DuckDB 2.0's headers include fmt's (database_manager.hpp)
    includes = [os.path.join(src, "src", "include"), os.path.join(src, "third_party", "fmt", "include")]
    return {"version": version, "includes": includes, "archives": archives}


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.strip().splitlines()[-1])
    print(json.dumps(build(sys.argv[1])))
