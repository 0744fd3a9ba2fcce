//! A column's Arrow array reshaped into another type of the same column, field by field, down
//! through its STRUCTs, LISTs and MAPs. A STRUCT's fields are matched by their Iceberg field ids
//! (the `PARQUET:field_id` of files and of table schemas), by position where the array carries no
//! ids (DuckDB's batches, in the table's order of fields); a field the array lacks reads NULL.
//! Files written before a nested ADD, DROP or RENAME COLUMN hold other fields, or the same ones
//! under old names or in other places: Arrow's own struct cast matches by name, else by position,
//! which would hand one field's values to another (a field dropped and another of its type added).
//! What becomes of each value that is not a STRUCT, LIST or MAP (a cast, a kept DuckDB type's
//! conversion) is the caller's `leaf`.

use std::sync::Arc;

use arrow::array::{new_null_array, Array, ArrayRef, AsArray, ListArray, MapArray, StructArray};
use arrow::datatypes::{DataType, Field, Fields};

use crate::error::Result;

const FIELD_ID: &str = "PARQUET:field_id";

/// Converts one value that is not a STRUCT, LIST or MAP (or one whose kind changed) to `target`.
pub type Leaf<'a> = &'a dyn Fn(&ArrayRef, &Field) -> Result<ArrayRef>;

/// `array` as `target`'s type; `leaf` is called only where the types differ.
pub fn reshape(array: &ArrayRef, target: &Field, leaf: Leaf) -> Result<ArrayRef> {
    if array.data_type() == target.data_type() {
        return Ok(array.clone());
    }
    match (array.data_type(), target.data_type()) {
        (DataType::Struct(from), DataType::Struct(to)) => {
            let rows = array.as_struct();
            let columns = to
                .iter()
                .enumerate()
                .map(|(at, field)| match source_of(from, to, at) {
                    Some(i) => reshape(rows.column(i), field, leaf),
                    None => Ok(new_null_array(field.data_type(), rows.len())),
                })
                .collect::<Result<Vec<_>>>()?;
            Ok(Arc::new(StructArray::try_new(to.clone(), columns, rows.nulls().cloned())?))
        }
        (DataType::List(_), DataType::List(element)) => {
            let lists = array.as_list::<i32>();
            let values = reshape(lists.values(), element, leaf)?;
            Ok(Arc::new(ListArray::try_new(element.clone(), lists.offsets().clone(), values, lists.nulls().cloned())?))
        }
        // (other list layouts as a plain list first: their offsets differ, their elements do not)
        (DataType::LargeList(element) | DataType::FixedSizeList(element, _), DataType::List(_)) => {
            let plain = arrow::compute::cast(array, &DataType::List(element.clone()))?;
            reshape(&plain, target, leaf)
        }
        (DataType::Map(_, _), DataType::Map(entries, sorted)) => {
            let maps = array.as_map();
            let pairs: ArrayRef = Arc::new(maps.entries().clone());
            let pairs = reshape(&pairs, entries, leaf)?;
            let pairs = pairs.as_struct().clone();
            Ok(Arc::new(MapArray::try_new(
                entries.clone(),
                maps.offsets().clone(),
                pairs,
                maps.nulls().cloned(),
                *sorted,
            )?))
        }
        _ => leaf(array, target),
    }
}

/// Whether `ty` is one [`reshape`] goes into.
pub fn is_nested(ty: &DataType) -> bool {
    matches!(
        ty,
        DataType::Struct(_)
            | DataType::List(_)
            | DataType::LargeList(_)
            | DataType::FixedSizeList(_, _)
            | DataType::Map(_, _)
    )
}

