//! Sorted tables (issue 43): `ALTER TABLE t SET SORTED BY (...)` / `RESET SORTED BY` and
//! `CREATE TABLE ... SORTED BY (...)` as an Iceberg sort order (`sort-orders`,
//! `default-sort-order-id`), and its description for `skade_tables`. A change is a new default
//! order: files keep the order id they were written with (their manifest entries say which), new
//! writes sort each file by the new one (`write::row_order`). The iceberg crate assigns the order
//! ids (an order equal to an earlier one gets its id back) and checks each transform against its
//! column's type. Sort keys take the transforms partition keys do (`partition::key`).

use iceberg::spec::{
    NullOrder, Schema, SortDirection, SortField, SortOrder, TableMetadata, TableMetadataBuilder, Transform,
};
use serde::Deserialize;

use super::partition::{self, describe_key, transform_name, KeyExpr};
use crate::error::{Error, Result};

/// One sort key: its transform of a column, direction and place of NULLs.
#[derive(Debug, Clone, PartialEq)]
pub struct SortKey {
    pub column: String,
    pub transform: Transform,
    pub direction: SortDirection,
    pub null_order: NullOrder,
}

/// A sort key as the shim describes it: the expression as for a partition key, and the
/// direction and NULL order DuckDB resolved (its settings fill in what the statement left out).
#[derive(Debug, Deserialize)]
struct KeyJson {
    expr: KeyExpr,
    descending: bool,
    nulls_first: bool,
}

/// The keys of SORTED BY from the shim's JSON (an empty list: RESET).
pub fn parse_sort_keys(json: &str) -> Result<Vec<SortKey>> {
    let keys: Vec<KeyJson> =
        serde_json::from_str(json).map_err(|e| Error::internal(format!("malformed sort keys: {e}")))?;
    keys.iter()
        .map(|k| {
            let key = partition::key(&k.expr, "sort")?;
            Ok(SortKey {
                column: key.column,
                transform: key.transform,
                direction: if k.descending { SortDirection::Descending } else { SortDirection::Ascending },
                null_order: if k.nulls_first { NullOrder::First } else { NullOrder::Last },
            })
        })
        .collect()
}

/// `keys` as a sort order of a table with `schema` (none: the unsorted order), each key checked
/// against its column. `table` names the table in messages. The order id is the crate's to give.
pub fn sort_order(schema: &Schema, keys: &[SortKey], table: &str) -> Result<SortOrder> {
    let mut fields = Vec::with_capacity(keys.len());
    for k in keys {
        let field =
            schema.as_struct().fields().iter().find(|f| f.name.eq_ignore_ascii_case(&k.column)).ok_or_else(|| {
                // (DuckDB's binder words an unknown column so; the statement is not bound against
                // the table, so the core says it)
                Error::binder(format!("Referenced column \"{}\" not found in table {table} (SORTED BY)", k.column))
            })?;
        let shown = describe_key(&field.name, &k.transform);
        if !field.field_type.is_primitive() {
            return Err(Error::invalid(format!(
                "cannot sort table {table} by {shown}: column \"{}\" is a {}, and Iceberg sorts by columns of \
                 primitive types only",
                field.name, field.field_type
            )));
        }
        if k.transform.result_type(&field.field_type).is_err() {
            return Err(Error::invalid(format!(
                "cannot sort table {table} by {shown}: column \"{}\" is of type {}, which {} does not take",
                field.name,
                field.field_type,
                transform_name(&k.transform)
            )));
        }
        fields.push(SortField {
            source_id: field.id,
            transform: k.transform,
            direction: k.direction,
            null_order: k.null_order,
        });
    }
    Ok(SortOrder::builder().with_fields(fields).build_unbound()?)
}

/// The metadata with `keys` as its default sort order (none: unsorted), or None when the table
/// is sorted so already. `table` names the table in messages.
pub fn set_order(
    metadata: &TableMetadata,
    location: &str,
    keys: &[SortKey],
    table: &str,
) -> Result<Option<TableMetadata>> {
    let order = sort_order(metadata.current_schema(), keys, table)?;
    if metadata.default_sort_order().fields == order.fields {
        return Ok(None);
    }
    let next = TableMetadataBuilder::new_from_metadata(metadata.clone(), Some(location.to_string()))
        .add_sort_order(order)
        .and_then(|b| b.set_default_sort_order(TableMetadataBuilder::LAST_ADDED as i64))
        .and_then(|b| b.build())
        .map_err(|e| Error::invalid(format!("cannot sort table {table} so: {}", e.message())))?;
    Ok(Some(next.metadata))
}

