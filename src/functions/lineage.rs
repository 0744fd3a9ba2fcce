//! `skade_lineage(catalog [, since_seq])`: the lineage event of every committed transaction
//! after since_seq that changed a table (see `lineage::events`), paged from the commit log.

use arrow::array::RecordBatch;
use arrow::datatypes::SchemaRef;
use arrow::error::ArrowError;

use crate::catalog::Catalog;
use crate::error::Result;
use crate::lineage::events::{self, LineageEvent};
use crate::lineage::rows::{self, SeqType};

const PAGE: usize = 4096;

pub fn schema() -> SchemaRef {
    rows::schema(SeqType::Unsigned, false)
}

fn batch(events: &[LineageEvent]) -> Result<RecordBatch> {
    rows::batch(events, SeqType::Unsigned, None)
}

/// Pages through the events after `since`, one read of the log per page.
pub struct Lineage {
    catalog: Catalog,
    next: u64,
    done: bool,
}

impl Lineage {
    pub fn new(catalog: Catalog, since: u64) -> Self {
        Self { catalog, next: since, done: false }
    }

    fn page(&mut self) -> Result<Option<RecordBatch>> {
        loop {
            let (events, read) = events::since(&self.catalog, self.next, PAGE)?;
            let Some(read) = read else {
                return Ok(None);
            };
            self.next = read;
            // (a page of commits that made no event, schema DDL or maintenance, moves on)
            if !events.is_empty() {
                return Ok(Some(batch(&events)?));
            }
        }
    }
}

impl Iterator for Lineage {
    type Item = std::result::Result<RecordBatch, ArrowError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.page() {
            Ok(Some(b)) => Some(Ok(b)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(ArrowError::ExternalError(Box::new(e))))
            }
        }
    }
}

impl arrow::array::RecordBatchReader for Lineage {
    fn schema(&self) -> SchemaRef {
        schema()
    }
}
