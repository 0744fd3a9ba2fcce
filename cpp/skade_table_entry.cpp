// Table entries: DuckDB's view of a skade table (columns, NOT NULL, PRIMARY KEY, scan function).
#include "skade/table_entry.hpp"

#include "skade/catalog.hpp"
#include "skade/scan.hpp"

#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/function/table/arrow.hpp"
#include "duckdb/parser/constraints/not_null_constraint.hpp"
#include "duckdb/parser/constraints/unique_constraint.hpp"
#include "duckdb/parser/expression/constant_expression.hpp"
#include "duckdb/parser/parsed_data/create_table_info.hpp"
#include "duckdb/planner/expression/bound_columnref_expression.hpp"
#include "duckdb/planner/operator/logical_get.hpp"
#include "duckdb/planner/tableref/bound_at_clause.hpp"
#include "duckdb/planner/operator/logical_projection.hpp"
#include "duckdb/planner/operator/logical_update.hpp"
#include "duckdb/storage/table_storage_info.hpp"

namespace duckdb {

SkadeTableEntry::SkadeTableEntry(Catalog &catalog, SchemaCatalogEntry &schema, CreateTableInfo &info,
                                 SkadeTableHandle table_p, shared_ptr<SkadeTableShape> shape_p)
    : TableCatalogEntry(catalog, schema, info),
#if SKADE_DUCKDB_MAJOR >= 2
      columns(std::move(info.columns)),
#endif
      table(std::move(table_p)), uuid(SkadeString(skade_table_uuid(table.get()))), shape(std::move(shape_p)) {
}

//! The value of `key` in an Arrow field's metadata, NULL when it has none: a column's comment is
//! its "doc" (Iceberg's field doc, as the core exports it), its DEFAULT "skade.default". Read here
//! rather than through ArrowSchemaMetadata, whose lookup cannot tell an empty value from none. The
//! metadata's layout is the Arrow C data interface's: a pair count, then each key and value as a
//! length and its bytes (int32s, native).
static Value FieldMetadata(const char *metadata, const string &wanted) {
	if (!metadata) {
		return Value();
	}
	auto read_length = [](const char *&at) -> int32_t {
		int32_t length;
		memcpy(&length, at, sizeof(length));
		at += sizeof(length);
		return length;
	};
	auto at = metadata;
	auto pairs = read_length(at);
	for (int32_t i = 0; i < pairs; i++) {
		auto key_length = read_length(at);
		string key(at, key_length);
		at += key_length;
		auto value_length = read_length(at);
		if (key == wanted) {
			return Value(string(at, value_length));
		}
		at += value_length;
	}
	return Value();
}

shared_ptr<SkadeTableShape> SkadeTableShape::Build(ClientContext &context, skade_table *table) {
	ArrowSchemaWrapper arrow;
	SkadeCheck(skade_table_arrow_schema(table, &arrow.arrow_schema));
	auto shape = make_shared_ptr<SkadeTableShape>();
	ArrowTableFunction::PopulateArrowTableSchema(context, shape->arrow_table, arrow.arrow_schema);
	for (int64_t i = 0; i < arrow.arrow_schema.n_children; i++) {
		auto &child = *arrow.arrow_schema.children[i];
		shape->columns.emplace_back(child.name, child.format);
		shape->not_null.push_back(!(child.flags & ARROW_FLAG_NULLABLE));
		shape->comments.push_back(FieldMetadata(child.metadata, "doc"));
		shape->defaults.push_back(FieldMetadata(child.metadata, "skade.default"));
	}
	skade_strings *key = nullptr;
	SkadeCheck(skade_table_primary_key(table, &key));
	shape->primary_key = SkadeTakeStrings(key);
	return shape;
}

unique_ptr<SkadeTableEntry> SkadeTableEntry::Create(ClientContext &context, SchemaCatalogEntry &schema,
                                                    SkadeTableHandle table) {
	auto shape = schema.ParentCatalog().Cast<SkadeCatalog>().TableShape(context, table.get());
	CreateTableInfo info(schema, SkadeToName(SkadeString(skade_table_name(table.get()))));
	auto &names = shape->arrow_table.GetNames();
	auto &types = shape->arrow_table.GetTypes();
	for (idx_t i = 0; i < names.size(); i++) {
		ColumnDefinition column(SkadeToName(names[i]), types[i]);
		if (!shape->comments[i].IsNull()) {
			column.SetComment(shape->comments[i]);
		}
		Value default_value;
		string error;
		// (a default another engine wrote that DuckDB cannot cast is left out: the column still reads)
		if (!shape->defaults[i].IsNull() && SkadeTryCast(shape->defaults[i], types[i], default_value, error)) {
			column.SetDefaultValue(SkadeConstantExpression(default_value));
		}
		info.columns.AddColumn(std::move(column));
		if (shape->not_null[i]) {
			info.constraints.push_back(make_uniq<NotNullConstraint>(LogicalIndex(i)));
		}
	}
	// The table's comment is read per entry, not cached with the shape: a comment is no change of
	// columns, so it keeps the shape's id.
	skade_strings *comment = nullptr;
	SkadeCheck(skade_table_comment(table.get(), &comment));
	auto comments = SkadeTakeStrings(comment);
	if (!comments.empty()) {
		info.comment = Value(comments[0]);
	}
	if (!shape->primary_key.empty()) {
		info.constraints.push_back(make_uniq<UniqueConstraint>(SkadeToNames(shape->primary_key), true));
	}
	return make_uniq<SkadeTableEntry>(schema.ParentCatalog(), schema, info, std::move(table), std::move(shape));
}

unique_ptr<BaseStatistics> SkadeTableEntry::GetStatistics(ClientContext &context, column_t column_id) {
	return nullptr;
}

TableFunction SkadeTableEntry::GetScanFunction(ClientContext &context, unique_ptr<FunctionData> &bind_data) {
	bind_data = make_uniq<SkadeScanBindData>(*this);
	return SkadeScanFunction();
}

void SkadeResolveAt(ClientContext &context, const BoundAtClause &at, string &unit, int64_t &value) {
	unit = SkadeNameString(at.Unit());
	if (at.GetValue().IsNull()) {
		throw BinderException("AT (%s => NULL): a snapshot needs a %s", StringUtil::Upper(unit),
		                      StringUtil::CIEquals(unit, "timestamp") ? "time" : "snapshot id");
	}
	// Cast with the client's context, as a WHERE clause would: a TIMESTAMP or a string is a time in
	// the session's TimeZone, and a snapshot id must be an integer (1.7 is not rounded to 2).
	auto &given = at.GetValue();
	Value cast;
	string error;
	if (StringUtil::CIEquals(unit, "timestamp")) {
		// (1.5's text-to-time cast can answer NULL instead of failing)
		if (!SkadeTryCast(context, given, LogicalType::TIMESTAMP_TZ, cast, &error) || cast.IsNull()) {
			throw BinderException("AT (TIMESTAMP => %s): not a time%s", given.ToString(),
			                      error.empty() ? string() : ": " + error);
		}
		value = Timestamp::GetEpochMicroSeconds(timestamp_t(TimestampTZValue::Get(cast)));
	} else {
		Value back;
		if (!SkadeTryCast(context, given, LogicalType::BIGINT, cast, &error) || cast.IsNull() ||
		    !SkadeTryCast(context, cast, given.type(), back, &error) || back != given) {
			throw BinderException("AT (VERSION => %s): a snapshot id is an integer (skade_snapshots lists them)",
			                      given.ToString());
		}
		value = cast.GetValue<int64_t>();
	}
}

TableFunction SkadeTableEntry::GetScanFunction(ClientContext &context, unique_ptr<FunctionData> &bind_data,
                                              const EntryLookupInfo &lookup) {
	auto function = GetScanFunction(context, bind_data);
	auto at = lookup.GetAtClause();
	if (at) {
		// AT (VERSION => id) or AT (TIMESTAMP => ts): the core pins the snapshot.
		string unit;
		int64_t value;
		SkadeResolveAt(context, *at, unit, value);
		auto &bind = bind_data->Cast<SkadeScanBindData>();
		SkadeCheck(skade_table_at(table.get(), unit.c_str(), value, bind.at.out()));
		bind.at_clause = StringUtil::Upper(unit) + " " + to_string(value);
	}
	return function;
}

TableStorageInfo SkadeTableEntry::GetStorageInfo(ClientContext &context) {
	TableStorageInfo info;
	info.cardinality = skade_table_estimated_rows(table.get());
	// The primary key, as the unique index DuckDB's ON CONFLICT / INSERT OR REPLACE bind against.
	for (auto &constraint : constraints) {
		if (constraint->type != ConstraintType::UNIQUE) {
			continue;
		}
		auto &unique = constraint->Cast<UniqueConstraint>();
		IndexInfo index;
		index.is_unique = true;
		index.is_primary = unique.IsPrimaryKey();
		index.is_foreign = false;
		for (auto &name : unique.GetColumnNames()) {
			index.column_set.insert(columns.GetColumn(name).Physical().index);
		}
		info.index_info.push_back(std::move(index));
	}
	return info;
}

virtual_column_map_t SkadeTableEntry::GetVirtualColumns() const {
	virtual_column_map_t result;
	// A count(*) asks for no column at all rather than for row ids.
	result.insert(make_pair(COLUMN_IDENTIFIER_EMPTY, TableColumn("", LogicalType::BOOLEAN)));
	// Row ids name a row within one transaction (file and position), for DELETE and UPDATE.
	result.insert(make_pair(COLUMN_IDENTIFIER_ROW_ID, TableColumn("rowid", LogicalType::ROW_TYPE)));
	result.insert(make_pair(SKADE_COLUMN_ROW_ID, TableColumn("_row_id", LogicalType::BIGINT)));
	result.insert(make_pair(SKADE_COLUMN_LAST_UPDATED, TableColumn("_last_updated_sequence_number", LogicalType::BIGINT)));
	return result;
}

void SkadeTableEntry::BindUpdateConstraints(Binder &binder, LogicalGet &get, LogicalProjection &proj,
                                            LogicalUpdate &update, ClientContext &context) {
	// Merge-on-read: an UPDATE deletes the old row and inserts the new one, so every column must
	// reach the sink. Columns the statement does not set are carried over unchanged ("c = c").
	update.update_is_del_and_insert = true;
	for (auto &column : columns.Physical()) {
		auto index = column.Physical();
		bool set = false;
		for (auto &updated : update.columns) {
			set = set || updated == index;
		}
		if (set) {
			continue;
		}
		auto &column_ids = get.GetColumnIds();
		optional_idx position;
		for (idx_t i = 0; i < column_ids.size(); i++) {
			if (column_ids[i].GetPrimaryIndex() == index.index) {
				position = i;
			}
		}
		if (!position.IsValid()) {
			position = column_ids.size();
			get.AddColumnId(index.index);
		}
		update.expressions.push_back(
		    make_uniq<BoundColumnRefExpression>(column.Type(), SkadeColumnBinding(proj.table_index, proj.expressions.size())));
		proj.expressions.push_back(
		    make_uniq<BoundColumnRefExpression>(column.Type(), SkadeColumnBinding(get.table_index, position.GetIndex())));
		update.columns.push_back(index);
	}
}

vector<column_t> SkadeTableEntry::GetRowIdColumns() const {
	return {COLUMN_IDENTIFIER_ROW_ID};
}

} // namespace duckdb
