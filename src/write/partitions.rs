//! A partitioned table's writes (issue 24): each chunk's rows grouped by their partition values
//! in one pass (the iceberg crate's transforms, hashed in Arrow's row format), gathered per
//! partition in Arrow, and written to one file stream per partition. Memory is bounded: at most
//! [`MAX_OPEN_PARTITIONS`] partitions open (the least recently written closes: its rows so far are
//! a file of their own), [`PARTITION_BUFFER_BYTES`] of gathered rows, and a row group per open
//! Parquet writer; on a table with a sort order, [`SORTED_RUN_BYTES`] of rows held to be sorted
//! across all partitions (the largest ends its run, a file, when they are reached). Rows whose
//! partition value the crate cannot compute are refused.

use std::collections::HashMap;

use arrow::array::{Array, ArrayRef, AsArray, RecordBatch, StructArray, UInt32Array};
use arrow::compute::{concat_batches, take_record_batch};
use arrow::datatypes::{DataType, Date32Type, Fields, Int32Type, Int64Type, TimeUnit, TimestampMicrosecondType};
use arrow::row::{RowConverter, SortField};
use iceberg::arrow::{arrow_struct_to_literal, type_to_arrow_type};
use iceberg::spec::{DataFile, Literal, PartitionKey, PartitionSpecRef, SchemaRef, StructType, Transform, Type};
use iceberg::transform::{create_transform_function, BoxedTransformFunction};

use super::file_stream::{FileOrder, FileStream, InnerBuilder};
use super::sorted_runs::SORTED_RUN_BYTES;
use crate::error::{Error, Result};
use crate::format::partition::describe_key;

/// At most this many partitions' files are open at once.
pub const MAX_OPEN_PARTITIONS: usize = 128;
/// Rows of a partition are gathered in Arrow until this many (a DuckDB chunk spread over many
/// partitions would otherwise reach each writer a few rows at a time)...
const PARTITION_BATCH_ROWS: usize = 8192;
/// ... or until all partitions' gathered rows reach this many bytes (the largest goes first).
const PARTITION_BUFFER_BYTES: usize = 64 << 20;

use crate::format::partition::{MAX_DATE_DAYS, MAX_TIME_MICROS};

pub struct Partitions {
    builder: InnerBuilder,
    /// The partition values' type, in Iceberg and as Arrow fields.
    partition_type: StructType,
    partition_fields: Fields,
    transforms: Vec<BoxedTransformFunction>,
    spec: PartitionSpecRef,
    schema: SchemaRef,
    converter: RowConverter,
    order: FileOrder,
    table_name: String,
    /// Open partitions by their values (in the converter's row format).
    open: HashMap<Vec<u8>, Open>,
    writes: u64,
    gathered_bytes: usize,
    closed: Vec<DataFile>,
}

struct Open {
    stream: FileStream,
    /// The write count when it was last written.
    used: u64,
    gathered: Vec<RecordBatch>,
    rows: usize,
    bytes: usize,
}

impl Partitions {
    pub fn new(
        builder: InnerBuilder,
        schema: SchemaRef,
        spec: PartitionSpecRef,
        order: FileOrder,
        table_name: &str,
    ) -> Result<Self> {
        let partition_type = spec.partition_type(&schema)?;
        let transforms = spec
            .fields()
            .iter()
            .map(|f| create_transform_function(&f.transform))
            .collect::<iceberg::Result<Vec<_>>>()?;
        let DataType::Struct(partition_fields) = type_to_arrow_type(&Type::Struct(partition_type.clone()))? else {
            return Err(Error::internal("partition values are not a struct"));
        };
        let converter =
            RowConverter::new(partition_fields.iter().map(|f| SortField::new(f.data_type().clone())).collect())?;
        Ok(Partitions {
            builder,
            partition_type,
            partition_fields,
            transforms,
            spec,
            schema,
            converter,
            order,
            table_name: table_name.to_string(),
            open: HashMap::new(),
            writes: 0,
            gathered_bytes: 0,
            closed: vec![],
        })
    }

