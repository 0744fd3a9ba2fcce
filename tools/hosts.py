"""What the running DuckDB host has: the skade build made for it, and the peer extensions from
PyPI (ducklake, iceberg, avro exist for DuckDB 1.5.5 only)."""
import glob
import os

import duckdb

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPOSITORY = os.path.join(ROOT, "build", "repository")


def built_extension() -> str:
    """SKADE_EXTENSION if set, else the file `make` built for this DuckDB version."""
    return os.environ.get("SKADE_EXTENSION") or os.path.join(
        ROOT, "build", "release", f"v{duckdb.__version__}", "skade.duckdb_extension")


def peer_extension(package: str, name: str):
    """The extension file a PyPI package (e.g. duckdb_extension_iceberg) installed, or None."""
    base = os.path.join(os.path.dirname(duckdb.__file__), "..", package, "extensions")
    found = glob.glob(os.path.join(base, "*", f"{name}.duckdb_extension"))
    return os.path.abspath(found[0]) if found else None
