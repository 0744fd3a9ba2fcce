#!/usr/bin/env python3
"""Packages the built shared library as a DuckDB extension: copies it and appends DuckDB's
512-byte metadata footer, which the loader checks before it opens the file.

Footer layout (DuckDB 1.5, ParseExtensionMetaData): eight 32-byte NUL-padded fields stored last
field first -- [7] [6] [5] [4: ABI type] [3: extension version] [2: DuckDB version]
[1: platform] [0: magic "4"] -- then a 256-byte signature, left zero: unsigned extensions load
with `allow_unsigned_extensions` (the CLI's -unsigned flag). Official builds put a short
WebAssembly-custom-section header before the footer; the native loader skips it, and we write it
too so the file has the same shape as DuckDB's own.
"""
import argparse
import os
import shutil
import subprocess
import sys

FIELD = 32
SECTION_HEADER = b"\x00\x93\x04\x10duckdb_signature\x80\x04"


def field(text: str) -> bytes:
    raw = text.encode()
    if len(raw) > FIELD:
        sys.exit(f"metadata field too long: {text!r}")
    return raw.ljust(FIELD, b"\0")


def footer(platform: str, duckdb_version: str, extension_version: str, abi: str) -> bytes:
    fields = [field("4"), field(platform), field(duckdb_version), field(extension_version), field(abi)]
    fields += [field("")] * (8 - len(fields))
    out = b"".join(reversed(fields)) + b"\0" * 256
    assert len(out) == 512
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("library")
    p.add_argument("output")
    p.add_argument("--platform", default="linux_amd64")
    p.add_argument("--duckdb-version", default="v1.5.5")
    p.add_argument("--extension-version", default="0.1.0")
    p.add_argument("--abi", default="CPP")
    p.add_argument("--strip", action="store_true", help="drop the symbol table (about a fifth of the file)")
    a = p.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(a.output)), exist_ok=True)
    tmp = a.output + ".tmp"
    if a.strip and shutil.which("strip"):
        subprocess.run(["strip", "--strip-unneeded", "-o", tmp, a.library], check=True)
    else:
        shutil.copyfile(a.library, tmp)
    with open(tmp, "ab") as f:
        f.write(SECTION_HEADER)
        f.write(footer(a.platform, a.duckdb_version, a.extension_version, a.abi))
    os.replace(tmp, a.output)  # never leave a half-written extension where DuckDB would load it


if __name__ == "__main__":
    main()
