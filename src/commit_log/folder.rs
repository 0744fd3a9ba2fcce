//! The in-tree commit log: a folder of batch files, one per position, each created with
//! create-if-absent semantics (`object_store`'s `PutMode::Create`: a hard link on a local file
//! system, `If-None-Match` on S3), so of two committers racing for a position exactly one wins
//! it and the other learns so at once. A batch file is an envelope (magic, format, position,
//! length, xxh3 checksum) around the catalog's bytes: a torn or misplaced file is an error
//! naming it, never a batch. A file is made durable (fsynced with its folder) before its win is
//! reported. Positions are gapless: a committer offers only head + 1 of a head it was served.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, PutMode, PutOptions, PutPayload};

use super::{Batch, CommitLogProvider, Committer, LogReader, Offered};
use crate::error::{Error, Result};
use crate::runtime::block_on;

const MAGIC: &[u8; 4] = b"SKLG";
const FORMAT: u8 = 1;
/// magic, format, position, length, checksum
const HEADER: usize = 4 + 1 + 8 + 8 + 8;
/// How often a wait for a position looks again.
const POLL: Duration = Duration::from_millis(2);

/// The provider of folder logs; a location is the folder's path.
#[derive(Debug, Default)]
pub struct FolderLogProvider;

impl CommitLogProvider for FolderLogProvider {
    fn name(&self) -> &str {
        "skade folder log"
    }

    fn committer(&self, location: &str) -> Result<Box<dyn Committer>> {
        Ok(Box::new(FolderLog::open(location)?))
    }

    fn reader(&self, location: &str) -> Result<Arc<dyn LogReader>> {
        Ok(Arc::new(FolderLog::open(location)?))
    }
}

/// One folder log, opened.
pub struct FolderLog {
    folder: PathBuf,
    store: Arc<dyn ObjectStore>,
}

impl FolderLog {
    /// Opens the log in `location`, creating the folder when missing.
    pub fn open(location: &str) -> Result<FolderLog> {
        let folder = crate::io::absolute(Path::new(location))?;
        crate::io::create_dirs(&folder)?;
        let store = LocalFileSystem::new_with_prefix(&folder)
            .map_err(|e| Error::io(format!("cannot open the commit log {}: {e}", folder.display())))?;
        Ok(FolderLog { folder, store: Arc::new(store) })
    }

    fn name(seq: u64) -> String {
        format!("{seq:020}.batch")
    }

    fn file(&self, seq: u64) -> PathBuf {
        self.folder.join(Self::name(seq))
    }

    /// Creates the file of `seq` unless it exists: whether this call created it (then durably).
    fn create(&self, seq: u64, bytes: &[u8]) -> Result<bool> {
        let options = PutOptions { mode: PutMode::Create, ..Default::default() };
        let payload = PutPayload::from(envelope(seq, bytes));
        match block_on(self.store.put_opts(&ObjectPath::from(Self::name(seq)), payload, options)) {
            Ok(_) => {
                let file = self.file(seq);
                crate::io::sync_files([file.to_string_lossy().as_ref()])?;
                Ok(true)
            }
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(Error::io(format!("cannot write {}: {e}", self.file(seq).display()))),
        }
    }

    /// The batch at `seq`, if its file exists.
    fn get(&self, seq: u64) -> Result<Option<Vec<u8>>> {
        let read = block_on(async {
            match self.store.get(&ObjectPath::from(Self::name(seq))).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        });
        match read {
            Ok(Some(bytes)) => open_envelope(&bytes, seq).map(Some).map_err(|problem| {
                Error::corrupt(format!("commit log file {} is damaged: {problem}", self.file(seq).display()))
            }),
            Ok(None) => Ok(None),
            Err(e) => Err(Error::io(format!("cannot read {}: {e}", self.file(seq).display()))),
        }
    }
}

impl Committer for FolderLog {
    fn offer(&self, seq: u64, batch: &[u8]) -> Result<Offered> {
        if seq == 0 {
            return Err(Error::internal("position 0 of a commit log is its adoption stamp"));
        }
        if self.create(seq, batch)? {
            return Ok(Offered::Won(seq));
        }
        Ok(Offered::Lost(self.tail(seq, usize::MAX)?))
    }

    fn adoption(&self) -> Result<Option<Vec<u8>>> {
        self.get(0)
    }

    fn adopt(&self, stamp: &[u8]) -> Result<Vec<u8>> {
        if self.create(0, stamp)? {
            return Ok(stamp.to_vec());
        }
        self.get(0)?.ok_or_else(|| Error::internal("the commit log's adoption stamp vanished"))
    }

    fn wait_served(&self, seq: u64, timeout: Duration) -> Result<bool> {
        let end = Instant::now() + timeout;
        loop {
            if block_on(self.store.head(&ObjectPath::from(Self::name(seq)))).is_ok() {
                return Ok(true);
            }
            if Instant::now() >= end {
                return Ok(false);
            }
            std::thread::sleep(POLL);
        }
    }
}

impl LogReader for FolderLog {
    fn tail(&self, from: u64, max: usize) -> Result<Vec<Batch>> {
        let mut batches = vec![];
        let mut seq = from.max(1);
        while batches.len() < max {
            match self.get(seq)? {
                Some(bytes) => batches.push(Batch { seq, bytes }),
                None => break,
            }
            seq += 1;
        }
        Ok(batches)
    }

