"""What the benchmarks share: the built extension and the peers' extension files from PyPI."""
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
from hosts import built_extension  # noqa: E402
from sqllogictest import site_extension  # noqa: E402

# The build for the DuckDB running the benchmark; SKADE_EXTENSION names another build (to compare
# two builds in the same conditions).
EXTENSION = built_extension()


def ducklake_extension():
    return site_extension("duckdb_extension_ducklake", "ducklake")


def load_iceberg(con):
    """DuckDB's iceberg extension (it needs avro loaded first)."""
    con.execute(f"LOAD '{site_extension('duckdb_extension_avro', 'avro')}'")
    con.execute(f"LOAD '{site_extension('duckdb_extension_iceberg', 'iceberg')}'")
