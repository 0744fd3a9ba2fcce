"""A full disk under the catalog file (issue 17 item 5): redb latches the I/O failure and used to
refuse every later commit ("Previous I/O error occurred. Please close and re-open the database")
until DETACH. Now the failed commit changes nothing, its error says what ran out, and once space
is freed the next commit on the same connection works, with every acknowledged commit kept (also
the non-durable ones of DURABILITY 'eventual' and 'none', which the reopened file had lost).

The catalog lives on a 2 MiB tmpfs mounted in a private mount namespace (`unshare -r -m`: no
root needed where user namespaces are allowed); the warehouse folder stays on the normal disk,
so only the catalog runs out of space. Where mounting is refused, a file-size limit
(RLIMIT_FSIZE, EFBIG) stands in for the full disk.
"""
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import EXTENSION

CHILD = textwrap.dedent("""
    import json, os, resource, signal, sys, duckdb
    ext, catalog_dir, data_dir, durability, mode = sys.argv[1:6]
    filler = os.path.join(catalog_dir, "filler")
    if mode == "fsize":
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{ext}'")
    attach = (f"ATTACH '{catalog_dir}/lake.skade' AS lake "
              f"(TYPE skade, DATA_PATH '{data_dir}', DURABILITY '{durability}')")
    con.execute(attach)
    con.execute("CREATE TABLE lake.t (x BIGINT, s VARCHAR)")
    con.execute("INSERT INTO lake.t VALUES (0, 'first')")
    size = os.path.getsize(f"{catalog_dir}/lake.skade")
    def free():
        st = os.statvfs(catalog_dir)
        return st.f_bavail * st.f_frsize

    if mode == "tmpfs":
        # all but 16 KiB of what is left (the background flush may take some meanwhile: a full
        # write is cut back to leave the 16 KiB)
        with open(filler, "wb") as f:
            try:
                f.write(b"\\0" * max(0, free() - (16 << 10)))
            except OSError:
                pass
        if free() < (16 << 10):
            os.truncate(filler, max(0, os.path.getsize(filler) - ((16 << 10) - free())))
    else:
        limit = size + (16 << 10)
        hard = resource.getrlimit(resource.RLIMIT_FSIZE)[1]
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    acked, errors = [0], []
    for i in range(1, 5000):
        try:
            con.execute(f"INSERT INTO lake.t VALUES ({i}, '{'x' * 200}')")
            acked.append(i)
            if i % 20 == 0:
                con.execute("CHECKPOINT lake")  # where 'none' first writes the catalog file
        except Exception as e:
            errors.append(str(e))
            if len(errors) >= 3:
                break
    # space is freed
    if mode == "tmpfs":
        os.remove(filler)
    else:
        resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    after = []
    for i in range(10000, 10005):
        con.execute(f"INSERT INTO lake.t VALUES ({i}, 'after')")
        after.append(i)
    seen_live = sorted(r[0] for r in con.execute("SELECT x FROM lake.t").fetchall())
    # a DETACH on a full disk keeps the commits it cannot make durable in the process
    detach_error, late = None, []
    if mode == "tmpfs" and durability != "immediate":
        with open(filler, "wb") as f:
            try:
                f.write(b"\\0" * free())
            except OSError:
                pass  # (full already: what this step wants)
        con.execute("INSERT INTO lake.t VALUES (20000, 'before a failed detach')")
        late.append(20000)
        try:
            con.execute("DETACH lake")
        except Exception as e:
            detach_error = str(e)
        os.remove(filler)
        con.execute(attach)
        con.execute("CHECKPOINT lake")
    con.execute("DETACH lake")
    con.execute(attach)
    seen = sorted(r[0] for r in con.execute("SELECT x FROM lake.t").fetchall())
    seqs = [r[0] for r in con.execute("SELECT commit_seq FROM skade_commits_since('lake', 0)").fetchall()]
    print(json.dumps({"detach_error": detach_error, "late": late, "acked": acked, "after": after, "errors": errors, "seen": seen, "seen_live": seen_live,
                      "gapless": seqs == list(range(1, len(seqs) + 1))}))
""")


def run_child(tmp_path, durability, mode):
    catalog_dir, data_dir = tmp_path / "catalog", tmp_path / "data"
    catalog_dir.mkdir()
    args = [sys.executable, "-c", CHILD, EXTENSION, str(catalog_dir), str(data_dir), durability, mode]
    if mode == "tmpfs":
        script = f'mount -t tmpfs -o size=2m tmpfs "{catalog_dir}" && exec "$@"'
        args = ["unshare", "-r", "-m", "sh", "-c", script, "sh", *args]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300)
    if mode == "tmpfs" and proc.returncode != 0 and "mount" in proc.stderr and "Traceback" not in proc.stderr:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def mounting_works():
    if not shutil.which("unshare"):
        return False
    probe = subprocess.run(["unshare", "-r", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                           capture_output=True)
    return probe.returncode == 0


@pytest.mark.parametrize("durability", ["immediate", "eventual", "none"])
@pytest.mark.parametrize("mode", ["tmpfs", "fsize"])
def test_commits_work_again_once_space_is_freed(tmp_path, durability, mode):
    if mode == "tmpfs" and not mounting_works():
        pytest.skip("this machine refuses a tmpfs in a user namespace; the fsize case covers the recovery")
    r = run_child(tmp_path, durability, mode)
    assert r["errors"], "the catalog never ran out of space: the test proves nothing"
    if mode == "tmpfs":
        assert len(r["acked"]) > 1, r["errors"]  # (a file-size limit may stop the very next commit)
    first = r["errors"][0]
    assert "skade catalog" in first, first
    assert "Previous I/O error" not in first, first
    if mode == "tmpfs":
        assert "no space left" in first, first
    for e in r["errors"]:
        assert "Previous I/O error" not in e and "internal error" not in e, e
    expected = sorted(r["acked"] + r["after"])
    assert r["seen_live"] == expected, "the connection's view lost or gained a row"
    assert r["seen"] == sorted(expected + r["late"]), "after DETACH, an acknowledged commit was lost or a failed one appeared"
    assert r["gapless"]
    if mode == "tmpfs" and durability != "immediate":
        assert r["detach_error"] and "kept in this process" in r["detach_error"], r["detach_error"]
