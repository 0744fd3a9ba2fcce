//! All file access of data and metadata: reading (`input`, `ranges`), writing files that never
//! replace another, listing, removing and making durable: local files here, `s3://` objects in
//! `object`, behind the same calls.
//!
//! Local-file primitives. Everything the catalog points at must be on disk before the pointer
//! moves: files are created exclusively (never overwritten), and a commit makes them durable
//! (with their directory entries) before its catalog transaction.

use std::collections::BTreeSet;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

pub mod deferred;
pub mod input;
pub mod object;
pub mod range_cache;
pub mod ranges;
pub mod storage;

/// Writes `bytes` to a new file at `location`, failing if it exists (never replacing a file).
pub fn write_new(location: &str, bytes: &[u8]) -> Result<()> {
    if object::is_object(location) {
        return object::wait(object::create(location, bytes::Bytes::copy_from_slice(bytes)));
    }
    let path = Path::new(local_path(location));
    let mut f = create_new(path).map_err(|e| io_err("create", path, e))?;
    f.write_all(bytes).map_err(|e| io_err("write", path, e))
}

/// Moves the file `from` to `to` (one file system).
pub fn rename(from: &Path, to: &Path) -> Result<()> {
    std::fs::rename(from, to).map_err(|e| {
        Error::io(format!("cannot move {} to {}: {}", from.display(), to.display(), crate::error::io_message(&e)))
    })
}

/// Publishes `bytes` at `path` unless a file is there already: whether this call published it.
/// The bytes go to a staging file beside it, fsynced, then hard-linked to `path` (the link fails
/// when the name exists), and the folder is fsynced: a name that another process can see always
/// has its whole, durable content (object_store's local put links unsynced data, which a power
/// loss can leave as an empty file under the name). An error after the link says the file landed.
pub fn publish_new(path: &Path, bytes: &[u8]) -> Result<bool> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let staging = dir.join(format!(".{}.{}.staging", uuid::Uuid::new_v4(), std::process::id()));
    let written = create_new(&staging).and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&staging);
        return Err(io_err("write", &staging, e));
    }
    let linked = std::fs::hard_link(&staging, path);
    let _ = std::fs::remove_file(&staging);
    match linked {
        Ok(()) => sync_dir(dir).map(|()| true).map_err(|e| {
            Error::io(format!("{} landed but its folder could not be made durable: {}", path.display(), e.message))
        }),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_err("publish", path, e)),
    }
}

/// Publishes the finished file `staging` at `path` unless a file is there already, as
/// [`publish_new`] does with bytes: hard-linked, then the folder fsynced; `staging` is removed
/// either way. Whether this call published it.
pub fn publish_file(staging: &Path, path: &Path) -> Result<bool> {
    let linked = std::fs::hard_link(staging, path);
    let _ = std::fs::remove_file(staging);
    match linked {
        Ok(()) => sync_dir(path.parent().unwrap_or(Path::new("."))).map(|()| true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io_err("publish", path, e)),
    }
}

/// A staging name beside `path`, unique to this call.
pub fn staging_beside(path: &Path) -> std::path::PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    path.with_file_name(format!(".{name}.{}.{}.staging", uuid::Uuid::new_v4(), std::process::id()))
}

/// Removes the staging files in `dir` whose names start with `prefix` and whose process is gone
/// (a process killed between writing one and publishing it leaves it behind). Best effort.
pub fn remove_stale_staging(dir: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_suffix(".staging")) else { continue };
        let Some(pid) = rest.rsplit('.').next().and_then(|p| p.parse::<libc::pid_t>().ok()) else { continue };
        if process_gone(pid) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// Removes a file if it is there.
pub fn remove_file(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// Whether the process `pid` of this machine is gone (one that exists, even another user's, is
/// not; a zombie, dead but not yet reaped by its parent, is: a writer killed under a harness or a
/// shell that has not waited for it yet holds nothing any more).
pub fn process_gone(pid: libc::pid_t) -> bool {
    // SAFETY: kill with signal 0 only asks whether the process exists.
    if (unsafe { libc::kill(pid, 0) }) != 0 {
        return std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH);
    }
    // (Linux: dead when every thread is; the leader's state alone says Z once its main thread
    // exits, while other threads may run on. A thread's state follows its name, which is in
    // parentheses and may hold any byte.)
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return false };
    let mut any = false;
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read(task.path().join("stat")) else { continue };
        let state = stat.iter().rposition(|&b| b == b')').and_then(|end| stat.get(end + 2));
        if !matches!(state, Some(b'Z' | b'X')) {
            return false;
        }
        any = true;
    }
    any
}

/// An exclusive lock on one byte of a shared file, across processes (an open file description
/// lock: independent of threads, released when dropped or when the process dies).
pub struct ByteLock {
    file: File,
    path: PathBuf,
}

impl ByteLock {
    /// `len` bytes of the locked file at `offset` (zeros past its end), as its other holders
    /// wrote them.
    pub fn read_at(&self, offset: u64, len: usize) -> Result<Vec<u8>> {
        read_file_at(&self.file, offset, len).map_err(|e| io_err("read", &self.path, e))
    }

