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
    /// Through a commit log, where several processes attach the lake: the one delivering to the
    /// sink, and until when (its lease); the others leave it alone until the lease lapses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until_us: Option<i64>,
}

impl SinkRecord {
    /// Another process's, while its lease runs at `now_us`: that owner and until when.
    pub fn held_by_other(&self, me: &str, now_us: i64) -> Option<(&str, i64)> {
        match (&self.owner, self.lease_until_us) {
            (Some(owner), Some(until)) if owner != me && until > now_us => Some((owner.as_str(), until)),
            _ => None,
        }
    }
}

/// One transaction's change to one sink.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SinkChange {
    pub name: String,
    /// The cursor the change moves from (0 for a sink not stored yet).
    pub from_seq: u64,
    /// The owner the stored record names (see [`SinkRecord::owner`]): a lease taken meanwhile
    /// conflicts too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_owner: Option<String>,
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
        let owner = stored.and_then(|s| s.owner.as_deref());
        if owner != self.from_owner.as_deref() {
            return Err(Error::conflict(format!(
                "lineage sink {} is delivered by {} now (another process took it over meanwhile)",
                self.name,
                owner.unwrap_or("no process")
            )));
        }
        Ok(())
    }
}