    /// Rows of the table, in its columns.
    pub fn write(&mut self, batch: &RecordBatch) -> Result<()> {
        self.check_transformable(batch)?;
        let values = self.values(batch)?;
        let values = &values;
        let rows = self.converter.convert_columns(values.columns())?;
        let mut groups: HashMap<&[u8], Vec<u32>> = HashMap::new();
        for (i, row) in rows.iter().enumerate() {
            groups.entry(row.data()).or_default().push(i as u32);
        }
        for (key, indexes) in groups {
            let first = indexes[0] as usize;
            let rows = take_record_batch(batch, &UInt32Array::from(indexes))?;
            self.gather(key, values, first, rows)?;
        }
        while self.gathered_bytes > PARTITION_BUFFER_BYTES {
            let largest = self.open.values_mut().max_by_key(|o| o.bytes);
            match largest {
                Some(open) => self.gathered_bytes -= open.flush()?,
                None => break,
            }
        }
        if let FileOrder::Sorted { .. } = self.order {
            // (each partition's stream holds a run of its own: bounded together, not each)
            while self.open.values().map(|o| o.stream.held_bytes()).sum::<usize>() > SORTED_RUN_BYTES {
                match self.open.values_mut().max_by_key(|o| o.stream.held_bytes()) {
                    Some(open) => open.stream.end_run()?,
                    None => break,
                }
            }
        }
        Ok(())
    }

    /// Adds `rows` to the partition whose values encode as `key` (row `at` of `values`).
    fn gather(&mut self, key: &[u8], values: &StructArray, at: usize, rows: RecordBatch) -> Result<()> {
        self.writes += 1;
        if !self.open.contains_key(key) {
            if self.open.len() >= MAX_OPEN_PARTITIONS {
                self.close_least_recent()?;
            }
            let value: ArrayRef = std::sync::Arc::new(values.slice(at, 1));
            let Some(Literal::Struct(data)) =
                arrow_struct_to_literal(&value, &self.partition_type)?.into_iter().next().flatten()
            else {
                return Err(Error::internal("partition values are not a struct"));
            };
            let partition = PartitionKey::new(self.spec.as_ref().clone(), self.schema.clone(), data);
            let stream = FileStream::new(&self.builder, Some(partition), &self.order);
            self.open.insert(key.to_vec(), Open { stream, used: 0, gathered: vec![], rows: 0, bytes: 0 });
        }
        let open = self.open.get_mut(key).ok_or_else(|| Error::internal("partition not open"))?;
        open.used = self.writes;
        open.rows += rows.num_rows();
        open.bytes += rows.get_array_memory_size();
        self.gathered_bytes += rows.get_array_memory_size();
        open.gathered.push(rows);
        if open.rows >= PARTITION_BATCH_ROWS {
            self.gathered_bytes -= open.flush()?;
        }
        Ok(())
    }

    fn close_least_recent(&mut self) -> Result<()> {
        let oldest = self.open.iter().min_by_key(|(_, o)| o.used).map(|(k, _)| k.clone());
        if let Some(open) = oldest.and_then(|k| self.open.remove(&k)) {
            self.gathered_bytes -= open.bytes;
            self.closed.extend(open.finish()?);
        }
        Ok(())
    }

    /// The partition values of `batch`'s rows: each spec field's transform of its source column.
    /// (The iceberg crate's calculator does the same, but its truncate has no case for LargeBinary,
    /// the Arrow type of skade's binary columns, so a BLOB column partitioned by truncate could
    /// not be written: such a column goes to truncate as Binary, and every result is cast to the
    /// partition field's Arrow type.)
    fn values(&self, batch: &RecordBatch) -> Result<StructArray> {
        let fields = &self.partition_fields;
        let columns = self.schema.as_struct().fields();
        let mut values = Vec::with_capacity(fields.len());
        for ((spec_field, field), transform) in self.spec.fields().iter().zip(fields).zip(&self.transforms) {
            let i = columns.iter().position(|f| f.id == spec_field.source_id).ok_or_else(|| {
                Error::internal(format!("partition source field {} is no column", spec_field.source_id))
            })?;
            let mut source = batch.column(i).clone();
            if matches!(spec_field.transform, Transform::Truncate(_)) && source.data_type() == &DataType::LargeBinary {
                source = arrow::compute::cast(&source, &DataType::Binary)?;
            }
            let mut value = transform.transform(source)?;
            if value.data_type() != field.data_type() {
                value = arrow::compute::cast(&value, field.data_type())?;
            }
            values.push(value);
        }
        Ok(StructArray::try_new(fields.clone(), values, None)?)
    }

