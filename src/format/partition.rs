//! Partitioned tables (issue 24): `ALTER TABLE t SET PARTITIONED BY (...)` / `RESET PARTITIONED
//! BY` as an Iceberg partition spec, its description for `skade_tables`, and pruning a file by its
//! partition values. A spec change is a new default spec: files keep the spec they were written
//! with (their manifests say which), new writes use the new one. The iceberg crate assigns the
//! partition field ids (a field equal to one of an earlier spec keeps its id) and checks each
//! transform against its column's type. Pruning by partition values: `read::partition_prune`.

use iceberg::spec::{PartitionSpec, Schema, TableMetadata, TableMetadataBuilder, Transform, UnboundPartitionSpec};
use serde::Deserialize;

use crate::error::{Error, Result};

/// One partition key as the shim describes DuckDB's parsed expression: a column, or a function
/// of constants and one column (`day(ts)`, `bucket(16, id)`). A sort key's expression too.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum KeyExpr {
    Column(String),
    Constant(String),
    Function { name: String, args: Vec<KeyExpr> },
}

/// A partition key: its transform of a column.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionKey {
    pub column: String,
    pub transform: Transform,
}

/// The keys of SET PARTITIONED BY from the shim's JSON (an empty list: RESET).
pub fn parse_keys(json: &str) -> Result<Vec<PartitionKey>> {
    let exprs: Vec<KeyExpr> =
        serde_json::from_str(json).map_err(|e| Error::internal(format!("malformed partition keys: {e}")))?;
    exprs.iter().map(|e| key(e, "partition")).collect()
}

/// `expr` as a transform of a column. `what` names the clause in messages: "partition" (a
/// partition key) or "sort" (a sort key, which takes the same transforms).
pub(crate) fn key(expr: &KeyExpr, what: &str) -> Result<PartitionKey> {
    let (name, args) = match expr {
        KeyExpr::Column(c) => return Ok(PartitionKey { column: c.clone(), transform: Transform::Identity }),
        KeyExpr::Constant(c) => {
            return Err(Error::invalid(format!("cannot {what} by the constant {c}: name a column")));
        }
        KeyExpr::Function { name, args } => (name.to_ascii_lowercase(), args),
    };
    const FORMS: &str = "a column, year(c), month(c), day(c), hour(c), bucket(N, c) or truncate(W, c)";
    let column = |args: &[KeyExpr]| match args {
        [KeyExpr::Column(c)] => Ok(c.clone()),
        _ => Err(Error::invalid(format!("{what} key {name}(...) takes one column: use {FORMS}"))),
    };
    let width = |args: &[KeyExpr]| -> Result<(u32, String)> {
        match args {
            // (Iceberg keeps N and W as 32-bit signed integers)
            [KeyExpr::Constant(n), KeyExpr::Column(c)] => match n.parse::<u32>() {
                Ok(n) if n > 0 && n <= i32::MAX as u32 => Ok((n, c.clone())),
                _ => Err(Error::invalid(format!(
                    "{what} key {name}({n}, {c}): {n} is not a positive integer of at most {}",
                    i32::MAX
                ))),
            },
            _ => Err(Error::invalid(format!(
                "{what} key {name}(...) takes a positive integer and a column, as {name}(16, c)"
            ))),
        }
    };
    let (transform, column) = match name.as_str() {
        "identity" => (Transform::Identity, column(args)?),
        "year" | "years" => (Transform::Year, column(args)?),
        "month" | "months" => (Transform::Month, column(args)?),
        "day" | "days" => (Transform::Day, column(args)?),
        "hour" | "hours" => (Transform::Hour, column(args)?),
        "bucket" => {
            let (n, c) = width(args)?;
            (Transform::Bucket(n), c)
        }
        "truncate" => {
            let (w, c) = width(args)?;
            (Transform::Truncate(w), c)
        }
        other => return Err(Error::invalid(format!("unknown {what} transform {other}: use {FORMS}"))),
    };
    Ok(PartitionKey { column, transform })
}

