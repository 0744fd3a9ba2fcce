//! Lineage sinks' cursors: for each place lineage events go (the reserved history table, an
//! OpenLineage collector), the last commit_seq whose event it holds, stored in the catalog file.
//!
//! Like a consumer's, a sink's change takes no commit_seq and commits in a redb write
//! transaction with whatever else its transaction wrote: the history table's rows and its cursor
//! land together (exactly once), a collector's cursor after the collector acknowledged (at least
//! once). Each change carries the cursor it moved from; a change from a cursor that moved since
//! (a second writer) conflicts instead of going back.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One sink, as stored (JSON) in the `lineage_sinks` table, keyed by its name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkRecord {
    /// The last commit_seq whose event the sink holds (or that made none).
    pub delivered_seq: u64,
    /// When the cursor last moved.
    #[serde(default)]
    pub delivered_at_us: Option<i64>,
    /// Events the sink refused for good (an HTTP 4xx): recorded, skipped, never retried.
    #[serde(default)]
    pub rejected: u64,
    /// The last refusal: its event's commit_seq and the sink's message.
    #[serde(default)]
    pub last_rejected_seq: Option<u64>,
    #[serde(default)]
    pub last_rejection: Option<String>,
}

/// One transaction's change to one sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkChange {
    pub name: String,
    /// The cursor the change moves from (0 for a sink not stored yet).
    pub from_seq: u64,
    pub record: SinkRecord,
}

impl SinkChange {
    /// Whether the stored record is still the one this change moves from.
    pub fn check(&self, stored: Option<&SinkRecord>) -> Result<()> {
        let at = stored.map_or(0, |s| s.delivered_seq);
        if at != self.from_seq {
            return Err(Error::conflict(format!(
                "lineage sink {} moved from commit_seq {} to {at} meanwhile (another writer delivers to it)",
                self.name, self.from_seq
            )));
        }
        Ok(())
    }
}
