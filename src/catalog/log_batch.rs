//! What a log-resident catalog writes into its commit log (issue 23, docs/design/commit-log.md):
//! the adoption stamp at position 0 and one batch per later position. A batch holds everything
//! its fold must not recompute (the commit time, the requests whose checks passed on the head it
//! was prepared on), so every process folding it writes the same rows: the same commit_seqs, the
//! same commit-log records. JSON, like every record of the catalog file.

use serde::{Deserialize, Serialize};

use super::commit::CommitRequest;
use crate::error::{Error, Result};

/// The batch format this build writes and reads.
const BATCH_FORMAT: u32 = 1;

/// One position of the log.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LogBatch {
    pub format: u32,
    /// Unique per offer: a committer whose offer failed with an unknown outcome recognises its
    /// own batch by it.
    pub id: String,
    /// The process that offered it (`pid@host`), for diagnostics.
    pub writer: String,
    #[serde(flatten)]
    pub kind: BatchKind,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum BatchKind {
    /// One group commit: the requests, in order, that passed their checks on the head.
    Commit { committed_at_us: i64, requests: Vec<CommitRequest> },
    /// Snapshot ids `first..first + count` are this writer's to give out (ids must be unique in
    /// a table whichever process stages its snapshots, and are chosen before a commit).
    ReserveSnapshotIds { first: i64, count: i64 },
}

impl LogBatch {
    pub fn new(kind: BatchKind) -> LogBatch {
        LogBatch { format: BATCH_FORMAT, id: uuid::Uuid::new_v4().to_string(), writer: writer_name(), kind }
    }

    pub fn encode(&self) -> Result<Vec<u8>> {
        Ok(serde_json::to_vec(self)?)
    }

    /// A batch read from position `seq` of the log at `location`.
    pub fn decode(bytes: &[u8], seq: u64, location: &str) -> Result<LogBatch> {
        let batch: LogBatch = serde_json::from_slice(bytes).map_err(|e| {
            Error::corrupt(format!("position {seq} of the commit log {location} is not a skade batch ({e})"))
        })?;
        if batch.format > BATCH_FORMAT {
            return Err(Error::corrupt(format!(
                "position {seq} of the commit log {location} has batch format {}, written by a newer skade (this \
                 build reads format {BATCH_FORMAT}): upgrade skade in every process that attaches the lake",
                batch.format
            )));
        }
        Ok(batch)
    }
}

/// Position 0 of a log: which catalog adopted it. A log serves one catalog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdoptionStamp {
    pub format: u32,
    /// The catalog's identity (`catalog_uuid` in its meta table).
    pub catalog: String,
    /// The catalog file that adopted it, for messages.
    pub path: String,
    /// Whether the catalog held no commit when it adopted the log: then folding the log from
    /// position 1 rebuilds it, and another catalog file (another host's) may join it. (Stamps
    /// of older builds have neither field: such a log is not joined.)
    #[serde(default)]
    pub fresh: bool,
    /// The catalog's warehouse, which a joining catalog must share.
    #[serde(default)]
    pub data_path: Option<String>,
}

impl AdoptionStamp {
    pub fn new(catalog: &str, path: &str, fresh: bool, data_path: &str) -> AdoptionStamp {
        AdoptionStamp {
            format: BATCH_FORMAT,
            catalog: catalog.to_string(),
            path: path.to_string(),
            fresh,
            data_path: Some(data_path.to_string()),
        }
    }

    pub fn decode(bytes: &[u8], location: &str) -> Result<AdoptionStamp> {
        serde_json::from_slice(bytes).map_err(|e| {
            Error::catalog(format!(
                "the commit log {location} was adopted by something other than a skade catalog (its stamp: {e})"
            ))
        })
    }
}

fn writer_name() -> String {
    format!("{}@{}", std::process::id(), crate::io::host_name())
}