    /// Every file written, once the open partitions are closed.
    pub fn finish(mut self) -> Result<Vec<DataFile>> {
        let mut open: Vec<_> = self.open.drain().map(|(_, o)| o).collect();
        open.sort_by_key(|o| o.used);
        for o in open {
            self.closed.extend(o.finish()?);
        }
        Ok(self.closed)
    }

    /// Refuses rows whose partition value the crate would get wrong (see [`MAX_TIME_MICROS`]; its
    /// truncate wraps below an integer type's minimum plus the width), naming the column.
    fn check_transformable(&self, batch: &RecordBatch) -> Result<()> {
        for field in self.spec.fields() {
            let Some(i) = self.schema.as_struct().fields().iter().position(|f| f.id == field.source_id) else {
                continue;
            };
            let column = batch.column(i);
            // (identity too: the crate renders an identity value of a date or an instant through
            // chrono, which panics beyond year 262,143 and on the infinities)
            let time = matches!(
                field.transform,
                Transform::Year | Transform::Month | Transform::Day | Transform::Hour | Transform::Identity
            );
            let fits = match (field.transform, column.data_type()) {
                (_, DataType::Timestamp(TimeUnit::Microsecond, _)) if time => {
                    let a = column.as_primitive::<TimestampMicrosecondType>();
                    within(arrow::compute::min(a), arrow::compute::max(a), -MAX_TIME_MICROS, MAX_TIME_MICROS)
                }
                (_, DataType::Date32) if time => {
                    let a = column.as_primitive::<Date32Type>();
                    within(arrow::compute::min(a), arrow::compute::max(a), -MAX_DATE_DAYS, MAX_DATE_DAYS)
                }
                (Transform::Truncate(w), DataType::Int32) => {
                    let a = column.as_primitive::<Int32Type>();
                    arrow::compute::min(a).is_none_or(|m| m >= i32::MIN.saturating_add(w as i32))
                }
                // (a negative decimal truncates downward, maybe past the column's precision: the
                // crate fails writing such a value)
                (Transform::Truncate(w), DataType::Decimal128(p, _)) => {
                    let a = column.as_primitive::<arrow::datatypes::Decimal128Type>();
                    let limit = 10i128.checked_pow(*p as u32).map(|m| -(m - 1)).unwrap_or(i128::MIN);
                    arrow::compute::min(a).is_none_or(|m| {
                        let w = w as i128;
                        m.checked_sub(m.rem_euclid(w)).is_some_and(|t| t >= limit)
                    })
                }
                (Transform::Truncate(w), DataType::Int64) => {
                    let a = column.as_primitive::<Int64Type>();
                    arrow::compute::min(a).is_none_or(|m| m >= i64::MIN + w as i64)
                }
                _ => true,
            };
            if !fits {
                let name = &self.schema.as_struct().fields()[i].name;
                return Err(Error::invalid(format!(
                    "cannot write a row of table {} partitioned by {}: a value of column \"{name}\" is \
                     outside the range that transform takes (an infinity, a year beyond about ±247,000, \
                     an integer at its type's minimum, or a negative decimal whose truncation needs more \
                     digits than the column has)",
                    self.table_name,
                    describe_key(name, &field.transform),
                )));
            }
        }
        Ok(())
    }
}

fn within<T: PartialOrd>(min: Option<T>, max: Option<T>, low: T, high: T) -> bool {
    min.is_none_or(|m| m >= low) && max.is_none_or(|m| m <= high)
}

impl Open {
    /// Hands the gathered rows to the partition's writer; returns the bytes they held.
    fn flush(&mut self) -> Result<usize> {
        let gathered = std::mem::take(&mut self.gathered);
        if let Some(first) = gathered.first() {
            self.stream.write(concat_batches(&first.schema(), &gathered)?)?;
        }
        self.rows = 0;
        Ok(std::mem::take(&mut self.bytes))
    }

    fn finish(mut self) -> Result<Vec<DataFile>> {
        self.flush()?;
        self.stream.finish()
    }
}