    /// Writes `bytes` into the locked file at `offset`, unsynced: what the file holds there is
    /// for the processes of this machine while it runs.
    pub fn write_at(&self, offset: u64, bytes: &[u8]) -> Result<()> {
        use std::os::unix::fs::FileExt;
        self.file.write_all_at(bytes, offset).map_err(|e| io_err("write", &self.path, e))
    }
}

/// `len` bytes of `path` at `offset` read without its lock (zeros past its end or when it is
/// missing): a reader that may see a write half done must tell (a checksum).
pub fn read_unlocked_at(path: &Path, offset: u64, len: usize) -> Result<Vec<u8>> {
    match File::open(path) {
        Ok(file) => read_file_at(&file, offset, len).map_err(|e| io_err("read", path, e)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(vec![0; len]),
        Err(e) => Err(io_err("open", path, e)),
    }
}

fn read_file_at(file: &File, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0; len];
    let mut done = 0;
    while done < len {
        match file.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(buf)
}

/// Takes the lock on byte `offset` of `path` (made when missing), waiting for it at most `wait`:
/// None when another holder kept it that long (a stopped or hung process must not stop others).
pub fn lock_byte(path: &Path, offset: u64, wait: std::time::Duration) -> Result<Option<ByteLock>> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .map_err(|e| io_err("open", path, e))?;
    let mut lock: libc::flock = unsafe { std::mem::zeroed() };
    lock.l_type = libc::F_WRLCK as _;
    lock.l_whence = libc::SEEK_SET as _;
    lock.l_start = offset as libc::off_t;
    lock.l_len = 1;
    let end = std::time::Instant::now() + wait;
    let mut pause = std::time::Duration::from_micros(100);
    loop {
        use std::os::fd::AsRawFd;
        // SAFETY: `lock` is a valid flock for the call; the descriptor is open.
        if unsafe { libc::fcntl(file.as_raw_fd(), libc::F_OFD_SETLK, &lock) } == 0 {
            return Ok(Some(ByteLock { file, path: path.to_path_buf() }));
        }
        let e = std::io::Error::last_os_error();
        let held = matches!(e.raw_os_error(), Some(libc::EAGAIN) | Some(libc::EACCES));
        if !held && e.kind() != std::io::ErrorKind::Interrupted {
            return Err(io_err("lock", path, e));
        }
        if std::time::Instant::now() >= end {
            return Ok(None);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(std::time::Duration::from_millis(5));
    }
}

/// The machine's host name, for messages that name a process (`pid@host`).
pub fn host_name() -> String {
    let mut host = [0 as libc::c_char; 256];
    // SAFETY: gethostname writes at most `len` bytes into `host`, which outlives the call and
    // ends with a NUL it never overwrites.
    let ok = unsafe { libc::gethostname(host.as_mut_ptr(), host.len() - 1) } == 0;
    if !ok {
        return "?".to_string();
    }
    unsafe { std::ffi::CStr::from_ptr(host.as_ptr()) }.to_string_lossy().into_owned()
}

/// Creates a file that must not exist yet, creating its directory only when it is missing (the
/// common case, an existing directory, costs one system call).
pub fn create_new(path: &Path) -> std::io::Result<File> {
    let open = || OpenOptions::new().write(true).create_new(true).open(path);
    match open() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if let Some(dir) = path.parent() {
                create_dirs_durably(dir)?;
            }
            open()
        }
        other => other,
    }
}

/// Creates `dir` and its missing parents, durably (see [`create_dirs_durably`]).
pub fn create_dirs(dir: &Path) -> Result<()> {
    create_dirs_durably(dir).map_err(|e| io_err("create directory", dir, e))
}

/// `create_dir_all`, then fsyncs the parent of every directory it created, so that a new
/// table's folders survive a power loss with the files in them. Rare: once per table.
fn create_dirs_durably(dir: &Path) -> std::io::Result<()> {
    let mut missing = vec![];
    let mut d = Some(dir);
    while let Some(p) = d.filter(|p| !p.as_os_str().is_empty() && !p.exists()) {
        missing.push(p);
        d = p.parent();
    }
    std::fs::create_dir_all(dir)?;
    for p in missing.iter().rev() {
        if let Some(parent) = p.parent() {
            File::open(parent)?.sync_all()?;
        }
    }
    Ok(())
}

pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir).and_then(|d| d.sync_all()).map_err(|e| io_err("fsync directory", dir, e))
}

/// Makes files durable: fsyncs each file and, once, each directory that holds one (so that new
/// directory entries survive too).
pub fn sync_files<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<()> {
    sync_files_but(paths, |_| false)
}

