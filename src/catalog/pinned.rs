//! `WHERE pk = const` and `WHERE pk IN (...)`: when a scan's filters pin every primary-key column
//! to constants, the scan is a lookup of those keys instead of a read of every file. The
//! transaction decides (`Transaction::scan`): neither the scan nor the lookup knows the other.

use std::sync::Arc;

use arrow::array::{Array, ArrayRef, Int64Array, RecordBatch, RecordBatchOptions};
use arrow::datatypes::SchemaRef as ArrowSchemaRef;
use iceberg::spec::{Datum, Schema, TableMetadata};

use crate::error::Result;
use crate::format::name_mapping::FileNames;
use crate::lookup::cache::LookupCache;
use crate::lookup::{lookup, LookupRequest};
use crate::read::caches::ReadCaches;
use crate::read::filter::{Cmp, Prune};
use crate::read::key_bounds::datum_array;
use crate::read::keys::KeyColumns;
use crate::read::scan::{row_id, ScanRequest};

/// The rows of the keys `keys` a scan asked for, found by a lookup, in the plan's columns `out`
/// (with row ids when asked); `names`: the plan's name mapping (files without field ids).
pub fn lookup_rows(
    metadata: &TableMetadata,
    (caches, lookup_cache): (&ReadCaches, &LookupCache),
    req: &ScanRequest<'_>,
    schema: &Schema,
    keys: &[ArrayRef],
    out: ArrowSchemaRef,
    names: Option<&FileNames>,
) -> Result<RecordBatch> {
    let request = LookupRequest {
        metadata,
        version: req.version,
        staged: req.staged,
        staged_deletes: req.staged_deletes,
        output: schema,
        names,
    };
    let found = lookup(caches, lookup_cache, &request, keys)?;
    let mut columns: Vec<ArrayRef> = req.columns.iter().map(|&c| found.batch.column(c).clone()).collect();
    if let Some(ids) = req.row_ids {
        let ids = found.positions.iter().map(|(path, pos)| row_id(ids(path), *pos));
        columns.push(Arc::new(Int64Array::from_iter_values(ids)));
    }
    let rows = Some(found.batch.num_rows());
    Ok(RecordBatch::try_new_with_options(out, columns, &RecordBatchOptions::new().with_row_count(rows))?)
}

/// Beyond this many keys a scan reads the files the usual way.
const MAX_PINNED_KEYS: usize = 1024;

/// The keys `prune` pins (arrays in the order of primary key `key`'s columns), or None when it
/// does not pin them all.
pub fn pinned_keys(prune: &Prune, key: &KeyColumns) -> Option<Vec<ArrayRef>> {
    let mut values: Vec<Option<Vec<Datum>>> = vec![None; key.field_ids.len()];
    collect(prune, key, &mut values);
    let values: Vec<Vec<Datum>> = values.into_iter().collect::<Option<_>>()?;
    let count = values.iter().try_fold(1usize, |n, v| n.checked_mul(v.len()))?;
    if count == 0 || count > MAX_PINNED_KEYS {
        return None;
    }
    // Every combination of the columns' values (one per column for the usual single key).
    let mut columns: Vec<Vec<ArrayRef>> = vec![vec![]; values.len()];
    for i in 0..count {
        let mut rest = i;
        for (c, vs) in values.iter().enumerate().rev() {
            columns[c].push(datum_array(&vs[rest % vs.len()], &key.types[c])?);
            rest /= vs.len();
        }
    }
    columns
        .into_iter()
        .map(|parts| {
            let refs: Vec<&dyn Array> = parts.iter().map(|a| a.as_ref()).collect();
            arrow::compute::concat(&refs).ok()
        })
        .collect()
}

/// Equality constraints on key columns in the conjunction `prune` (an equality wins over a list).
fn collect(prune: &Prune, key: &KeyColumns, values: &mut [Option<Vec<Datum>>]) {
    match prune {
        Prune::And(parts) => parts.iter().for_each(|p| collect(p, key, values)),
        Prune::Compare { field_id, cmp: Cmp::Eq, value } => {
            if let Some(c) = key.field_ids.iter().position(|id| id == field_id) {
                values[c] = Some(vec![value.clone()]);
            }
        }
        Prune::In { field_id, values: list } => {
            if let Some(c) = key.field_ids.iter().position(|id| id == field_id) {
                if values[c].is_none() {
                    values[c] = Some(list.clone());
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::AsArray;
    use arrow::datatypes::{Int32Type, Int64Type};
    use iceberg::spec::{NestedField, PrimitiveType, Schema, Type};
    use std::sync::Arc;

    fn schema() -> Schema {
        let f = |id, name, t| Arc::new(NestedField::required(id, name, Type::Primitive(t)));
        Schema::builder()
            .with_fields(vec![
                f(1, "a", PrimitiveType::Long),
                f(2, "b", PrimitiveType::Int),
                f(3, "v", PrimitiveType::String),
            ])
            .with_identifier_field_ids(vec![1, 2])
            .build()
            .unwrap()
    }

    fn key(s: &Schema) -> KeyColumns {
        KeyColumns::of(s).unwrap().unwrap()
    }

    fn eq(id: i32, v: Datum) -> Prune {
        Prune::Compare { field_id: id, cmp: Cmp::Eq, value: v }
    }

    #[test]
    fn every_key_column_must_be_pinned() {
        let s = key(&schema());
        assert!(pinned_keys(&eq(1, Datum::long(1)), &s).is_none(), "b is not pinned");
        let p = Prune::And(vec![eq(1, Datum::long(1)), eq(3, Datum::string("x")), eq(2, Datum::int(7))]);
        let keys = pinned_keys(&p, &s).unwrap();
        assert_eq!(keys[0].as_primitive::<Int64Type>().values().to_vec(), vec![1]);
        assert_eq!(keys[1].as_primitive::<Int32Type>().values().to_vec(), vec![7]);
        // an OR pins nothing
        let or = Prune::Or(vec![p.clone(), p]);
        assert!(pinned_keys(&or, &s).is_none());
        // a join's runtime filter (a hint) is no condition of the query: it pins nothing either
        let hinted = Prune::And(vec![eq(1, Datum::long(1)), Prune::Hint(Box::new(eq(2, Datum::int(7))))]);
        assert!(pinned_keys(&hinted, &s).is_none());
        let in_hint = Prune::Hint(Box::new(Prune::In { field_id: 1, values: vec![Datum::long(1)] }));
        let hinted = Prune::And(vec![in_hint, eq(2, Datum::int(7))]);
        assert!(pinned_keys(&hinted, &s).is_none());
    }

    #[test]
    fn lists_give_every_combination() {
        let s = key(&schema());
        let p = Prune::And(vec![
            Prune::In { field_id: 1, values: vec![Datum::long(1), Datum::long(2)] },
            Prune::In { field_id: 2, values: vec![Datum::int(10), Datum::int(20), Datum::int(30)] },
        ]);
        let keys = pinned_keys(&p, &s).unwrap();
        assert_eq!(keys[0].as_primitive::<Int64Type>().values().to_vec(), vec![1, 1, 1, 2, 2, 2]);
        assert_eq!(keys[1].as_primitive::<Int32Type>().values().to_vec(), vec![10, 20, 30, 10, 20, 30]);
        // too many combinations: a scan
        let many: Vec<Datum> = (0..100).map(Datum::long).collect();
        let many_b: Vec<Datum> = (0..100).map(Datum::int).collect();
        let p = Prune::And(vec![Prune::In { field_id: 1, values: many }, Prune::In { field_id: 2, values: many_b }]);
        assert!(pinned_keys(&p, &s).is_none());
    }
}
