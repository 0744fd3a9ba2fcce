//! Named consumers: a cursor (the last commit_seq delivered) over one or more tables, stored in
//! the catalog file. A consuming transaction stages the cursor's advance like any other change,
//! so it commits in the same redb write transaction as whatever else the transaction wrote to
//! the lake (exactly-once for a sink in the lake), and a rollback leaves it where it was.
//!
//! A consumer's changes take no commit_seq: they change no table, and a consumer must not see
//! its own advances as commits to deliver.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// One consumer, as stored (JSON) in the `consumers` table, keyed by its name's key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerRecord {
    pub name: String,
    /// New at every create and reset: a staged advance read from another generation conflicts.
    pub generation: String,
    pub tables: Vec<ConsumedTable>,
    /// The last commit_seq delivered; the next read starts strictly after it.
    pub cursor: u64,
    pub created_at_us: i64,
    /// When a read last advanced the cursor.
    pub consumed_at_us: Option<i64>,
}

/// A table a consumer follows: by identity (a table dropped and created again is another).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumedTable {
    pub schema: String,
    pub name: String,
    pub uuid: String,
}

impl ConsumedTable {
    /// The name the consumer was created with.
    pub fn qualified_name(&self) -> String {
        format!("{}.{}", self.schema, self.name)
    }
}

/// What must still hold of a consumer when a change to it commits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ConsumerExpect {
    Absent,
    /// The same consumer (not dropped, reset or created again since it was read).
    Generation(String),
    /// The same consumer, its cursor still where the read started (a consuming read).
    Cursor(String, u64),
}

/// One transaction's net change to one consumer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerChange {
    /// The name's key.
    pub key: String,
    pub expect: ConsumerExpect,
    /// The consumer after the change; None: dropped.
    pub record: Option<ConsumerRecord>,
    /// Only acknowledgements: the stored cursor moves to the larger of the two.
    pub monotonic: bool,
}

impl ConsumerChange {
    /// Whether the change may apply to `stored` (the consumer as committed), and if not why.
    pub fn check(&self, stored: Option<&ConsumerRecord>) -> Result<()> {
        let name = match (&self.record, stored) {
            (Some(r), _) => r.name.clone(),
            (None, Some(s)) => s.name.clone(),
            (None, None) => self.key.clone(),
        };
        let why = match (&self.expect, stored) {
            (ConsumerExpect::Absent, None) => return Ok(()),
            (ConsumerExpect::Absent, Some(_)) => "it was created by a concurrent transaction",
            (_, None) => "it was dropped by a concurrent transaction",
            (ConsumerExpect::Generation(g) | ConsumerExpect::Cursor(g, _), Some(s)) if *g != s.generation => {
                "it was dropped, created again or reset by a concurrent transaction"
            }
            (ConsumerExpect::Cursor(_, c), Some(s)) if *c != s.cursor => {
                "a concurrent transaction consumed or acknowledged its commits first"
            }
            _ => return Ok(()),
        };
        Err(Error::conflict(format!(
            "transaction conflict on consumer \"{name}\": {why}; nothing was committed, retry the transaction"
        )))
    }

    /// The consumer once the change applies to `stored` (None: dropped).
    pub fn applied(&self, stored: Option<&ConsumerRecord>) -> Option<ConsumerRecord> {
        let mut record = self.record.clone()?;
        if self.monotonic {
            if let Some(s) = stored {
                if s.cursor > record.cursor {
                    record.cursor = s.cursor;
                    record.consumed_at_us = s.consumed_at_us;
                }
            }
        }
        Some(record)
    }
}

/// One consumer as this transaction changed it.
pub(crate) struct StagedConsumer {
    /// The consumer as committed when this transaction first changed it (None: absent).
    base: Option<Arc<ConsumerRecord>>,
    /// After this transaction's changes (None: dropped).
    record: Option<ConsumerRecord>,
    /// A consuming read advanced it: the commit compares the cursor with the base's.
    strict: bool,
    /// Created, dropped or reset: written as it is, never merged with a concurrent
    /// acknowledgement.
    exact: bool,
}

impl StagedConsumer {
    pub(crate) fn new(base: Option<Arc<ConsumerRecord>>) -> Self {
        StagedConsumer { base, record: None, strict: false, exact: false }
    }

    /// One more change: the consumer is now `record`.
    pub(crate) fn stage(&mut self, record: Option<ConsumerRecord>, strict: bool, exact: bool) {
        self.record = record;
        self.strict |= strict;
        self.exact |= exact;
    }

    pub(crate) fn record(&self) -> Option<&ConsumerRecord> {
        self.record.as_ref()
    }
}

/// The net change of each consumer the transaction changed.
pub(crate) fn staged_consumer_changes(staged: &BTreeMap<String, StagedConsumer>) -> Vec<ConsumerChange> {
    staged
        .iter()
        .filter(|(_, s)| s.base.is_some() || s.record.is_some()) // created and dropped again: nothing
        .map(|(k, s)| ConsumerChange {
            key: k.clone(),
            expect: match &s.base {
                None => ConsumerExpect::Absent,
                Some(b) if s.strict => ConsumerExpect::Cursor(b.generation.clone(), b.cursor),
                Some(b) => ConsumerExpect::Generation(b.generation.clone()),
            },
            record: s.record.clone(),
            monotonic: !s.strict && !s.exact,
        })
        .collect()
}

/// Where a consumer starts (or is reset to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// After the last commit: only later commits are delivered.
    Now,
    /// Before the first commit: every commit of its tables still in the history.
    Beginning,
    /// After the commit that made this snapshot of its (one) table.
    Snapshot(i64),
    /// After this commit_seq.
    CommitSeq(u64),
}

impl Start {
    /// `'now'` or `'beginning'` (case-insensitive).
    pub fn parse(word: &str) -> Result<Start> {
        match word.to_ascii_lowercase().as_str() {
            "now" => Ok(Start::Now),
            "beginning" => Ok(Start::Beginning),
            _ => Err(Error::invalid(format!(
                "unknown consumer start '{word}': use 'now', 'beginning', at_snapshot := <snapshot id> or \
                 at_commit := <commit_seq>"
            ))),
        }
    }
}
