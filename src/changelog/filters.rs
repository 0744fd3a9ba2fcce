//! A query's filters on the changelog, as pruning: of the rows read, and of the snapshots decoded.

use std::collections::HashSet;
use std::sync::Arc;

use arrow::array::StructArray;
use iceberg::spec::{DataFile, Datum, NestedField, NestedFieldRef, PrimitiveType, Schema, Snapshot, Type};

use super::types::{CHANGE_TYPE, COMMIT_SNAPSHOT_ID};
use crate::error::Result;
use crate::read::filter::{ColumnStats, Prune};
use crate::read::keys::KeyColumns;

/// A query's filters on the changelog, as pruning predicates (DuckDB still applies every filter
/// exactly to the rows; these only skip what cannot match).
#[derive(Default)]
pub struct Filters {
    /// On the table's columns: files and row groups whose bounds exclude them are not read. On a
    /// table with a primary key only the key columns' part: both images of an update share the
    /// key, while a filter on another column could drop the one that pairs it (on an Iceberg v3
    /// table without a key, which pairs by row id, none).
    pub rows: Option<Prune>,
    /// On `_commit_snapshot_id`: the window's snapshots that cannot match are not decoded (plain
    /// feeds only: netting needs every snapshot).
    pub snapshots: Option<Prune>,
}

/// The field id `_commit_snapshot_id` has in [`Filters::parse`]'s predicates (no table's).
const COMMIT_FIELD_ID: i32 = i32::MAX;

impl Filters {
    /// From the shim's description of the filters on the changelog's columns (the table's, then
    /// `_change_type`, `_commit_snapshot_id`). `v3`: the table's rows have Iceberg v3 row ids,
    /// which pair its updates when it has no key (a filter on a column could then drop the image
    /// that pairs another: its rows are not pruned).
    pub fn parse(
        json: &str,
        constants: Option<&StructArray>,
        table: &Schema,
        collapse: bool,
        v3: bool,
    ) -> Result<Filters> {
        let mut fields: Vec<NestedFieldRef> = table.as_struct().fields().to_vec();
        let id = table.highest_field_id();
        let change = NestedField::optional(id + 1, CHANGE_TYPE, Type::Primitive(PrimitiveType::String));
        fields.push(Arc::new(change));
        let commit = NestedField::optional(COMMIT_FIELD_ID, COMMIT_SNAPSHOT_ID, Type::Primitive(PrimitiveType::Long));
        fields.push(Arc::new(commit));
        let extended = Schema::builder().with_fields(fields).build()?;
        let Some(prune) = Prune::parse(json, constants, &extended)? else {
            return Ok(Filters::default());
        };
        let key: Option<HashSet<i32>> = KeyColumns::of(table)?.map(|k| k.field_ids.into_iter().collect());
        let rows = match (&key, v3) {
            (Some(key), _) => prune.restrict(&|f| key.contains(&f)),
            (None, true) => None,
            (None, false) => prune.restrict(&|f| f <= id),
        };
        let snapshots = if collapse { None } else { prune.restrict(&|f| f == COMMIT_FIELD_ID) };
        Ok(Filters { rows, snapshots })
    }

    pub fn may_match(&self, file: &DataFile) -> bool {
        self.rows.as_ref().is_none_or(|p| p.may_match(file))
    }

    pub fn may_match_snapshot(&self, snapshot: &Snapshot) -> bool {
        self.snapshots.as_ref().is_none_or(|p| p.may_match_stats(&SnapshotId(Datum::long(snapshot.snapshot_id()))))
    }
}

/// A snapshot's id as the statistics of `_commit_snapshot_id`.
struct SnapshotId(Datum);

impl ColumnStats for SnapshotId {
    fn lower(&self, field_id: i32) -> Option<&Datum> {
        (field_id == COMMIT_FIELD_ID).then_some(&self.0)
    }
    fn upper(&self, field_id: i32) -> Option<&Datum> {
        self.lower(field_id)
    }
    fn null_count(&self, field_id: i32) -> Option<u64> {
        (field_id == COMMIT_FIELD_ID).then_some(0)
    }
    fn row_count(&self) -> u64 {
        1
    }
}
