"""Closing a DuckDB database (no DETACH) on a full disk keeps every acknowledged commit (it lost
every acknowledged commit of DURABILITY 'none' / 'eventual', with only a line on stderr).

DETACH keeps a catalog whose flush fails in the process (`KEPT`). Closing the connection does not
call `OnDetach`: the last handle drops, `Inner::drop` flushes, the flush fails (ENOSPC), and the
open catalog with its pending commits is dropped (open.rs `impl Drop for Inner`: eprintln only).
Once space is freed, ATTACH in the same process shows none of them, and nothing raised.
"""
import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import EXTENSION

CHILD = textwrap.dedent(r"""
    import json, os, sys, duckdb
    ext, cdir, ddir, dur = sys.argv[1:5]
    filler = os.path.join(cdir, "filler")
    def connect():
        con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
        con.execute(f"LOAD '{ext}'")
        con.execute(f"ATTACH '{cdir}/lake.skade' AS lake (TYPE skade, DATA_PATH '{ddir}', DURABILITY '{dur}')")
        return con
    con = connect()
    con.execute("CREATE TABLE lake.t (x BIGINT, s VARCHAR)")
    con.execute("CHECKPOINT lake")
    st = os.statvfs(cdir)
    with open(filler, "wb") as f:
        f.write(b"\0" * (st.f_bavail * st.f_frsize))
    acked = []
    for i in range(1, 100):
        try:
            con.execute(f"INSERT INTO lake.t VALUES ({i}, 'x')")
            acked.append(i)
        except Exception:
            break
    close_error = None
    try:
        con.close()
    except Exception as e:
        close_error = str(e)
    os.remove(filler)
    seen = sorted(r[0] for r in connect().execute("SELECT x FROM lake.t").fetchall())
    print(json.dumps({"acked": acked, "seen": seen, "close_error": close_error}))
""")


@pytest.mark.parametrize("durability", ["none", "eventual"])
def test_close_on_a_full_disk_keeps_acknowledged_commits(tmp_path, durability):
    if not shutil.which("unshare") or subprocess.run(
            ["unshare", "-r", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"]).returncode != 0:
        pytest.skip("this machine refuses a tmpfs in a user namespace")
    cdir = tmp_path / "cat"
    cdir.mkdir()
    script = f'mount -t tmpfs -o size=2m tmpfs "{cdir}" && exec "$@"'
    proc = subprocess.run(["unshare", "-r", "-m", "sh", "-c", script, "sh", sys.executable, "-c", CHILD,
                           EXTENSION, str(cdir), str(tmp_path / "data"), durability],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["acked"], "no commit was acknowledged on the full disk"
    lost = sorted(set(r["acked"]) - set(r["seen"]))
    assert not lost, (f"{len(lost)} of {len(r['acked'])} acknowledged commits lost by closing the connection "
                      f"(close raised: {r['close_error']!r}; stderr: {proc.stderr.strip()[-300:]})")
