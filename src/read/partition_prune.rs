//! Pruning a data file by its partition values (issue 24): whether any row of a file whose
//! partition tuple is `partition` (under its spec) can satisfy a scan's pushed-down filters. The
//! iceberg crate's projection visitors are private to it, so the projection of a predicate onto
//! a partition value is written here: a few rules per transform.

use std::cmp::Ordering;

use iceberg::spec::{Literal, PartitionSpec, PrimitiveLiteral, Struct, Transform};
use iceberg::transform::create_transform_function;

use super::filter::{Cmp, Prune};
use crate::format::partition;

/// False only when no row of a file with partition values `partition` (under `spec`) can satisfy
/// `prune`. Conservative: whatever cannot be projected onto a partition value prunes nothing.
pub fn may_match(prune: &Prune, spec: &PartitionSpec, partition: &Struct) -> bool {
    if spec.fields().is_empty() || partition.fields().len() != spec.fields().len() {
        return true;
    }
    match prune {
        Prune::And(parts) => parts.iter().all(|p| may_match(p, spec, partition)),
        Prune::Or(parts) => parts.iter().any(|p| may_match(p, spec, partition)),
        Prune::Hint(p) => may_match(p, spec, partition),
        Prune::Compare { field_id, cmp, value } => {
            fields_of(spec, *field_id, partition).all(|(t, part)| compare(t, *cmp, value, part))
        }
        Prune::In { field_id, values } => {
            values.iter().any(|v| fields_of(spec, *field_id, partition).all(|(t, part)| compare(t, Cmp::Eq, v, part)))
        }
        // a transform of NULL is NULL; of a value, a value or (beyond the crate's date range:
        // year, month of infinity) NULL too, so a NULL partition value proves nothing
        Prune::IsNull(id) => fields_of(spec, *id, partition).all(|(_, part)| part.is_none()),
        Prune::IsNotNull(_) => true,
    }
}

/// The spec's fields of source `field_id` (void ones aside) with the file's value of each.
fn fields_of<'a>(
    spec: &'a PartitionSpec,
    field_id: i32,
    partition: &'a Struct,
) -> impl Iterator<Item = (&'a Transform, Option<&'a Literal>)> {
    spec.fields()
        .iter()
        .zip(partition.iter())
        .filter(move |(f, _)| f.source_id == field_id && f.transform != Transform::Void)
        .map(|(f, v)| (&f.transform, v))
}

/// Whether `source cmp value` may hold for a row whose partition value (under transform `t`) is
/// `part`. Identity keeps every comparison; the time transforms and truncate are monotonic (a
/// row below `value` has a partition value at most `t(value)`); bucket keeps equality only.
fn compare(t: &Transform, cmp: Cmp, value: &iceberg::spec::Datum, part: Option<&Literal>) -> bool {
    // (NULL: the crate gives NULL for some values out of its range too; a nested value: cannot tell)
    let Some(Literal::Primitive(part)) = part else {
        return true;
    };
    if !partition::transformable(t, value) {
        return true; // (an infinity or a year beyond ~247,000: the crate would panic on it)
    }
    let Ok(Some(projected)) = create_transform_function(t).and_then(|f| f.transform_literal(value)) else {
        return true;
    };
    let Some(order) = order(part, projected.literal()) else {
        return true;
    };
    match t {
        Transform::Identity => match cmp {
            Cmp::Eq => order == Ordering::Equal,
            Cmp::Ne => order != Ordering::Equal,
            Cmp::Lt => order == Ordering::Less,
            Cmp::Le => order != Ordering::Greater,
            Cmp::Gt => order == Ordering::Greater,
            Cmp::Ge => order != Ordering::Less,
        },
        // The crate's truncate of an integer or decimal wraps at the type's minimum, and its hour
        // wraps beyond year ~247,000: for them only equality (deterministic) prunes.
        Transform::Hour | Transform::Truncate(_)
            if cmp != Cmp::Eq && !matches!(part, PrimitiveLiteral::String(_) | PrimitiveLiteral::Binary(_)) =>
        {
            true
        }
        Transform::Year | Transform::Month | Transform::Day | Transform::Hour | Transform::Truncate(_) => match cmp {
            Cmp::Eq => order == Ordering::Equal,
            Cmp::Ne => true,
            Cmp::Lt | Cmp::Le => order != Ordering::Greater,
            Cmp::Gt | Cmp::Ge => order != Ordering::Less,
        },
        Transform::Bucket(_) => cmp != Cmp::Eq || order == Ordering::Equal,
        Transform::Void | Transform::Unknown => true,
    }
}

