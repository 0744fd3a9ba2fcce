//! Files without Iceberg field ids (Parquet files a user already had, adopted by
//! `skade_add_files`) are read through the table's name mapping: the property
//! `schema.name-mapping.default`, by which every Iceberg reader (PyIceberg, DuckDB's iceberg
//! extension, Spark) resolves such files, lists for each field id the column names files use for
//! it. A reader applies it only to a file that has no field ids of its own.
//!
//! skade's readers find columns by the field ids of the Parquet schema (scans, row-group
//! statistics, lookups, the key check). Rather than teach each of them names, a footer without
//! ids is given them from the mapping once it is read ([`with_field_ids`]): every reader after
//! that sees the file as it sees one skade wrote. Only top-level columns get ids (skade resolves
//! nothing deeper by id: nested values convert by position), while the property maps nested
//! fields too, as other readers expect (a struct's fields, a list's `element`, a map's `key` and
//! `value`).

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use iceberg::spec::{MappedField, NameMapping, NestedField, Schema, TableMetadata, Type, DEFAULT_SCHEMA_NAME_MAPPING};
use parquet::file::metadata::{FileMetaData, ParquetMetaData, ParquetMetaDataBuilder};
use parquet::schema::types::{SchemaDescriptor, Type as ParquetType, TypePtr};

use crate::error::{Error, Result};

/// The table property holding the mapping (Iceberg's name).
pub const PROPERTY: &str = DEFAULT_SCHEMA_NAME_MAPPING;

/// The top-level names of a table's mapping: in a file without field ids, the column of one of
/// these names is the field of its id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileNames(HashMap<String, i32>);

impl FileNames {
    /// The mapping of `metadata`'s table (None: it has none, the case of every table that never
    /// adopted a file).
    pub fn of(metadata: &TableMetadata) -> Result<Option<Arc<FileNames>>> {
        let Some(json) = metadata.properties().get(PROPERTY) else {
            return Ok(None);
        };
        let mut names = HashMap::new();
        for field in parse(json)?.fields() {
            if let Some(id) = field.field_id() {
                for name in field.names() {
                    names.insert(name.clone(), id);
                }
            }
        }
        Ok(Some(Arc::new(FileNames(names))))
    }

    /// `names` and `more` (a transaction's adopted files not committed yet: file column name ->
    /// field id). None when both are empty.
    pub fn with(names: Option<&FileNames>, more: &BTreeMap<String, i32>) -> Option<Arc<FileNames>> {
        if more.is_empty() {
            return names.map(|n| Arc::new(n.clone()));
        }
        let mut all = names.cloned().unwrap_or_default();
        all.0.extend(more.iter().map(|(n, id)| (n.clone(), *id)));
        Some(Arc::new(all))
    }

    pub fn id(&self, name: &str) -> Option<i32> {
        self.0.get(name).copied()
    }
}

fn parse(json: &str) -> Result<NameMapping> {
    serde_json::from_str(json)
        .map_err(|e| Error::corrupt(format!("the table property {PROPERTY} is not an Iceberg name mapping: {e}")))
}

/// The property's value once files also name columns as `names` does (file column name ->
/// top-level field id): `existing` (its value, if any) with each such name added to its field's
/// entry, and an entry for each field it lacked, the field's nested fields mapped by their names
/// in `schema`. A name already mapped to another field is refused: files adopted earlier use it
/// for that field (a column renamed or dropped since), and no reader could tell the two apart.
pub fn merged(existing: Option<&str>, schema: &Schema, names: &BTreeMap<String, i32>) -> Result<String> {
    let mut fields: Vec<MappedField> = match existing {
        Some(json) => parse(json)?.fields().to_vec(),
        None => vec![],
    };
    for (name, &id) in names {
        if fields.iter().any(|f| f.field_id() != Some(id) && f.names().contains(name)) {
            return Err(Error::invalid(format!(
                "column {name}: files adopted earlier name another column {name} (renamed or dropped since), \
                 and a reader could not tell the two apart; rename the column in the files to adopt"
            )));
        }
        match fields.iter_mut().find(|f| f.field_id() == Some(id)) {
            Some(f) if f.names().contains(name) => {}
            Some(f) => {
                let mut all = f.names().to_vec();
                all.push(name.clone());
                let children = f.fields().iter().map(|c| c.as_ref().clone()).collect();
                *f = MappedField::new(Some(id), all, children);
            }
            None => {
                let children = schema.field_by_id(id).map(|f| nested(&f.field_type)).unwrap_or_default();
                fields.push(MappedField::new(Some(id), vec![name.clone()], children));
            }
        }
    }
    Ok(serde_json::to_string(&NameMapping::new(fields))?)
}