/// The partition field's name, as Iceberg's Java API names them (`ts_day`, `id_bucket`).
fn field_name(column: &str, transform: &Transform) -> String {
    let column = &avro_compatible(column);
    match transform {
        Transform::Identity => column.to_string(),
        Transform::Year => format!("{column}_year"),
        Transform::Month => format!("{column}_month"),
        Transform::Day => format!("{column}_day"),
        Transform::Hour => format!("{column}_hour"),
        Transform::Bucket(_) => format!("{column}_bucket"),
        Transform::Truncate(_) => format!("{column}_trunc"),
        _ => format!("{column}_{transform}"),
    }
}

/// `name` as a valid Avro name, as Iceberg's Java API makes one (`AvroSchemaUtil.makeCompatibleName`):
/// a partition field's name is a field of the manifests' Avro schema, and readers refuse an
/// invalid one (DuckDB's iceberg extension aborts on it). A leading digit gets a `_` before it;
/// any other character outside `[A-Za-z0-9_]` becomes `_x` and its code point in hex.
fn avro_compatible(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.chars().enumerate() {
        match c {
            'A'..='Z' | 'a'..='z' | '_' => out.push(c),
            '0'..='9' if i > 0 => out.push(c),
            '0'..='9' => {
                out.push('_');
                out.push(c);
            }
            _ => out.push_str(&format!("_x{:X}", c as u32)),
        }
    }
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// The metadata with `keys` as its partition spec (none: unpartitioned), or None when the
/// table is partitioned so already. `table` names the table in messages.
pub fn set_spec(
    metadata: &TableMetadata,
    location: &str,
    keys: &[PartitionKey],
    table: &str,
) -> Result<Option<TableMetadata>> {
    let unbound = unbound_spec(metadata.current_schema(), keys, table)?;
    let current = metadata.default_partition_spec();
    let same = current.fields().len() == unbound.fields().len()
        && current
            .fields()
            .iter()
            .zip(unbound.fields())
            .all(|(a, b)| a.source_id == b.source_id && a.transform == b.transform);
    if same {
        return Ok(None);
    }
    let next = TableMetadataBuilder::new_from_metadata(metadata.clone(), Some(location.to_string()))
        .add_partition_spec(unbound)
        .and_then(|b| b.set_default_partition_spec(TableMetadataBuilder::LAST_ADDED))
        .and_then(|b| b.build())
        .map_err(|e| refused(table, &e))?;
    Ok(Some(next.metadata))
}

/// `keys` as a partition spec of a table with `schema`, each key checked against its column's
/// type. `table` names the table in messages.
pub fn unbound_spec(schema: &Schema, keys: &[PartitionKey], table: &str) -> Result<UnboundPartitionSpec> {
    let mut builder = UnboundPartitionSpec::builder();
    for k in keys {
        let field =
            schema.as_struct().fields().iter().find(|f| f.name.eq_ignore_ascii_case(&k.column)).ok_or_else(|| {
                Error::catalog(format!("Table {table} does not have a column with name \"{}\"", k.column))
            })?;
        // (the iceberg crate cannot write a UUID partition value to a manifest: Avro refuses it)
        if k.transform == Transform::Identity
            && matches!(field.field_type.as_primitive_type(), Some(iceberg::spec::PrimitiveType::Uuid))
        {
            return Err(Error::invalid(format!(
                "cannot partition table {table} by the UUID column \"{}\" itself (its values cannot be \
                 written as partition values yet): use bucket(N, {})",
                field.name, field.name
            )));
        }
        // (nor a TIMESTAMPTZ value before 1970 with a fraction of a second: the crate's rendering of
        // it panics, issue 42)
        if k.transform == Transform::Identity
            && matches!(field.field_type.as_primitive_type(), Some(iceberg::spec::PrimitiveType::Timestamptz))
        {
            return Err(Error::invalid(format!(
                "cannot partition table {table} by the TIMESTAMPTZ column \"{}\" itself (instants before 1970 \
                 cannot be written as partition values yet): use hour({}), day({}) or bucket(N, {})",
                field.name, field.name, field.name, field.name
            )));
        }
        let time_of_same_column = |o: &&PartitionKey| {
            o != &k && o.column.eq_ignore_ascii_case(&k.column) && time_rank(&o.transform).is_some()
        };
        if let (Some(_), Some(other)) = (time_rank(&k.transform), keys.iter().find(time_of_same_column)) {
            return Err(two_time_transforms(table, &field.name, &k.transform, &other.transform));
        }
        if k.transform.result_type(&field.field_type).is_err() {
            return Err(Error::invalid(format!(
                "cannot partition table {table} by {}: column \"{}\" is of type {}, which {} does not take",
                describe_key(&field.name, &k.transform),
                field.name,
                field.field_type,
                transform_name(&k.transform)
            )));
        }
        builder = builder
            .add_partition_field(field.id, field_name(&field.name, &k.transform), k.transform)
            .map_err(|e| refused(table, &e))?;
    }
    Ok(builder.build())
}

/// The iceberg crate computes time partitions in i32 hours (they wrap beyond year ~247,000) and
/// renders dates and instants through chrono (it panics beyond year 262,143, and on DuckDB's
/// infinities): instants and dates beyond these bounds have no partition value, written or
/// projected from a filter.
pub const MAX_TIME_MICROS: i64 = i32::MAX as i64 * 3_600_000_000;
pub const MAX_DATE_DAYS: i32 = 95_000_000;

/// Whether the crate can transform `value` by `t` (see [`MAX_TIME_MICROS`]).
pub fn transformable(t: &Transform, value: &iceberg::spec::Datum) -> bool {
    use iceberg::spec::PrimitiveLiteral;
    if !matches!(t, Transform::Year | Transform::Month | Transform::Day | Transform::Hour | Transform::Identity) {
        return true;
    }
    match value.literal() {
        PrimitiveLiteral::Int(days) if *value.data_type() == iceberg::spec::PrimitiveType::Date => {
            (-MAX_DATE_DAYS..=MAX_DATE_DAYS).contains(days)
        }
        PrimitiveLiteral::Long(us)
            if matches!(
                value.data_type(),
                iceberg::spec::PrimitiveType::Timestamp | iceberg::spec::PrimitiveType::Timestamptz
            ) =>
        {
            (-MAX_TIME_MICROS..=MAX_TIME_MICROS).contains(us)
        }
        _ => true,
    }
}

/// How fine a time transform is (hour 0 ... year 3), None for the others.
fn time_rank(t: &Transform) -> Option<u8> {
    match t {
        Transform::Hour => Some(0),
        Transform::Day => Some(1),
        Transform::Month => Some(2),
        Transform::Year => Some(3),
        _ => None,
    }
}

/// Two of year, month, day and hour of one column, as the statement names them. The iceberg
/// crate refuses the second as redundant (its partition spec builder, as Iceberg's Java API does:
/// one time transform per source column), and the finer one groups the rows by the coarser as
/// well, so the message offers it in place of both.
fn two_time_transforms(table: &str, column: &str, first: &Transform, second: &Transform) -> Error {
    let (finer, coarser) = if time_rank(first) < time_rank(second) { (first, second) } else { (second, first) };
    Error::invalid(format!(
        "cannot partition table {table} by both {} and {}: Iceberg takes one of year, month, day and hour per \
         column (its Java API and the iceberg crate refuse a second as redundant); {} alone partitions by {} too \
         (every {} lies within one {}): use {} in place of both",
        describe_key(column, first),
        describe_key(column, second),
        describe_key(column, finer),
        transform_name(coarser),
        transform_name(finer),
        transform_name(coarser),
        describe_key(column, finer),
    ))
}

fn refused(table: &str, e: &iceberg::Error) -> Error {
    Error::invalid(format!("cannot partition table {table} so: {}", e.message()))
}

pub(crate) fn transform_name(t: &Transform) -> &'static str {
    match t {
        Transform::Identity => "identity",
        Transform::Year => "year",
        Transform::Month => "month",
        Transform::Day => "day",
        Transform::Hour => "hour",
        Transform::Bucket(_) => "bucket",
        Transform::Truncate(_) => "truncate",
        Transform::Void => "void",
        Transform::Unknown => "unknown",
    }
}

