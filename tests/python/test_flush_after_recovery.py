"""A flush whose unlocked early file sync races with `recover_store` still syncs every file.

`Inner::flush` syncs the files of `pending.files` without the commit lock, then, under it, syncs
only `pending.files[early_files.len()..]`, assuming the queue only grew meanwhile. But a commit
that runs `recover_store` (the store latched an I/O failure) takes the whole queue and restores
it; commits that land afterwards start a new, shorter queue, which the flush then skips entirely
and makes durable (`make_durable`) without ever syncing their files: a durable catalog pointer to
a metadata.json (and data files) that a power loss can lose.

Sequence (DURABILITY 'none', catalog on a 2 MiB tmpfs): 5 commits pending (20 files), the disk
fills, CHECKPOINT fails (store latched). A second CHECKPOINT runs on another thread; strace delays
the *return* of its early syncfs by 2 s (the syscall itself completes at once). Meanwhile space is
freed, INSERT #1 recovers and restores (its syncfs covers its own files), INSERT #2 writes 4 new
files. The CHECKPOINT then fsyncs the catalog without a syncfs after INSERT #2's files exist,
and skade_commits_since serves INSERT #2 as durable.
"""
import json
import shutil
import subprocess
import sys
import textwrap

import pytest

from conftest import EXTENSION

CHILD = textwrap.dedent(r"""
    import json, os, subprocess, sys, threading, time, duckdb
    ext, cdir, ddir, logs = sys.argv[1:5]
    filler = os.path.join(cdir, "filler")
    con = duckdb.connect(config={"allow_unsigned_extensions": "true"})
    con.execute(f"LOAD '{ext}'")
    con.execute(f"ATTACH '{cdir}/lake.skade' AS lake (TYPE skade, DATA_PATH '{ddir}', DURABILITY 'none')")
    con.execute("CREATE TABLE lake.t (x BIGINT, s VARCHAR)")
    con.execute("CHECKPOINT lake")
    st = os.statvfs(cdir)
    with open(filler, "wb") as f:
        f.write(b"\0" * (st.f_bavail * st.f_frsize))
    n, ckpt_error = 0, None
    for _ in range(200):
        for _ in range(5):
            n += 1
            con.execute(f"INSERT INTO lake.t VALUES ({n}, '{'x' * 300}')")
        try:
            con.execute("CHECKPOINT lake")
        except Exception as e:
            ckpt_error = str(e)
            break
    assert ckpt_error, "the catalog never ran out of space"
    ready, result = threading.Event(), {}
    def checkpoint_b():
        c = con.cursor()
        ready.wait()
        try:
            c.execute("CHECKPOINT lake"); result["b"] = "ok"
        except Exception as e:
            result["b"] = str(e)
    main_tid = threading.get_native_id()
    b = threading.Thread(target=checkpoint_b); b.start()
    time.sleep(0.2)
    others = [t for t in os.listdir(f"/proc/{os.getpid()}/task") if int(t) != main_tid]
    args = ["strace", "-tt", "-e", "trace=syncfs,fsync,fdatasync,openat",
            "-e", "inject=syncfs:delay_exit=2000000", "-o", f"{logs}/b.log"]
    for t in others:
        args += ["-p", t]
    tracer = subprocess.Popen(args, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    ready.set(); time.sleep(0.4)      # B has returned from nothing yet: inside its early syncfs
    os.remove(filler)                 # space is freed
    mt = subprocess.Popen(["strace", "-tt", "-p", str(main_tid), "-e", "trace=syncfs,fsync,fdatasync,openat",
                           "-o", f"{logs}/main.log"], stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    con.execute("INSERT INTO lake.t VALUES (-1, 'recovers and restores')")
    con.execute("INSERT INTO lake.t VALUES (-2, 'files written after every syncfs')")
    mt.terminate(); mt.wait()
    b.join()
    tracer.terminate(); tracer.wait()
    feed = [r[0] for r in con.execute("SELECT commit_seq FROM skade_commits_since('lake', 0)").fetchall()]
    print(json.dumps({"b": result.get("b"), "feed_last": feed[-1] if feed else None, "n": n}))
""")


def seconds(stamp):
    h, m, s = stamp.split(":")
    return int(h) * 3600 + int(m) * 60 + float(s)


def events(path, has_tid):
    out = []
    for line in open(path):
        parts = line.split(None, 2 if has_tid else 1)
        if len(parts) < (3 if has_tid else 2) or ":" not in parts[1 if has_tid else 0]:
            continue
        stamp, call = (parts[1], parts[2]) if has_tid else (parts[0], parts[1])
        out.append((seconds(stamp), call.strip()))
    return out


def test_flush_never_makes_unsynced_files_durable_after_a_restore(tmp_path):
    if not shutil.which("strace") or not shutil.which("unshare"):
        pytest.skip("needs strace and unshare")
    probe = subprocess.run(["unshare", "-r", "-m", "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"],
                           capture_output=True)
    if probe.returncode != 0:
        pytest.skip("this machine refuses a tmpfs in a user namespace")
    cdir, ddir = tmp_path / "cat", tmp_path / "data"
    cdir.mkdir()
    script = f'mount -t tmpfs -o size=2m tmpfs "{cdir}" && exec "$@"'
    proc = subprocess.run(["unshare", "-r", "-m", "sh", "-c", script, "sh", sys.executable, "-c", CHILD,
                           EXTENSION, str(cdir), str(ddir), str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["b"] == "ok", r
    main = events(tmp_path / "main.log", False)
    other = events(tmp_path / "b.log", True)
    created = [t for t, c in main + other if "metadata.json" in c and "O_CREAT" in c]
    assert created, "no metadata.json written after the tracers attached"
    last_file = max(created)  # INSERT #2's metadata.json
    catalog_fds = {c.rsplit("=", 1)[1].strip() for _, c in main + other if "lake.skade" in c and "openat" in c}
    durable = [t for t, c in other if t > last_file and c.startswith(("fdatasync(", "fsync("))
               and c.split("(", 1)[1].split(")", 1)[0] in catalog_fds]
    assert durable, "the CHECKPOINT made nothing durable after INSERT #2 (race not reached)"
    made_durable = min(durable)
    syncs = [t for t, c in main + other if c.startswith("syncfs(") and last_file < t < made_durable]
    assert r["feed_last"] == r["n"] + 3, r  # create + n inserts + the 2 last: all served as durable
    assert syncs, (
        f"the catalog was made durable at {made_durable:.6f} with INSERT #2's pointer, but no syncfs ran "
        f"after its files were written ({last_file:.6f}): flush skipped pending.files after a restore "
        f"reset the queue")