/// The mapping of a type's nested fields by their names in the schema (as PyIceberg's
/// `create_mapping_from_schema` writes it).
fn nested(ty: &Type) -> Vec<MappedField> {
    let field =
        |f: &NestedField, name: &str| MappedField::new(Some(f.id), vec![name.to_string()], nested(&f.field_type));
    match ty {
        Type::Primitive(_) => vec![],
        Type::Struct(s) => s.fields().iter().map(|f| field(f.as_ref(), &f.name)).collect(),
        Type::List(l) => vec![field(l.element_field.as_ref(), "element")],
        Type::Map(m) => vec![field(m.key_field.as_ref(), "key"), field(m.value_field.as_ref(), "value")],
    }
}

/// The field ids `names` gives the top-level columns of a Parquet schema, in its order (None:
/// the file has field ids of its own, which readers use instead, or no column is mapped).
pub fn assigned_ids(descr: &SchemaDescriptor, names: &FileNames) -> Option<Vec<Option<i32>>> {
    let fields = descr.root_schema().get_fields();
    if fields.iter().any(|f| f.get_basic_info().has_id()) {
        return None;
    }
    let ids: Vec<Option<i32>> = fields.iter().map(|f| names.id(f.name())).collect();
    ids.iter().any(Option::is_some).then_some(ids)
}

/// `meta` with `ids` (see [`assigned_ids`]) as the field ids of its top-level columns. Only the
/// file's schema changes: row groups, statistics and page indexes are the file's.
pub fn with_field_ids(meta: &ParquetMetaData, ids: &[Option<i32>]) -> Result<ParquetMetaData> {
    let file = meta.file_metadata();
    let root = file.schema_descr().root_schema();
    let fields = root
        .get_fields()
        .iter()
        .zip(ids)
        .map(|(f, id)| match id {
            Some(id) => with_id(f, *id),
            None => Ok(f.clone()),
        })
        .collect::<Result<Vec<_>>>()?;
    let root = ParquetType::group_type_builder(root.name()).with_fields(fields).build()?;
    let file = FileMetaData::new(
        file.version(),
        file.num_rows(),
        file.created_by().map(str::to_string),
        file.key_value_metadata().cloned(),
        Arc::new(SchemaDescriptor::new(Arc::new(root))),
        file.column_orders().cloned(),
    );
    let mut old = meta.clone().into_builder();
    let (row_groups, column_index, offset_index) =
        (old.take_row_groups(), old.take_column_index(), old.take_offset_index());
    Ok(ParquetMetaDataBuilder::new(file)
        .set_row_groups(row_groups)
        .set_column_index(column_index)
        .set_offset_index(offset_index)
        .build())
}

