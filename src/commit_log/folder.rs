//! The in-tree commit log: a folder of batch files, one per position, each published with
//! create-if-absent semantics (`io::publish_new`: a fully written, fsynced staging file
//! hard-linked to the position's name, which fails when the name exists), so of two committers
//! racing for a position exactly one wins it and the other learns so at once, and a visible name
//! always has its whole content. Reads, listing and removal go through `object_store` (the same
//! calls `bucket.rs` makes on objects, where creation is a conditional PUT). A batch file is the
//! envelope of `envelope.rs` around the catalog's bytes: a damaged or misplaced file is an error
//! naming it, never a batch. Positions are gapless: an offer whose previous position is missing
//! is refused, and truncation leaves a mark (`truncated/<position>`) so that a committer or reader
//! behind it gets an error instead of winning, or reading as empty, a position that no longer
//! exists (`gapless.rs` holds those rules, shared with the bucket log).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::ObjectStore;

use super::envelope::{envelope, open_envelope};
use super::gapless::{self, position_name, position_of, Positions, Seen};
use super::{Batch, CommitLogProvider, Committer, LogReader, Offered};
use crate::error::{Error, Result};
use crate::runtime::block_on;

/// How often a wait for a position looks again.
const POLL: Duration = Duration::from_millis(2);
/// The folder of truncation marks: `<position>` files, the highest is where the log starts.
const TRUNCATED: &str = "truncated";

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

/// One folder log, opened. Everything but `adopt` needs the log adopted (its stamp at position
/// 0): a folder that is missing (an unmounted share, a mistyped location) is an error, never a
/// fresh empty log.
pub struct FolderLog {
    folder: PathBuf,
    store: Arc<dyn ObjectStore>,
    seen: Seen,
}

impl FolderLog {
    pub fn open(location: &str) -> Result<FolderLog> {
        let folder = crate::io::absolute(Path::new(location))?;
        Ok(FolderLog { folder, store: Arc::new(LocalFileSystem::new()), seen: Seen::default() })
    }

    fn file(&self, seq: u64) -> PathBuf {
        self.folder.join(position_name(seq))
    }

    fn object(&self, path: &Path) -> Result<ObjectPath> {
        ObjectPath::from_absolute_path(path).map_err(|e| Error::io(format!("commit log path {}: {e}", path.display())))
    }

    fn io_error(&self, what: &str, path: &Path, e: object_store::Error) -> Error {
        Error::io(format!("cannot {what} {}: {}", path.display(), crate::error::without_os_codes(&e.to_string())))
    }

    /// The raw bytes of a file of the folder, if it exists.
    fn read(&self, path: &Path) -> Result<Option<bytes::Bytes>> {
        let object = self.object(path)?;
        block_on(async {
            match self.store.get(&object).await {
                Ok(r) => r.bytes().await.map(Some),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        })
        .map_err(|e| self.io_error("read", path, e))
    }

    /// The batch at `seq`, if its file exists.
    fn get(&self, seq: u64) -> Result<Option<Vec<u8>>> {
        let file = self.file(seq);
        match self.read(&file)? {
            Some(bytes) => open_envelope(&bytes, seq)
                .map(Some)
                .map_err(|problem| Error::corrupt(format!("commit log file {} is damaged: {problem}", file.display()))),
            None => Ok(None),
        }
    }
}

impl Positions for FolderLog {
    fn location(&self) -> String {
        self.folder.display().to_string()
    }

    fn holder(&self) -> &'static str {
        "folder"
    }

    fn exists(&self, seq: u64) -> Result<bool> {
        match block_on(self.store.head(&self.object(&self.file(seq))?)) {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.io_error("look up", &self.file(seq), e)),
        }
    }

    fn highest_mark(&self) -> Result<Option<u64>> {
        let marks = self.folder.join(TRUNCATED);
        let prefix = self.object(&marks)?;
        let listed: Vec<object_store::ObjectMeta> = match block_on(self.store.list(Some(&prefix)).try_collect()) {
            Ok(l) => l,
            Err(object_store::Error::NotFound { .. }) => vec![],
            Err(e) => return Err(self.io_error("list", &marks, e)),
        };
        Ok(listed.iter().filter_map(|m| m.location.filename()?.parse::<u64>().ok()).max())
    }

    fn seen(&self) -> &Seen {
        &self.seen
    }
}

impl Committer for FolderLog {
    fn offer(&self, seq: u64, batch: &[u8]) -> Result<Offered> {
        gapless::check_offer(self, seq, false)?;
        // a position taken already (a committer behind the head) is lost without writing a batch
        if !self.exists(seq)? && crate::io::publish_new(&self.file(seq), &envelope(seq, batch))? {
            return Ok(Offered::Won(seq));
        }
        let since = self.tail(seq, usize::MAX)?;
        if since.is_empty() {
            return Err(Error::internal(format!("position {seq} of the commit log was taken, then vanished")));
        }
        Ok(Offered::Lost(since))
    }

    fn adoption(&self) -> Result<Option<Vec<u8>>> {
        self.get(0)
    }

    fn adopt(&self, stamp: &[u8]) -> Result<Vec<u8>> {
        crate::io::create_dirs(&self.folder)?;
        if crate::io::publish_new(&self.file(0), &envelope(0, stamp))? {
            self.seen.set_adopted();
            return Ok(stamp.to_vec());
        }
        self.get(0)?.ok_or_else(|| Error::internal("the commit log's adoption stamp vanished"))
    }