/// One key as SET PARTITIONED BY writes it (`day(ts)`).
pub fn describe_key(column: &str, t: &Transform) -> String {
    match t {
        Transform::Identity => column.to_string(),
        Transform::Bucket(n) | Transform::Truncate(n) => format!("{}({n}, {column})", transform_name(t)),
        _ => format!("{}({column})", transform_name(t)),
    }
}

/// A spec as SET PARTITIONED BY would write it (`day(ts), bucket(16, id)`); empty: unpartitioned.
/// Columns are named as `schema` has them now (a renamed source column shows its new name).
pub fn describe(spec: &PartitionSpec, schema: &Schema) -> String {
    spec.fields()
        .iter()
        .filter(|f| f.transform != Transform::Void)
        .map(|f| {
            let column = schema.field_by_id(f.source_id).map(|c| c.name.clone()).unwrap_or_else(|| f.name.clone());
            describe_key(&column, &f.transform)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Whether a column is a source of any of the table's specs (its files keep it as partition
/// values: Iceberg readers cannot read them without it).
pub fn is_partition_source(metadata: &TableMetadata, field_id: i32) -> bool {
    metadata.partition_specs_iter().any(|s| s.fields().iter().any(|f| f.source_id == field_id))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use iceberg::spec::{NestedField, PrimitiveType, Type};

    pub(crate) fn schema() -> Schema {
        let f = |id, name: &str, t| NestedField::optional(id, name, Type::Primitive(t)).into();
        Schema::builder()
            .with_fields(vec![
                f(1, "id", PrimitiveType::Long),
                f(2, "ts", PrimitiveType::Timestamp),
                f(3, "s", PrimitiveType::String),
            ])
            .build()
            .unwrap()
    }

    pub(crate) fn spec(fields: &[(i32, &str, Transform)]) -> PartitionSpec {
        let mut b = PartitionSpec::builder(schema());
        for (source, name, t) in fields {
            b = b
                .add_unbound_field(iceberg::spec::UnboundPartitionField {
                    source_id: *source,
                    field_id: None,
                    name: name.to_string(),
                    transform: *t,
                })
                .unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn keys_parse_from_the_shims_description() {
        let keys = parse_keys(
            r#"[{"column":"ts"},{"function":{"name":"DAY","args":[{"column":"ts"}]}},
            {"function":{"name":"bucket","args":[{"constant":"16"},{"column":"id"}]}}]"#,
        )
        .unwrap();
        assert_eq!(keys[0].transform, Transform::Identity);
        assert_eq!(keys[1].transform, Transform::Day);
        assert_eq!(keys[2], PartitionKey { column: "id".into(), transform: Transform::Bucket(16) });
        let bad = parse_keys(r#"[{"function":{"name":"bucket","args":[{"column":"id"}]}}]"#).unwrap_err();
        assert!(bad.to_string().contains("positive integer and a column"), "{bad}");
        let bad = parse_keys(r#"[{"function":{"name":"week","args":[{"column":"ts"}]}}]"#).unwrap_err();
        assert!(bad.to_string().contains("unknown partition transform week"), "{bad}");
    }

    #[test]
    fn two_time_transforms_of_a_column_name_both_and_offer_the_finer() {
        let key = |column: &str, transform| PartitionKey { column: column.into(), transform };
        let keys = [key("TS", Transform::Year), key("id", Transform::Bucket(4)), key("ts", Transform::Month)];
        let err = unbound_spec(&schema(), &keys, "lake.t").unwrap_err().to_string();
        assert!(err.starts_with("cannot partition table lake.t by both year(ts) and month(ts): "), "{err}");
        assert!(err.ends_with("month(ts) alone partitions by year too (every month lies within one year): use month(ts) in place of both"), "{err}");
        let err = unbound_spec(&schema(), &[key("ts", Transform::Hour), key("ts", Transform::Day)], "t").unwrap_err();
        assert!(err.to_string().contains("use hour(ts) in place of both"), "{err}");
        // a time transform beside another kind of the same column is fine
        let spec = unbound_spec(&schema(), &[key("ts", Transform::Day), key("ts", Transform::Bucket(8))], "t").unwrap();
        assert_eq!(spec.fields().len(), 2);
    }

    #[test]
    fn specs_describe_as_sql() {
        let spec = spec(&[
            (2, "ts_day", Transform::Day),
            (1, "id_bucket", Transform::Bucket(16)),
            (3, "s", Transform::Identity),
        ]);
        assert_eq!(describe(&spec, &schema()), "day(ts), bucket(16, id), s");
    }
}
