#!/usr/bin/env python3
"""Runs a SQL file statement by statement in the running Python's DuckDB and prints each result,
for hosts without a CLI (DuckDB 2.0.1 has none on PyPI). Unsigned extensions are allowed, as the
CLI's -unsigned flag does. Usage: demo.py FILE.sql"""
import sys

import duckdb


def statements(text: str):
    lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
    for statement in "\n".join(lines).split(";\n"):
        if statement.strip():
            yield statement.strip().rstrip(";")


def main() -> None:
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    for sql in statements(open(sys.argv[1]).read()):
        result = con.sql(sql)
        if result is not None:
            result.show(max_width=120)


if __name__ == "__main__":
    main()
