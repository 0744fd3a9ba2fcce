"""Shared fixtures: the built extension and DuckDB connections that have loaded it."""
import os
import sys

import duckdb
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXTENSION = os.path.join(ROOT, "build", "release", "skade.duckdb_extension")
DUCKDB_CLI = os.path.join(os.path.dirname(sys.executable), "duckdb")

sys.path.insert(0, os.path.join(ROOT, "tools"))
from sqllogictest import site_extension  # noqa: E402  (the peers' extension files, from PyPI)


def connect(path=":memory:"):
    con = duckdb.connect(path, config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{EXTENSION}'")
    return con


@pytest.fixture
def con():
    c = connect()
    yield c
    c.close()
