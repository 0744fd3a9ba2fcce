"""`INSTALL skade FROM '<local repository>'` then `LOAD skade`, in the DuckDB running the tests
(make test runs them in every host: 1.5.5 and 2.0.1). `make` lays the repository out as DuckDB's
own ones: <dir>/v<version>/linux_amd64/skade.duckdb_extension.gz."""
import gzip
import os

import duckdb
import pytest

from conftest import EXTENSION, REPOSITORY

PLATFORM = "linux_amd64"
PACKED = os.path.join(REPOSITORY, f"v{duckdb.__version__}", PLATFORM, "skade.duckdb_extension.gz")


def fresh(tmp_path, **config):
    con = duckdb.connect(config=config)
    con.execute(f"SET extension_directory = '{tmp_path / 'extensions'}'")
    return con


def test_the_repository_holds_this_build():
    with gzip.open(PACKED) as f, open(EXTENSION, "rb") as built:
        assert f.read() == built.read()


def test_install_and_load_from_the_local_repository(tmp_path):
    con = fresh(tmp_path, allow_unsigned_extensions="true")
    con.execute(f"INSTALL skade FROM '{REPOSITORY}'")
    installed = tmp_path / "extensions" / f"v{duckdb.__version__}" / PLATFORM / "skade.duckdb_extension"
    assert installed.exists()
    con.execute("LOAD skade")
    row = con.execute(
        "SELECT installed, loaded, install_mode FROM duckdb_extensions() WHERE extension_name = 'skade'"
    ).fetchone()
    assert row == (True, True, "REPOSITORY")
    con.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    con.execute("CREATE TABLE lake.t (id BIGINT PRIMARY KEY, v VARCHAR)")
    con.execute("INSERT INTO lake.t VALUES (1, 'a'), (2, 'b')")
    con.execute("UPDATE lake.t SET v = 'c' WHERE id = 2")
    assert con.execute("SELECT * FROM lake.t ORDER BY id").fetchall() == [(1, "a"), (2, "c")]
    con.close()
    # A new process-level database finds the installed extension by name alone.
    again = fresh(tmp_path, allow_unsigned_extensions="true")
    again.execute("LOAD skade")
    again.execute(f"ATTACH '{tmp_path / 'lake.skade'}' AS lake (TYPE skade)")
    assert again.execute("SELECT count(*) FROM lake.t").fetchone() == (2,)


def test_an_unsigned_install_is_refused_without_the_setting(tmp_path):
    con = fresh(tmp_path)
    with pytest.raises(duckdb.Error, match="(?i)signature"):
        con.execute(f"INSTALL skade FROM '{REPOSITORY}'")