/// An order as SORTED BY would write it, directions and NULL orders spelled out
/// (`day(ts) ASC NULLS LAST, id DESC NULLS FIRST`); empty: unsorted. Columns are named as
/// `schema` has them now (a renamed column shows its new name).
pub fn describe(order: &SortOrder, schema: &Schema) -> String {
    order
        .fields
        .iter()
        .map(|f| {
            let column = schema.field_by_id(f.source_id).map(|c| c.name.clone()).unwrap_or_else(|| {
                format!("field {}", f.source_id) // (a column dropped since: only older orders name one)
            });
            let direction = match f.direction {
                SortDirection::Ascending => "ASC",
                SortDirection::Descending => "DESC",
            };
            let nulls = match f.null_order {
                NullOrder::First => "NULLS FIRST",
                NullOrder::Last => "NULLS LAST",
            };
            format!("{} {direction} {nulls}", describe_key(&column, &f.transform))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a column is a source of the table's default sort order (new files are sorted by it:
/// the order cannot outlive it).
pub fn is_sort_source(metadata: &TableMetadata, field_id: i32) -> bool {
    metadata.default_sort_order().fields.iter().any(|f| f.source_id == field_id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;
    use crate::format::partition::tests::schema;

    fn keys(json: &str) -> Vec<SortKey> {
        parse_sort_keys(json).unwrap()
    }

    #[test]
    fn keys_parse_from_the_shims_description() {
        let k = keys(
            r#"[{"expr":{"column":"id"},"descending":true,"nulls_first":true},
            {"expr":{"function":{"name":"day","args":[{"column":"ts"}]}},"descending":false,"nulls_first":false}]"#,
        );
        assert_eq!(
            k[0],
            SortKey {
                column: "id".into(),
                transform: Transform::Identity,
                direction: SortDirection::Descending,
                null_order: NullOrder::First
            }
        );
        assert_eq!(
            (k[1].transform, k[1].direction, k[1].null_order),
            (Transform::Day, SortDirection::Ascending, NullOrder::Last)
        );
        let bad = parse_sort_keys(r#"[{"expr":{"constant":"1"},"descending":false,"nulls_first":false}]"#).unwrap_err();
        assert!(bad.to_string().contains("cannot sort by the constant 1"), "{bad}");
        let bad = parse_sort_keys(r#"[{"expr":{"function":{"name":"week","args":[{"column":"ts"}]}},"descending":false,"nulls_first":false}]"#)
            .unwrap_err();
        assert!(bad.to_string().contains("unknown sort transform week"), "{bad}");
    }

    #[test]
    fn orders_check_their_columns_and_describe_as_sql() {
        let s = schema();
        let k = keys(
            r#"[{"expr":{"function":{"name":"bucket","args":[{"constant":"4"},{"column":"ID"}]}},"descending":false,"nulls_first":true},
            {"expr":{"column":"s"},"descending":true,"nulls_first":false}]"#,
        );
        let order = sort_order(&s, &k, "lake.t").unwrap();
        assert_eq!(order.fields[0].source_id, 1);
        assert_eq!(describe(&order, &s), "bucket(4, id) ASC NULLS FIRST, s DESC NULLS LAST");
        assert!(sort_order(&s, &[], "lake.t").unwrap().is_unsorted());

        let missing = SortKey { column: "nope".into(), ..k[1].clone() };
        let err = sort_order(&s, &[missing], "lake.t").unwrap_err();
        assert_eq!(err.kind, ErrorKind::Binder);
        assert!(err.message.contains("\"nope\""), "{err}");
        let hour_of_string = SortKey { transform: Transform::Hour, ..k[1].clone() };
        let err = sort_order(&s, &[hour_of_string], "lake.t").unwrap_err();
        assert!(err.message.contains("which hour does not take"), "{err}");
    }

    #[test]
    fn a_new_order_becomes_the_default_and_an_equal_one_keeps_its_id() {
        let md = super::super::metadata::tests::keyed_table(&[]);
        let loc = "/t/metadata/00000-x.metadata.json";
        let by_a = keys(r#"[{"expr":{"column":"a"},"descending":false,"nulls_first":false}]"#);
        let sorted = set_order(&md, loc, &by_a, "t").unwrap().unwrap();
        let id = sorted.default_sort_order().order_id;
        assert_ne!(id, 0);
        assert!(set_order(&sorted, loc, &by_a, "t").unwrap().is_none(), "the order it has");
        let reset = set_order(&sorted, loc, &[], "t").unwrap().unwrap();
        assert!(reset.default_sort_order().is_unsorted());
        let again = set_order(&reset, loc, &by_a, "t").unwrap().unwrap();
        assert_eq!(again.default_sort_order().order_id, id);
        let a = again.current_schema().field_by_name("a").unwrap().id;
        assert!(is_sort_source(&again, a) && !is_sort_source(&reset, a));
    }
}