/// [`sync_files`], leaving out the directories `later` says are synced later (a commit syncs its
/// data files and manifests first, and the metadata folder once, with its own metadata files).
pub fn sync_files_but<'a>(paths: impl IntoIterator<Item = &'a str>, later: impl Fn(&Path) -> bool) -> Result<()> {
    let mut dirs = BTreeSet::new();
    // A completed PUT is durable: objects need nothing more.
    let local: Vec<&str> = paths.into_iter().filter(|p| !object::is_object(p)).collect();
    if local.len() > MANY_FILES {
        // (a commit of many files, such as a DELETE's deletion vectors across hundreds of data
        // files: one syncfs writes them all back at once, where an fsync each waits for each)
        return sync_filesystems(local);
    }
    for p in local {
        let path = Path::new(local_path(p));
        File::open(path).and_then(|f| f.sync_all()).map_err(|e| io_err("fsync", path, e))?;
        if let Some(d) = path.parent() {
            dirs.insert(d.to_path_buf());
        }
    }
    for d in dirs.into_iter().filter(|d| !later(d)) {
        sync_dir(&d)?;
    }
    Ok(())
}

/// Beyond this many files, [`sync_files`] syncs their file systems instead of each file.
const MANY_FILES: usize = 32;

/// Makes the files durable with one `syncfs` per file system they live on: after a batch of
/// commits (the flush of DURABILITY 'eventual'/'none') this is far cheaper than an fsync per file
/// and per directory. It also writes back other dirty data of those file systems.
pub fn sync_filesystems<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<()> {
    use std::os::unix::fs::MetadataExt;
    use std::os::unix::io::AsRawFd;
    let mut dirs = BTreeSet::new();
    for p in paths.into_iter().filter(|p| !object::is_object(p)) {
        if let Some(d) = Path::new(local_path(p)).parent() {
            dirs.insert(d.to_path_buf());
        }
    }
    let mut devices = BTreeSet::new();
    for d in dirs {
        let dir = File::open(&d).map_err(|e| io_err("open", &d, e))?;
        let dev = dir.metadata().map_err(|e| io_err("stat", &d, e))?.dev();
        if devices.insert(dev) {
            // SAFETY: a valid open descriptor; syncfs only reads it.
            if unsafe { libc::syncfs(dir.as_raw_fd()) } != 0 {
                return Err(io_err("syncfs", &d, std::io::Error::last_os_error()));
            }
        }
    }
    Ok(())
}

/// Best-effort removal of files a failed or rolled-back transaction wrote and nothing references.
pub fn remove_files<'a>(paths: impl IntoIterator<Item = &'a str>) {
    let mut objects = vec![];
    for p in paths {
        if object::is_object(p) {
            objects.push(p.to_string());
        } else {
            let _ = std::fs::remove_file(local_path(p));
        }
    }
    if !objects.is_empty() {
        let _ = object::wait(object::delete(&objects));
    }
}

/// Removes the files (objects in bulk), reporting the first failure; a file already gone is
/// no failure.
pub fn remove_files_checked<'a>(paths: impl IntoIterator<Item = &'a str>) -> Result<()> {
    let mut objects = vec![];
    for p in paths {
        if object::is_object(p) {
            objects.push(p.to_string());
            continue;
        }
        match std::fs::remove_file(local_path(p)) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err("remove", Path::new(p), e)),
            _ => {}
        }
    }
    object::wait(object::delete(&objects))
}

/// Iceberg locations written by skade are plain absolute paths; accept `file:` URIs from others.
pub fn local_path(location: &str) -> &str {
    location.strip_prefix("file://").or_else(|| location.strip_prefix("file:")).unwrap_or(location)
}

/// The real path of an existing file (`..` and symbolic links resolved): how a file adopted where it
/// lies is named, so that no spelling of its path can place it inside a table's own folder.
pub fn canonical(location: &str) -> Result<String> {
    if object::is_object(location) {
        // Keys have no links or `..`: the location is its own name once it is known to exist.
        return match object::wait(object::head(location))? {
            Some(_) => Ok(location.to_string()),
            None => Err(Error::io(format!("cannot find {location}: it does not exist"))),
        };
    }
    let path = Path::new(local_path(location));
    let real = std::fs::canonicalize(path).map_err(|e| io_err("find", path, e))?;
    real.into_os_string().into_string().map_err(|_| Error::invalid(format!("{location} is not a UTF-8 path")))
}

pub fn absolute(path: &Path) -> Result<PathBuf> {
    std::path::absolute(path).map_err(|e| io_err("resolve", path, e))
}

fn io_err(what: &str, path: &Path, e: std::io::Error) -> Error {
    Error::io(format!("cannot {what} {}: {}", path.display(), crate::error::io_message(&e)))
}

#[cfg(test)]
mod tests {
    use super::process_gone;

    #[test]
    fn a_process_is_gone_once_dead_even_before_it_is_reaped() {
        assert!(!process_gone(std::process::id() as libc::pid_t));
        let mut child = std::process::Command::new("sleep").arg("0.05").spawn().expect("sleep runs");
        let pid = child.id() as libc::pid_t;
        assert!(!process_gone(pid), "a live child");
        // (not waited for: it becomes a zombie, which still answers kill(pid, 0))
        let start = std::time::Instant::now();
        while !process_gone(pid) {
            assert!(start.elapsed() < std::time::Duration::from_secs(10), "a zombie counted as alive");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        assert_eq!(unsafe { libc::kill(pid, 0) }, 0, "still a zombie: only the state shows it is dead");
        child.wait().expect("reaped");
        assert!(process_gone(pid));
    }
}
