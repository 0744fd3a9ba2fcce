// skade's table functions, each in its own file under cpp/functions/.
#pragma once

#include "skade/common.hpp"
#include "skade/filters.hpp"
#include "duckdb/common/arrow/arrow_wrapper.hpp"
#include "duckdb/function/function_set.hpp"
#include "duckdb/function/table_function.hpp"
#include "duckdb/function/table/arrow/arrow_duck_schema.hpp"

namespace duckdb {

class OptimizerExtension;
class SkadeCatalog;
class SkadeTableEntry;
struct SkadeTableShape;

//! What opening a stream (SkadeArrowFunctionData::open_columns) tells the scan besides the rows.
struct SkadeStreamOpened {
	//! How many batches the stream has, when known: no more threads convert it than that.
	optional_idx batches;
};

//! Bind data of a table function whose rows the core produces as an Arrow stream. It holds
//! names, never pointers to catalogs: a prepared statement may outlive a DETACH.
struct SkadeArrowFunctionData : public TableFunctionData {
	//! Opens the stream at init, in the executing transaction (resolving the catalog by name
	//! again: it may have been detached since the bind).
	std::function<void(ClientContext &, ArrowArrayStream &)> open;
	//! Instead of `open`, for a function with projection (and filter) pushdown: also told the
	//! columns the query uses (indexes into its columns, virtual ones from VIRTUAL_COLUMN_START)
	//! and its filters described for pruning, so the core may read only what they need. The
	//! filters are applied exactly to the rows afterwards.
	std::function<void(ClientContext &, const vector<column_t> &, SkadeFilterDescription &, ArrowArrayStream &,
	                   SkadeStreamOpened &)>
	    open_columns;
	ArrowTableSchema arrow_table;
	vector<LogicalType> types;
	//! Whether several threads convert the rows (each batch on one; DuckDB keeps the stream's
	//! order by batch index where the query needs it).
	bool parallel = false;
	//! Whether the function has projection pushdown: DuckDB then asks for some columns only, and
	//! only those are converted (set together with TableFunction::projection_pushdown).
	bool projection = false;
	//! The columns bound (name and Arrow format); the stream's columns are checked against them.
	vector<pair<string, string>> bound_columns;
	//! How many of the stream's last columns are virtual columns (like read_parquet's `filename`):
	//! not in SELECT *, there when named. Set before SkadeArrowFunctionBind.
	idx_t virtual_columns = 0;
	//! Their names and types (filled by the bind).
	vector<string> virtual_names;
	vector<LogicalType> virtual_types;

	//! Whether a prepared statement keeps this binding. By default it re-binds at every
	//! execution: the function names its table by a string DuckDB does not track, so a table
	//! dropped and created again (or a catalog detached) since PREPARE is bound afresh rather
	//! than looked up by a stale id. (The binding holds names and values only, never pointers.)
	bool cache_binding = false;
	//! The core guarantees the stream has the bound columns (it checks the table's schema id):
	//! no need to export the stream's schema and compare it with bound_columns.
	bool columns_checked_by_core = false;

	bool SupportStatementCache() const override {
		return cache_binding;
	}
};

//! Completes a bind: reads the function's columns from the core.
unique_ptr<FunctionData> SkadeArrowFunctionBind(ClientContext &context, const string &function_name,
                                                unique_ptr<SkadeArrowFunctionData> data,
                                                vector<LogicalType> &return_types, vector<SkadeName> &names);
//! The same, for a function whose columns depend on its arguments (`schema`: the columns).
unique_ptr<FunctionData> SkadeArrowFunctionBind(ClientContext &context, ArrowSchemaWrapper &schema,
                                                unique_ptr<SkadeArrowFunctionData> data,
                                                vector<LogicalType> &return_types, vector<SkadeName> &names);
//! The same, for a function whose rows have a table's columns.
unique_ptr<FunctionData> SkadeArrowFunctionBind(const SkadeTableShape &shape, unique_ptr<SkadeArrowFunctionData> data,
                                                vector<LogicalType> &return_types, vector<SkadeName> &names);
//! A table function over a core Arrow stream. For one with virtual columns, set
//! `get_virtual_columns = SkadeArrowVirtualColumns`.
TableFunction SkadeArrowFunction(const string &name, vector<LogicalType> arguments, table_function_bind_t bind);
virtual_column_map_t SkadeArrowVirtualColumns(ClientContext &context, optional_ptr<FunctionData> bind_data);

//! Notes what a statement's plan reads outside skade (files, other databases' tables) in the skade
//! transactions it has open: lineage inputs (cpp/skade_lineage_inputs.cpp).
OptimizerExtension SkadeLineageInputs();
//! Makes the client bind again a prepared statement whose plan reads from outside a lake, so that
//! each run notes its inputs (called as a client first uses a lake).
void SkadeWatchPreparedPlans(ClientContext &context);

//! VACUUM and ANALYZE of a skade table, decided before DuckDB scans it: ANALYZE succeeds at once,
//! VACUUM is refused naming skade_compact (cpp/skade_vacuum.cpp).
OptimizerExtension SkadeVacuumRule();

//! Refuses NULL arguments with a message naming the function.
void SkadeRequireArguments(TableFunctionBindInput &input, const string &function_name);
//! The named parameter `name` (matched case-insensitively), or NULL.
Value SkadeNamedParameter(TableFunctionBindInput &input, const string &name);

//! A function that changes `catalog` (a consumer): DuckDB's transaction then writes to it, and to
//! no other attached database (its rule for one transaction).
void SkadeModifiesCatalog(ClientContext &context, Catalog &catalog);
//! Whether the running query was interrupted (never throws).
bool SkadeIsInterrupted(ClientContext &context);

//! The skade catalog named `name` (an attached database of TYPE skade), or an error naming it.
SkadeCatalog &SkadeCatalogByName(ClientContext &context, const string &name);
//! The skade table named by a qualified name ('lake.schema.table' or 'lake.table').
SkadeTableEntry &SkadeTableByName(ClientContext &context, const string &qualified_name);

TableFunction SkadeTablesFunction();
TableFunction SkadeCommitLogFunction();
TableFunction SkadeSnapshotsFunction();
TableFunction SkadeCommitsSinceFunction();
//! skade_lineage(catalog [, since_seq]).
TableFunctionSet SkadeLineageFunctions();
//! skade_lineage_delivery(catalog), skade_lineage_flush(catalog [, timeout_ms]).
vector<TableFunctionSet> SkadeLineageDeliveryFunctions();
TableFunction SkadeCheckFunction();
TableFunction SkadeExpireSnapshotsFunction();
TableFunction SkadeRemoveOrphanFilesFunction();
TableFunction SkadeCompactFunction();
TableFunction SkadeUpgradeTableFunction();
//! skade_add_files(table, path | glob | [paths and globs]).
TableFunctionSet SkadeAddFilesFunctions();
TableFunctionSet SkadeChangelogFunctions();
TableFunction SkadeLookupFunction();
TableFunction SkadeLookupStatsFunction();
//! skade_create_consumer, skade_reset_consumer, skade_drop_consumer, skade_acknowledge, skade_consumers.
vector<TableFunctionSet> SkadeConsumerFunctions();
//! skade_consume, skade_peek, skade_wait.
vector<TableFunctionSet> SkadeConsumeFunctions();
//! skade_serve, skade_servers, skade_serve_stop: the Iceberg REST catalog servers.
vector<TableFunction> SkadeServeFunctions();

} // namespace duckdb