/// Two values of one type compared (None: of different types, or unordered).
fn order(a: &PrimitiveLiteral, b: &PrimitiveLiteral) -> Option<Ordering> {
    if std::mem::discriminant(a) != std::mem::discriminant(b) {
        return None;
    }
    a.partial_cmp(b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::partition::tests::spec;
    use iceberg::spec::Datum;

    fn part(values: Vec<Option<Literal>>) -> Struct {
        Struct::from_iter(values)
    }

    fn cmp(field_id: i32, cmp: Cmp, value: Datum) -> Prune {
        Prune::Compare { field_id, cmp, value }
    }

    #[test]
    fn day_partitions_prune_by_range_and_equality() {
        let spec = spec(&[(2, "ts_day", Transform::Day)]);
        let day = |d: i32| part(vec![Some(Literal::date(d))]);
        let at = |micros: i64| Datum::timestamp_micros(micros);
        const DAY: i64 = 86_400_000_000;
        // a row at day 10, 12:00
        let noon10 = at(10 * DAY + DAY / 2);
        assert!(may_match(&cmp(2, Cmp::Eq, noon10.clone()), &spec, &day(10)));
        assert!(!may_match(&cmp(2, Cmp::Eq, noon10.clone()), &spec, &day(11)));
        assert!(!may_match(&cmp(2, Cmp::Lt, noon10.clone()), &spec, &day(11)));
        assert!(may_match(&cmp(2, Cmp::Lt, noon10.clone()), &spec, &day(10)));
        assert!(!may_match(&cmp(2, Cmp::Ge, noon10.clone()), &spec, &day(9)));
        assert!(may_match(&cmp(2, Cmp::Ne, noon10.clone()), &spec, &day(10)));
        assert!(!may_match(&Prune::IsNull(2), &spec, &day(10)));
        // a NULL partition value prunes no comparison (the crate makes NULLs of values out of range)
        assert!(may_match(&cmp(2, Cmp::Eq, noon10.clone()), &spec, &part(vec![None])));
        // other columns prune nothing here
        assert!(may_match(&cmp(1, Cmp::Eq, Datum::long(5)), &spec, &day(3)));
    }

    #[test]
    fn buckets_prune_equality_only() {
        let spec = spec(&[(1, "id_bucket", Transform::Bucket(16))]);
        // Iceberg's bucket(16) of the long 34 is 3 (the spec's test vector)
        let bucket = |b: i32| part(vec![Some(Literal::int(b))]);
        assert!(may_match(&cmp(1, Cmp::Eq, Datum::long(34)), &spec, &bucket(3)));
        assert!(!may_match(&cmp(1, Cmp::Eq, Datum::long(34)), &spec, &bucket(4)));
        assert!(may_match(&cmp(1, Cmp::Lt, Datum::long(34)), &spec, &bucket(4)));
        let within = Prune::In { field_id: 1, values: vec![Datum::long(1), Datum::long(34)] };
        assert!(may_match(&within, &spec, &bucket(3)));
        assert!(!may_match(&within, &spec, &bucket(7)));
    }

    #[test]
    fn truncated_strings_and_identity() {
        let spec = spec(&[(3, "s_trunc", Transform::Truncate(2)), (1, "id", Transform::Identity)]);
        let p = part(vec![Some(Literal::string("ab")), Some(Literal::long(7))]);
        assert!(may_match(&cmp(3, Cmp::Eq, Datum::string("abc")), &spec, &p));
        assert!(!may_match(&cmp(3, Cmp::Eq, Datum::string("b")), &spec, &p));
        assert!(!may_match(&cmp(3, Cmp::Lt, Datum::string("aa")), &spec, &p));
        assert!(!may_match(&cmp(1, Cmp::Ne, Datum::long(7)), &spec, &p));
        assert!(!may_match(&cmp(1, Cmp::Gt, Datum::long(7)), &spec, &p));
        let either = Prune::Or(vec![cmp(1, Cmp::Eq, Datum::long(1)), cmp(3, Cmp::Eq, Datum::string("ab"))]);
        assert!(may_match(&either, &spec, &p));
    }
}
