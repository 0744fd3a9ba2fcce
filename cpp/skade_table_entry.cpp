// Table entries: DuckDB's view of a skade table (columns, NOT NULL, PRIMARY KEY, scan function).
#include "skade/table_entry.hpp"

#include "skade/scan.hpp"

#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/function/table/arrow.hpp"
#include "duckdb/parser/constraints/not_null_constraint.hpp"
#include "duckdb/parser/constraints/unique_constraint.hpp"
#include "duckdb/parser/parsed_data/create_table_info.hpp"
#include "duckdb/storage/table_storage_info.hpp"

namespace duckdb {

SkadeTableEntry::SkadeTableEntry(Catalog &catalog, SchemaCatalogEntry &schema, CreateTableInfo &info,
                                 SkadeTableHandle table_p, ArrowTableSchema arrow_table_p)
    : TableCatalogEntry(catalog, schema, info), table(std::move(table_p)), uuid(SkadeString(skade_table_uuid(table.get()))),
      arrow_table(std::move(arrow_table_p)) {
}

unique_ptr<SkadeTableEntry> SkadeTableEntry::Create(ClientContext &context, SchemaCatalogEntry &schema,
                                                    SkadeTableHandle table) {
	ArrowSchemaWrapper arrow;
	SkadeCheck(skade_table_arrow_schema(table.get(), &arrow.arrow_schema));
	ArrowTableSchema arrow_table;
	ArrowTableFunction::PopulateArrowTableSchema(context, arrow_table, arrow.arrow_schema);

	CreateTableInfo info(schema, SkadeString(skade_table_name(table.get())));
	auto &names = arrow_table.GetNames();
	auto &types = arrow_table.GetTypes();
	for (idx_t i = 0; i < names.size(); i++) {
		info.columns.AddColumn(ColumnDefinition(names[i], types[i]));
		if (!(arrow.arrow_schema.children[i]->flags & ARROW_FLAG_NULLABLE)) {
			info.constraints.push_back(make_uniq<NotNullConstraint>(LogicalIndex(i)));
		}
	}
	skade_strings *key = nullptr;
	SkadeCheck(skade_table_primary_key(table.get(), &key));
	auto key_columns = SkadeTakeStrings(key);
	if (!key_columns.empty()) {
		info.constraints.push_back(make_uniq<UniqueConstraint>(std::move(key_columns), true));
	}
	return make_uniq<SkadeTableEntry>(schema.ParentCatalog(), schema, info, std::move(table), std::move(arrow_table));
}

unique_ptr<BaseStatistics> SkadeTableEntry::GetStatistics(ClientContext &context, column_t column_id) {
	return nullptr;
}

TableFunction SkadeTableEntry::GetScanFunction(ClientContext &context, unique_ptr<FunctionData> &bind_data) {
	bind_data = make_uniq<SkadeScanBindData>(*this);
	return SkadeScanFunction();
}

TableStorageInfo SkadeTableEntry::GetStorageInfo(ClientContext &context) {
	TableStorageInfo info;
	info.cardinality = skade_table_estimated_rows(table.get());
	return info;
}

virtual_column_map_t SkadeTableEntry::GetVirtualColumns() const {
	virtual_column_map_t result;
	// A count(*) asks for no column at all rather than for row ids.
	result.insert(make_pair(COLUMN_IDENTIFIER_EMPTY, TableColumn("", LogicalType::BOOLEAN)));
	return result;
}

vector<column_t> SkadeTableEntry::GetRowIdColumns() const {
	// DuckDB asks for row ids only to plan DELETE and UPDATE.
	throw NotImplementedException("DELETE and UPDATE are not supported on skade tables yet");
}

} // namespace duckdb
