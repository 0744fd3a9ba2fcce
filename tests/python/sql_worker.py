"""A DuckDB process of its own for multi-process tests: loads skade, then runs one statement per
line of its stdin (JSON: {"sql": ...}) and answers each on stdout with one JSON line: {"rows":
[...]} or {"error": message, "type": the exception class}. The test drives several of these to
interleave transactions across processes."""
import json
import sys

import duckdb


def main():
    extension = sys.argv[1]
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{extension}'")
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        try:
            result = con.execute(request["sql"])
            rows = result.fetchall() if result.description else []
            answer = {"rows": [[v if isinstance(v, (int, float, str, type(None))) else str(v) for v in r] for r in rows]}
        except duckdb.Error as e:
            answer = {"error": str(e), "type": type(e).__name__}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