/// A column's type with field id `id`, all else as the file declares it. (The builders check
/// what the file's own schema passed when it was read.)
fn with_id(t: &TypePtr, id: i32) -> Result<TypePtr> {
    let info = t.get_basic_info();
    let built = match t.as_ref() {
        ParquetType::PrimitiveType { physical_type, type_length, scale, precision, .. } => {
            ParquetType::primitive_type_builder(info.name(), *physical_type)
                .with_repetition(info.repetition())
                .with_converted_type(info.converted_type())
                .with_logical_type(info.logical_type_ref().cloned())
                .with_length(*type_length)
                .with_precision(*precision)
                .with_scale(*scale)
                .with_id(Some(id))
                .build()
        }
        ParquetType::GroupType { fields, .. } => {
            let group = ParquetType::group_type_builder(info.name())
                .with_converted_type(info.converted_type())
                .with_logical_type(info.logical_type_ref().cloned())
                .with_fields(fields.clone())
                .with_id(Some(id));
            match info.has_repetition() {
                true => group.with_repetition(info.repetition()).build(),
                false => group.build(),
            }
        }
    };
    Ok(Arc::new(built.map_err(|e| Error::corrupt(format!("column {}: {e}", info.name())))?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use iceberg::spec::{ListType, PrimitiveType, StructType};
    use parquet::basic::{LogicalType, Repetition, Type as Physical};

    fn schema() -> Schema {
        let element = NestedField::list_element(4, Type::Primitive(PrimitiveType::Long), false);
        let inner = StructType::new(vec![NestedField::optional(6, "a", Type::Primitive(PrimitiveType::String)).into()]);
        Schema::builder()
            .with_fields(vec![
                NestedField::required(1, "id", Type::Primitive(PrimitiveType::Long)).into(),
                NestedField::optional(2, "name", Type::Primitive(PrimitiveType::String)).into(),
                NestedField::optional(3, "l", Type::List(ListType::new(element.into()))).into(),
                NestedField::optional(5, "s", Type::Struct(inner)).into(),
            ])
            .build()
            .unwrap()
    }

    #[test]
    fn a_mapping_gains_the_files_names_and_nested_fields() {
        let schema = schema();
        let names = BTreeMap::from([("ID".to_string(), 1), ("l".to_string(), 3), ("s".to_string(), 5)]);
        let json = merged(None, &schema, &names).unwrap();
        let mapping: NameMapping = serde_json::from_str(&json).unwrap();
        let l = mapping.fields().iter().find(|f| f.field_id() == Some(3)).unwrap();
        assert_eq!(l.fields()[0].names(), ["element"]);
        assert_eq!(l.fields()[0].field_id(), Some(4));
        let s = mapping.fields().iter().find(|f| f.field_id() == Some(5)).unwrap();
        assert_eq!((s.fields()[0].names(), s.fields()[0].field_id()), (&["a".to_string()][..], Some(6)));

        // a second adoption adds its spelling to the same entry, and keeps what was there
        let again = merged(Some(&json), &schema, &BTreeMap::from([("id".to_string(), 1)])).unwrap();
        let mapping: NameMapping = serde_json::from_str(&again).unwrap();
        let id = mapping.fields().iter().find(|f| f.field_id() == Some(1)).unwrap();
        assert_eq!(id.names(), ["ID".to_string(), "id".to_string()]);
        assert_eq!(mapping.fields().len(), 3);

        // a name mapped to another field is refused, naming the column
        let err = merged(Some(&again), &schema, &BTreeMap::from([("id".to_string(), 2)])).unwrap_err();
        assert!(err.message.contains("column id"), "{}", err.message);
    }

    #[test]
    fn file_names_come_from_the_property_and_a_transactions_own() {
        let json = merged(None, &schema(), &BTreeMap::from([("id".to_string(), 1)])).unwrap();
        let mapping: NameMapping = serde_json::from_str(&json).unwrap();
        let names = FileNames(mapping.fields().iter().flat_map(|f| f.names().iter().map(|n| (n.clone(), 1))).collect());
        assert_eq!(names.id("id"), Some(1));
        let both = FileNames::with(Some(&names), &BTreeMap::from([("name".to_string(), 2)])).unwrap();
        assert_eq!((both.id("id"), both.id("name"), both.id("other")), (Some(1), Some(2), None));
        assert!(FileNames::with(None, &BTreeMap::new()).is_none());
    }

    #[test]
    fn a_footer_without_ids_gets_them_and_keeps_its_types() {
        let int = ParquetType::primitive_type_builder("id", Physical::INT64)
            .with_repetition(Repetition::OPTIONAL)
            .with_logical_type(Some(LogicalType::Integer { bit_width: 64, is_signed: true }))
            .build()
            .unwrap();
        let text = ParquetType::primitive_type_builder("extra", Physical::BYTE_ARRAY)
            .with_repetition(Repetition::OPTIONAL)
            .with_logical_type(Some(LogicalType::String))
            .build()
            .unwrap();
        let root =
            ParquetType::group_type_builder("duckdb_schema").with_fields(vec![Arc::new(int), Arc::new(text)]).build();
        let descr = Arc::new(SchemaDescriptor::new(Arc::new(root.unwrap())));
        let file = FileMetaData::new(2, 0, None, None, descr.clone(), None);
        let meta = ParquetMetaDataBuilder::new(file).build();
        let names = FileNames(HashMap::from([("id".to_string(), 7)]));
        let ids = assigned_ids(&descr, &names).unwrap();
        assert_eq!(ids, vec![Some(7), None]);
        let mapped = with_field_ids(&meta, &ids).unwrap();
        let mapped_descr = mapped.file_metadata().schema_descr();
        let fields = mapped_descr.root_schema().get_fields();
        assert_eq!(fields[0].get_basic_info().id(), 7);
        assert!(!fields[1].get_basic_info().has_id());
        assert_eq!(mapped_descr.column(0).logical_type_ref(), descr.column(0).logical_type_ref());
        // a file with ids of its own is read by them, never by names
        assert!(assigned_ids(mapped_descr, &names).is_none());
    }
}
