"""The DuckDB CLI's `-unsigned -csv -c SQL` for a DuckDB whose CLI PyPI does not have (2.0.1): the
statements run in one process of this Python's duckdb, the last result is printed as CSV, and an
error goes to stderr with exit status 1, as the CLI does. test_cli.py runs its scenarios through
this where there is no CLI."""
import csv
import sys

import duckdb


def main():
    sql = sys.argv[1]
    try:
        con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
        result = con.execute(sql)
        rows = result.fetchall() if result.description else []
        header = [d[0] for d in result.description or []]
    except duckdb.Error as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    if header:
        out = csv.writer(sys.stdout, lineterminator="\n")
        out.writerow(header)
        out.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
