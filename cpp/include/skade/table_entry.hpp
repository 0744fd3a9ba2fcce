// A skade table as one transaction sees it: its columns and its key, read from the core.
#pragma once

#include "skade/common.hpp"
#include "duckdb/catalog/catalog_entry/table_catalog_entry.hpp"
#include "duckdb/function/table/arrow/arrow_duck_schema.hpp"

namespace duckdb {

//! What DuckDB needs of a table's columns, derived once per table and schema id and shared by
//! the entries of every transaction (converting the Arrow schema was most of what resolving a
//! table cost a point query). Read-only once built.
struct SkadeTableShape {
	ArrowTableSchema arrow_table;
	//! Name and Arrow format per column: what a function's stream is checked against.
	vector<pair<string, string>> columns;
	vector<bool> not_null;
	//! Per column: its comment (a NULL value: none).
	vector<Value> comments;
	//! Each column's DEFAULT (Iceberg v3's write default), as text to cast to its type; NULL: none.
	vector<Value> defaults;
	vector<string> primary_key;

	static shared_ptr<SkadeTableShape> Build(ClientContext &context, skade_table *table);
};

//! An AT clause's unit ("version" or "timestamp") and value (a snapshot id, or microseconds since
//! the epoch), cast with the client's context as a WHERE clause would; a binder error otherwise.
void SkadeResolveAt(ClientContext &context, const BoundAtClause &at, string &unit, int64_t &value);

//! Iceberg v3's row lineage, as virtual columns of every skade table (hidden from SELECT *, as
//! rowid is; a v2 table's scan refuses them, naming skade_upgrade_table).
constexpr column_t SKADE_COLUMN_ROW_ID = UINT64_C(9223372036854775808) + 100;
constexpr column_t SKADE_COLUMN_LAST_UPDATED = UINT64_C(9223372036854775808) + 101;

class SkadeTableEntry : public TableCatalogEntry {
public:
	SkadeTableEntry(Catalog &catalog, SchemaCatalogEntry &schema, CreateTableInfo &info, SkadeTableHandle table,
	                shared_ptr<SkadeTableShape> shape);

	//! Builds the entry for a core table handle.
	static unique_ptr<SkadeTableEntry> Create(ClientContext &context, SchemaCatalogEntry &schema,
	                                          SkadeTableHandle table);

	const string &Uuid() const {
		return uuid;
	}
	skade_table *Handle() const {
		return table.get();
	}
	ArrowTableSchema &GetArrowTable() {
		return shape->arrow_table;
	}
	const SkadeTableShape &Shape() const {
		return *shape;
	}

	unique_ptr<BaseStatistics> GetStatistics(ClientContext &context, column_t column_id) override;
	TableFunction GetScanFunction(ClientContext &context, unique_ptr<FunctionData> &bind_data) override;
	TableFunction GetScanFunction(ClientContext &context, unique_ptr<FunctionData> &bind_data,
	                              const EntryLookupInfo &lookup) override;
	TableStorageInfo GetStorageInfo(ClientContext &context) override;
	virtual_column_map_t GetVirtualColumns() const override;
	vector<column_t> GetRowIdColumns() const override;
	void BindUpdateConstraints(Binder &binder, LogicalGet &get, LogicalProjection &proj, LogicalUpdate &update,
	                           ClientContext &context) override;
#if SKADE_DUCKDB_MAJOR >= 2
	//! 2.0: every table entry owns its columns.
	const ColumnList &GetColumns() const override {
		return columns;
	}
#endif

private:
#if SKADE_DUCKDB_MAJOR >= 2
	ColumnList columns;
#endif
	SkadeTableHandle table;
	string uuid;
	shared_ptr<SkadeTableShape> shape;
};

} // namespace duckdb
