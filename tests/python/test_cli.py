"""The official DuckDB CLI (duckdb-cli==1.5.5 from PyPI) loads the extension and uses a lake. PyPI
has no CLI for 2.0.1: there the same scenarios run through Python (cli_through_python.py)."""
import os
import subprocess
import sys

from conftest import DUCKDB_CLI, EXTENSION

THROUGH_PYTHON = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "cli_through_python.py")]


def run_cli(sql, cwd):
    command = [DUCKDB_CLI, "-unsigned", "-csv", "-c"] if os.path.exists(DUCKDB_CLI) else THROUGH_PYTHON
    return subprocess.run(command + [sql], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_cli_round_trip(tmp_path):
    sql = f"""
        LOAD '{EXTENSION}';
        ATTACH 'lake.skade' AS lake (TYPE skade);
        CREATE TABLE lake.orders (id BIGINT PRIMARY KEY, customer VARCHAR, amount DOUBLE);
        INSERT INTO lake.orders VALUES (1, 'a', 10), (2, 'b', 20);
        SELECT count(*) AS n, sum(amount) AS total FROM lake.orders;
    """
    r = run_cli(sql, tmp_path)
    assert r.returncode == 0, r.stderr
    assert "n,total\n2,30.0" in r.stdout
    # a second CLI process sees the first one's commits
    r = run_cli(f"LOAD '{EXTENSION}'; ATTACH 'lake.skade' AS lake (TYPE skade); "
                "SELECT customer FROM lake.orders ORDER BY id;", tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["customer", "a", "b"]


def test_cli_reports_errors_and_keeps_running(tmp_path):
    r = run_cli(f"LOAD '{EXTENSION}'; ATTACH 'lake.skade' AS lake (TYPE skade, BOGUS 1);", tmp_path)
    assert r.returncode != 0
    assert "unknown ATTACH option 'BOGUS'" in r.stderr
    assert not (tmp_path / "lake.skade").exists()
