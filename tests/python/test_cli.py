"""The official DuckDB CLI (duckdb-cli==1.5.5 from PyPI) loads the extension and uses a lake. PyPI
has no CLI for 2.0.1: there the same scenarios run through Python (cli_through_python.py)."""
import os
import subprocess
import sys

import pytest

from conftest import DUCKDB_CLI, EXTENSION, ROOT

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


def test_the_cli_is_duckdbs_own_binary():
    """The CLI the README and the demo use is DuckDB's binary (make links it as build/duckdb), not
    duckdb-cli's `bin/duckdb` Python wrapper."""
    if not os.path.exists(DUCKDB_CLI):
        pytest.skip("no DuckDB CLI for this DuckDB on PyPI")
    with open(DUCKDB_CLI, "rb") as f:
        assert f.read(4) == b"\x7fELF", f"{DUCKDB_CLI} is not an executable binary"
    linked = os.path.join(ROOT, "build", "duckdb")
    if os.path.lexists(linked):
        assert os.path.samefile(linked, DUCKDB_CLI), f"{linked} is not {DUCKDB_CLI}"


def test_ctrl_c_interrupts_a_query_and_the_session_goes_on():
    """In a terminal, Ctrl-C stops the running query and the CLI takes the next one (duckdb-cli's
    Python wrapper died on it, taking the session with it)."""
    if not os.path.exists(DUCKDB_CLI):
        pytest.skip("no DuckDB CLI for this DuckDB on PyPI")
    import pty
    import select
    import time

    pid, fd = pty.fork()
    if pid == 0:  # the CLI, on a terminal of its own
        os.execv(DUCKDB_CLI, [DUCKDB_CLI, "-dark-mode"])
    out = bytearray()

    def pump(seconds, until=None):
        end = time.monotonic() + seconds
        while time.monotonic() < end and not (until and until in out):
            if not select.select([fd], [], [], 0.05)[0]:
                continue
            try:
                chunk = os.read(fd, 65536)
            except OSError:
                return  # the terminal closed: the session ended
            out.extend(chunk)
            for _ in range(chunk.count(b"\x1b[6n")):  # the line editor asks for the cursor: answer
                os.write(fd, b"\x1b[1;1R")

    def send(text):
        try:
            os.write(fd, text)
        except OSError:
            pass

    try:
        pump(10, b" D ")
        send(b"SELECT count(*) FROM range(1000000000000);\r")
        pump(1.5)
        send(b"\x03")
        pump(3)
        send(b"SELECT 40 + 2 AS answer;\r")
        pump(20, b"42")
        assert b"42" in out, bytes(out[-500:])
        send(b".quit\r")
        pump(2)
    finally:
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        os.waitpid(pid, 0)
        os.close(fd)
