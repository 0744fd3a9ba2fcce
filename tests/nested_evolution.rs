//! Nested-field evolution and kept types inside nested columns, through the core's whole path:
//! rows written as DuckDB sends them, ALTERs of fields inside a STRUCT, and reads of the files
//! written before (by field id) in the DuckDB types kept (issue 43, items 6 and 7).

mod common;

use arrow::array::{Array, Int8Array, ListArray};
use common::*;
use skade::format::evolve::SchemaChange;

/// `s STRUCT(a TINYINT, b VARCHAR)`, `l USMALLINT[]`, `j JSON` as DuckDB exports them.
fn duckdb_columns() -> Schema {
    let json = Field::new("j", DataType::Utf8, true).with_metadata(
        [
            ("ARROW:extension:name".to_string(), "arrow.json".to_string()),
            ("ARROW:extension:metadata".to_string(), String::new()),
        ]
        .into(),
    );
    Schema::new(vec![
        Field::new("id", DataType::Int64, true),
        Field::new_struct(
            "s",
            vec![Field::new("a", DataType::Int8, true), Field::new("b", DataType::Utf8, true)],
            true,
        ),
        Field::new_list("l", Field::new("l", DataType::UInt16, true), true),
        json,
    ])
}

fn rows(schema: &Schema) -> StructArray {
    let Schema { fields, .. } = schema;
    let DataType::Struct(s_fields) = fields[1].data_type().clone() else { panic!() };
    let s = StructArray::new(
        s_fields,
        vec![Arc::new(Int8Array::from(vec![-128, 127])) as ArrayRef, Arc::new(StringArray::from(vec!["x", "y"]))],
        None,
    );
    let DataType::List(element) = fields[2].data_type().clone() else { panic!() };
    let l = ListArray::new(
        element,
        arrow::buffer::OffsetBuffer::from_lengths([2, 0]),
        Arc::new(arrow::array::UInt16Array::from(vec![0, 65535])),
        None,
    );
    let columns: Vec<ArrayRef> = vec![
        Arc::new(Int64Array::from(vec![1, 2])),
        Arc::new(s),
        Arc::new(l),
        Arc::new(StringArray::from(vec![r#"{"k": 1}"#, "[]"])),
    ];
    StructArray::new(fields.clone(), columns, None)
}

/// Every row of `main.t`, as they leave for DuckDB (kept types applied).
fn read(catalog: &Catalog) -> RecordBatch {
    let txn = catalog.begin();
    let table = txn.table("main", "t").unwrap().unwrap();
    let n = table.metadata.current_schema().as_struct().fields().len();
    let plan = txn.scan(&table, (0..n).collect(), None, false).unwrap();
    let batches: Vec<RecordBatch> =
        (0..plan.task_count()).flat_map(|t| plan.open(t).unwrap()).map(|b| b.unwrap()).collect();
    let facing = table.facing().unwrap();
    let schema = facing.schema(&batches[0].schema());
    let batches: Vec<RecordBatch> = batches.into_iter().map(|b| facing.batch(b, &schema).unwrap()).collect();
    arrow::compute::concat_batches(&schema, &batches).unwrap()
}

fn alter(catalog: &Catalog, change: SchemaChange) {
    let txn = catalog.begin();
    assert!(txn.alter_table("main", "t", &change).unwrap());
    txn.commit().unwrap();
}

fn path(p: &str) -> Vec<String> {
    p.split('.').map(str::to_string).collect()
}

#[test]
fn nested_fields_evolve_by_id_and_keep_their_duckdb_types() {
    let dir = TestDir::new();
    let catalog = open(&dir.path().join("lake.skade"));
    let columns = duckdb_columns();
    let types = ["BIGINT", "STRUCT(a TINYINT, b VARCHAR)", "USMALLINT[]", "JSON"].map(str::to_string);
    let txn = catalog.begin();
    let uuid = txn
        .create_table("main", "t", &columns, &types, &[], &[], &[], &[], OnConflict::Error)
        .unwrap()
        .unwrap()
        .record
        .uuid
        .clone();
    let mut w = txn.writer(&uuid).unwrap();
    w.write(&rows(&columns)).unwrap();
    txn.stage_files(&uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(&uuid).unwrap();
    txn.commit().unwrap();

    // the kept types come back, nested ones and JSON included
    let batch = read(&catalog);
    let schema = batch.schema();
    let s = batch.column(1).as_struct();
    assert_eq!(s.column(0).data_type(), &DataType::Int8);
    assert_eq!(s.column(0).as_primitive::<arrow::datatypes::Int8Type>().values(), &[-128, 127]);
    let l = batch.column(2).as_list::<i32>();
    assert_eq!(l.values().data_type(), &DataType::UInt16);
    assert_eq!(schema.field(3).metadata().get("ARROW:extension:name").map(String::as_str), Some("arrow.json"));
    assert_eq!(batch.column(3).as_string::<i32>().value(0), r#"{"k": 1}"#);

    // s.b renamed, s.a dropped and added again, s.c added, s.a promoted: the old file read by id
    alter(&catalog, SchemaChange::RenameColumn { path: path("s.b"), to: "label".into() });
    alter(&catalog, SchemaChange::DropColumn { path: path("s.a"), if_exists: false });
    let field = |name: &str, ty: DataType| Field::new(name, ty, true);
    let add = |name: &str, ty: DataType, duckdb_type: &str| SchemaChange::AddColumn {
        parent: path("s"),
        field: field(name, ty),
        duckdb_type: duckdb_type.into(),
        if_not_exists: false,
        default: None,
    };
    alter(&catalog, add("a", DataType::Int8, "TINYINT"));
    alter(&catalog, add("c", DataType::Int32, "INTEGER"));
    alter(
        &catalog,
        SchemaChange::ChangeType {
            path: path("s.a"),
            field: field("a", DataType::Int16),
            duckdb_type: "SMALLINT".into(),
        },
    );
    alter(
        &catalog,
        SchemaChange::ChangeType {
            path: path("s.c"),
            field: field("c", DataType::Int64),
            duckdb_type: "BIGINT".into(),
        },
    );
    let batch = read(&catalog);
    let s = batch.column(1).as_struct();
    let names: Vec<&str> = s.fields().iter().map(|f| f.name().as_str()).collect();
    assert_eq!(names, ["label", "a", "c"]);
    assert_eq!(s.column(0).as_string::<i32>().value(1), "y", "a renamed field keeps its values");
    assert_eq!(s.column(1).data_type(), &DataType::Int16);
    assert_eq!(s.column(1).null_count(), 2, "a field dropped and added again is new: NULL in the old file");
    assert_eq!(s.column(2).data_type(), &DataType::Int64);
    assert_eq!(s.column(2).null_count(), 2);

    // a new row in the new shape reads beside the old ones
    let now = read(&catalog).schema(); // (the columns as DuckDB has them, and sends them)
    let txn = catalog.begin();
    let DataType::Struct(s_fields) = now.field(1).data_type().clone() else { panic!() };
    let s = StructArray::new(
        s_fields,
        vec![
            Arc::new(StringArray::from(vec!["z"])) as ArrayRef,
            Arc::new(arrow::array::Int16Array::from(vec![32767])),
            Arc::new(Int64Array::from(vec![i64::MAX])),
        ],
        None,
    );
    let DataType::List(element) = now.field(2).data_type().clone() else { panic!() };
    let l = ListArray::new(
        element,
        arrow::buffer::OffsetBuffer::from_lengths([1]),
        Arc::new(arrow::array::UInt16Array::from(vec![7])),
        None,
    );
    let columns: Vec<ArrayRef> =
        vec![Arc::new(Int64Array::from(vec![3])), Arc::new(s), Arc::new(l), Arc::new(StringArray::from(vec!["null"]))];
    let mut w = txn.writer(&uuid).unwrap();
    w.write(&StructArray::new(now.fields().clone(), columns, None)).unwrap();
    txn.stage_files(&uuid, w.finish().unwrap()).unwrap();
    txn.end_statement(&uuid).unwrap();
    txn.commit().unwrap();
    let batch = read(&catalog);
    assert_eq!(batch.num_rows(), 3);
    let s = batch.column(1).as_struct();
    let a = s.column(1).as_primitive::<arrow::datatypes::Int16Type>();
    assert!((0..3).any(|i| a.is_valid(i) && a.value(i) == 32767));
}
