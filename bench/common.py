"""What the benchmarks share: the built extension and the peers' extension files from PyPI."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# SKADE_EXTENSION names another build (to compare two builds in the same conditions).
EXTENSION = os.environ.get("SKADE_EXTENSION") or os.path.join(ROOT, "build", "release", "skade.duckdb_extension")

sys.path.insert(0, os.path.join(ROOT, "tools"))
from sqllogictest import site_extension  # noqa: E402


def ducklake_extension():
    return site_extension("duckdb_extension_ducklake", "ducklake")


def load_iceberg(con):
    """DuckDB's iceberg extension (it needs avro loaded first)."""
    con.execute(f"LOAD '{site_extension('duckdb_extension_avro', 'avro')}'")
    con.execute(f"LOAD '{site_extension('duckdb_extension_iceberg', 'iceberg')}'")