    fn truncate_below(&self, seq: u64) -> Result<u64> {
        let mut removed = 0;
        // from just below `seq` down to the first missing one (what an earlier truncation left)
        for s in (1..seq).rev() {
            match block_on(self.store.delete(&ObjectPath::from(Self::name(s)))) {
                Ok(()) => removed += 1,
                Err(object_store::Error::NotFound { .. }) => break,
                Err(e) => return Err(Error::io(format!("cannot remove {}: {e}", self.file(s).display()))),
            }
        }
        Ok(removed)
    }
}

fn envelope(seq: u64, bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + bytes.len());
    out.extend_from_slice(MAGIC);
    out.push(FORMAT);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&(bytes.len() as u64).to_le_bytes());
    out.extend_from_slice(&twox_hash::XxHash3_64::oneshot(bytes).to_le_bytes());
    out.extend_from_slice(bytes);
    out
}

/// The bytes of a batch file at `seq`, or what is wrong with it.
fn open_envelope(file: &[u8], seq: u64) -> std::result::Result<Vec<u8>, String> {
    if file.len() < HEADER || &file[..4] != MAGIC {
        return Err(format!("not a batch file ({} bytes)", file.len()));
    }
    if file[4] != FORMAT {
        return Err(format!("batch format {} is newer than this skade reads ({FORMAT})", file[4]));
    }
    let word = |at: usize| u64::from_le_bytes(file[at..at + 8].try_into().unwrap_or_default());
    if word(5) != seq {
        return Err(format!("it holds position {} instead", word(5)));
    }
    let body = &file[HEADER..];
    if word(13) != body.len() as u64 {
        return Err(format!("{} bytes of {} (torn)", body.len(), word(13)));
    }
    if word(21) != twox_hash::XxHash3_64::oneshot(body) {
        return Err("its checksum does not match".into());
    }
    Ok(body.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A scratch folder, removed when dropped.
    struct Scratch(PathBuf);

    impl Scratch {
        fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn log() -> (Scratch, FolderLog) {
        let dir = Scratch(std::env::temp_dir().join(format!("skade-folder-log-{}", uuid::Uuid::new_v4())));
        let log = FolderLog::open(dir.path().join("log").to_str().unwrap()).unwrap();
        (dir, log)
    }

    #[test]
    fn a_position_is_won_once_and_the_loser_gets_every_batch_since() {
        let (_dir, log) = log();
        assert_eq!(log.adoption().unwrap(), None);
        assert_eq!(log.adopt(b"stamp a").unwrap(), b"stamp a");
        assert_eq!(log.adopt(b"stamp b").unwrap(), b"stamp a", "the first stamp holds");
        assert_eq!(log.offer(1, b"one").unwrap(), Offered::Won(1));
        assert_eq!(log.offer(2, b"two").unwrap(), Offered::Won(2));
        // a committer prepared on head 0 races position 1 and loses to both
        let lost = log.offer(1, b"late").unwrap();
        let Offered::Lost(batches) = lost else { panic!("won a taken position") };
        assert_eq!(
            batches.iter().map(|b| (b.seq, b.bytes.as_slice())).collect::<Vec<_>>(),
            [(1, &b"one"[..]), (2, &b"two"[..])]
        );
        assert_eq!(log.offer(3, b"late").unwrap(), Offered::Won(3));
        assert_eq!(log.tail(2, 10).unwrap().len(), 2);
        assert!(log.wait_served(3, Duration::ZERO).unwrap());
        assert!(!log.wait_served(4, Duration::from_millis(5)).unwrap());
    }

    #[test]
    fn racing_threads_each_win_distinct_positions_without_gaps() {
        let (_dir, log) = log();
        let log = Arc::new(log);
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let log = log.clone();
                std::thread::spawn(move || {
                    let mut head = 0;
                    let mut won = vec![];
                    while won.len() < 25 {
                        match log.offer(head + 1, format!("{t}").as_bytes()).unwrap() {
                            Offered::Won(seq) => {
                                won.push(seq);
                                head = seq;
                            }
                            Offered::Lost(batches) => head = batches.last().unwrap().seq,
                        }
                    }
                    won
                })
            })
            .collect();
        let mut all: Vec<u64> = threads.into_iter().flat_map(|t| t.join().unwrap()).collect();
        all.sort_unstable();
        assert_eq!(all, (1..=100).collect::<Vec<_>>());
        assert_eq!(log.tail(1, usize::MAX).unwrap().len(), 100);
    }

    #[test]
    fn a_damaged_file_is_an_error_naming_it_and_truncation_keeps_the_stamp() {
        let (dir, log) = log();
        log.adopt(b"stamp").unwrap();
        for s in 1..=5 {
            log.offer(s, b"batch").unwrap();
        }
        assert_eq!(log.truncate_below(4).unwrap(), 3);
        assert_eq!(log.truncate_below(4).unwrap(), 0);
        assert_eq!(log.adoption().unwrap().unwrap(), b"stamp");
        assert_eq!(log.tail(4, 9).unwrap().len(), 2);
        let file = dir.path().join("log").join(FolderLog::name(5));
        let mut bytes = std::fs::read(&file).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        std::fs::write(&file, &bytes).unwrap();
        let e = log.tail(4, 9).unwrap_err();
        assert!(e.message.contains("00000000000000000005.batch") && e.message.contains("checksum"), "{}", e.message);
        std::fs::write(&file, &bytes[..n - 2]).unwrap();
        assert!(log.tail(5, 1).unwrap_err().message.contains("torn"));
    }
}