/// The field of `from` that holds field `at` of `to`: the one of its field id when `from` has
/// ids; else the one in its place when both have as many fields; else the one of its name.
fn source_of(from: &Fields, to: &Fields, at: usize) -> Option<usize> {
    let id = |f: &Field| f.metadata().get(FIELD_ID).cloned();
    let target = &to[at];
    match id(target) {
        Some(want) if from.iter().any(|f| id(f).is_some()) => from.iter().position(|f| id(f).as_ref() == Some(&want)),
        _ if from.len() == to.len() => Some(at),
        _ => from.iter().position(|f| f.name() == target.name()),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use arrow::array::{Int32Array, Int64Array, StringArray};
    use arrow::datatypes::Int32Type;

    use super::*;

    fn with_id(f: Field, id: i32) -> Field {
        f.with_metadata(HashMap::from([(FIELD_ID.to_string(), id.to_string())]))
    }

    fn cast_leaf(a: &ArrayRef, f: &Field) -> Result<ArrayRef> {
        Ok(arrow::compute::cast(a, f.data_type())?)
    }

    /// A file's struct {a (1), b (2)} read as the table's {b (2) renamed c, d (3) added, a (1)
    /// promoted}: each by its id, wherever it stands and whatever its name; the new one NULL.
    #[test]
    fn struct_fields_are_found_by_id() {
        let file = StructArray::from(vec![
            (
                Arc::new(with_id(Field::new("a", DataType::Int32, true), 1)),
                Arc::new(Int32Array::from(vec![1, 2])) as ArrayRef,
            ),
            (
                Arc::new(with_id(Field::new("b", DataType::Int32, true), 2)),
                Arc::new(Int32Array::from(vec![10, 20])) as ArrayRef,
            ),
        ]);
        let to = Fields::from(vec![
            with_id(Field::new("c", DataType::Int32, true), 2),
            with_id(Field::new("d", DataType::Int32, true), 3),
            with_id(Field::new("a", DataType::Int64, true), 1),
        ]);
        let target = Field::new("s", DataType::Struct(to), true);
        let out = reshape(&(Arc::new(file) as ArrayRef), &target, &cast_leaf).unwrap();
        let out = out.as_struct();
        assert_eq!(out.column(0).as_primitive::<Int32Type>().values(), &[10, 20]);
        assert_eq!(out.column(1).null_count(), 2);
        assert_eq!(out.column(2).as_any().downcast_ref::<Int64Array>().unwrap().values(), &[1, 2]);
    }

    /// A field dropped and another of its type added in its place: same types, same count, but
    /// the old values never read as the new field (Arrow's cast would hand them over).
    #[test]
    fn a_field_added_in_a_dropped_ones_place_is_null() {
        let file = StructArray::from(vec![(
            Arc::new(with_id(Field::new("x", DataType::Utf8, true), 5)),
            Arc::new(StringArray::from(vec!["old"])) as ArrayRef,
        )]);
        let target =
            Field::new("s", DataType::Struct(vec![with_id(Field::new("x", DataType::Utf8, true), 6)].into()), true);
        let out = reshape(&(Arc::new(file) as ArrayRef), &target, &cast_leaf).unwrap();
        assert_eq!(out.as_struct().column(0).null_count(), 1);
    }

    /// DuckDB's batches carry no ids: fields in the table's order, whatever their names; lists'
    /// elements and maps' values converted too.
    #[test]
    fn without_ids_fields_match_by_place() {
        let inner = StructArray::from(vec![(
            Arc::new(Field::new("anything", DataType::Int8, true)),
            Arc::new(arrow::array::Int8Array::from(vec![-1, 7])) as ArrayRef,
        )]);
        let offsets = arrow::buffer::OffsetBuffer::from_lengths([2]);
        let list =
            ListArray::new(Arc::new(Field::new("l", inner.data_type().clone(), true)), offsets, Arc::new(inner), None);
        let element = with_id(
            Field::new(
                "element",
                DataType::Struct(vec![with_id(Field::new("t", DataType::Int32, true), 2)].into()),
                true,
            ),
            3,
        );
        let target = Field::new("l", DataType::List(Arc::new(element)), true);
        let out = reshape(&(Arc::new(list) as ArrayRef), &target, &cast_leaf).unwrap();
        assert_eq!(out.data_type(), target.data_type());
        let values = out.as_list::<i32>().values().as_struct().column(0).as_primitive::<Int32Type>().values().to_vec();
        assert_eq!(values, vec![-1, 7]);
    }
}
