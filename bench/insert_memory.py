"""Peak memory of one big INSERT into a skade table, with and without a primary key, under a
DuckDB memory_limit (issue 17 item 6: the key check used to hold every key, ~50 bytes a key).

    build/venv/bin/python bench/insert_memory.py [rows] [memory_limit]

Each run is its own process; its peak RSS (ru_maxrss) is printed. Figures, no assertions.
"""
import resource
import subprocess
import sys
import tempfile
import time

from common import EXTENSION

RUN = """
import sys, duckdb
ext, lake, rows, limit, key = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5] == "key"
con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
con.execute(f"LOAD '{ext}'")
con.execute(f"SET memory_limit='{limit}'")
con.execute(f"ATTACH '{lake}' AS lake (TYPE skade)")
pk = "PRIMARY KEY" if key else ""
con.execute(f"CREATE TABLE lake.big (id BIGINT {pk}, a BIGINT, s VARCHAR)")
con.execute(f"INSERT INTO lake.big SELECT i, i * 2, 'row' || i FROM range({rows}) t(i)")
assert con.execute("SELECT count(*) FROM lake.big").fetchone()[0] == rows
"""


def run(rows, limit, key):
    with tempfile.TemporaryDirectory() as d:
        start = time.perf_counter()
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        subprocess.run([sys.executable, "-c", RUN, EXTENSION, f"{d}/lake.skade", str(rows), limit,
                        "key" if key else "nokey"], check=True)
        peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
        return max(peak, before) / 1024, time.perf_counter() - start


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 20_000_000
    limit = sys.argv[2] if len(sys.argv) > 2 else "300MB"
    print(f"INSERT of {rows:,} rows (BIGINT, BIGINT, VARCHAR), memory_limit {limit}")
    # ru_maxrss of children is the largest child so far: the smaller run goes first.
    for key in (False, True):
        rss, secs = run(rows, limit, key)
        print(f"  {'with' if key else 'without'} a primary key: peak RSS {rss:,.0f} MB, {secs:.1f} s")


if __name__ == "__main__":
    main()