    fn wait_served(&self, seq: u64, timeout: Duration) -> Result<bool> {
        gapless::wait_for(self, seq, timeout, POLL)
    }
}

impl LogReader for FolderLog {
    fn tail(&self, from: u64, max: usize) -> Result<Vec<Batch>> {
        let mut seq = gapless::tail_start(self, from)?;
        let mut batches = vec![];
        while batches.len() < max {
            match self.get(seq)? {
                Some(bytes) => batches.push(Batch { seq, bytes }),
                None => break,
            }
            seq += 1;
        }
        if batches.is_empty() && max > 0 {
            gapless::check_nothing_at(self, from.max(1))?;
        }
        Ok(batches)
    }

    fn adoption(&self) -> Result<Option<Vec<u8>>> {
        self.get(0)
    }

    fn start(&self) -> Result<u64> {
        gapless::require_adopted(self)?;
        gapless::refresh_low(self)
    }

    fn truncate_below(&self, seq: u64) -> Result<u64> {
        gapless::check_truncatable(self, seq)?;
        // (what committers killed mid-offer left: their staging files)
        crate::io::remove_stale_staging(&self.folder, ".");
        // the mark first: from then on a stale committer or reader below it gets an error
        let marks = self.folder.join(TRUNCATED);
        crate::io::create_dirs(&marks)?;
        crate::io::publish_new(&marks.join(seq.to_string()), b"")?;
        gapless::refresh_low(self)?;
        // then every batch below it, whatever an interrupted truncation left
        let prefix = self.object(&self.folder)?;
        let listed: Vec<object_store::ObjectMeta> = block_on(self.store.list(Some(&prefix)).try_collect())
            .map_err(|e| self.io_error("list", &self.folder, e))?;
        let mut removed = 0;
        for meta in listed {
            let below = meta.location.filename().and_then(position_of);
            if below.is_some_and(|s| s >= 1 && s < seq) {
                match block_on(self.store.delete(&meta.location)) {
                    Ok(()) | Err(object_store::Error::NotFound { .. }) => removed += 1,
                    Err(e) => {
                        let e = crate::error::without_os_codes(&e.to_string());
                        return Err(Error::io(format!("cannot remove {}: {e}", meta.location)));
                    }
                }
            }
        }
        Ok(removed)
    }
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
        assert_eq!(Committer::adoption(&log).unwrap(), None);
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
    fn a_missing_or_unadopted_folder_is_an_error_not_a_fresh_log() {
        let (dir, log) = log();
        for e in [log.offer(1, b"x").unwrap_err(), log.tail(1, 9).unwrap_err()] {
            assert!(e.message.contains("is not an adopted commit log"), "{}", e.message);
        }
        assert!(!dir.path().join("log").exists(), "created a folder it was only asked to read");
        log.adopt(b"stamp").unwrap();
        assert_eq!(log.offer(1, b"x").unwrap(), Offered::Won(1));
        // a folder renamed away under an open log: an error naming it, not a gap or an empty tail
        std::fs::rename(dir.path().join("log"), dir.path().join("moved")).unwrap();
        for e in [log.offer(2, b"y").unwrap_err(), log.tail(2, 9).unwrap_err()] {
            assert!(e.message.contains("is missing (no adoption stamp)"), "{}", e.message);
        }
        std::fs::rename(dir.path().join("moved"), dir.path().join("log")).unwrap();
        assert_eq!(log.offer(2, b"y").unwrap(), Offered::Won(2));
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
        assert_eq!(LogReader::adoption(&log).unwrap().unwrap(), b"stamp");
        assert_eq!(log.tail(4, 9).unwrap().len(), 2);
        // behind the truncation: errors, never a win or an empty tail taken for the head
        let stale = FolderLog::open(dir.path().join("log").to_str().unwrap()).unwrap();
        assert!(stale.tail(1, 9).unwrap_err().message.contains("was truncated (the log starts at 4)"));
        assert!(stale.offer(3, b"stale").unwrap_err().message.contains("truncated"));
        assert!(log.truncate_below(9).unwrap_err().message.contains("holds no batch there"));
        // a gap is refused: position 7 with 6 unwritten
        assert!(log.offer(7, b"ahead").unwrap_err().message.contains("a gap"));
        // an interrupted truncation's leftovers go with the next one
        let left = dir.path().join("log").join(position_name(2));
        std::fs::write(&left, envelope(2, b"left")).unwrap();
        assert_eq!(log.truncate_below(5).unwrap(), 2);
        assert!(!left.exists());
        assert_eq!(log.tail(5, 9).unwrap().len(), 1);
        let file = dir.path().join("log").join(position_name(5));
        let mut bytes = std::fs::read(&file).unwrap();
        let n = bytes.len();
        bytes[n - 1] ^= 1;
        std::fs::write(&file, &bytes).unwrap();
        let e = log.tail(5, 9).unwrap_err();
        assert!(e.message.contains("00000000000000000005.batch") && e.message.contains("checksum"), "{}", e.message);
        std::fs::write(&file, &bytes[..n - 2]).unwrap();
        assert!(log.tail(5, 1).unwrap_err().message.contains("torn"));
    }
}
