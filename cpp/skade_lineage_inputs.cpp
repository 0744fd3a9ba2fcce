// Lineage inputs from outside a skade catalog: the files a statement's plan reads (read_parquet,
// read_csv, read_json ...) and the tables of other attached databases are noted in the skade
// transaction of every attached lake, for the core to record with its commit (the core notes
// reads of its own tables itself). An optimizer extension that runs before DuckDB's own passes
// (which answer count(*) of a Parquet file from its footer, leaving no read in the plan), so a
// statement planned with the optimizer off notes nothing. A prepared statement's plan that DuckDB
// runs again without binding it (its catalogs unchanged) skips the optimizer: one that reads from
// outside a lake is bound again, so that the transaction it runs in notes its inputs too.
#include "skade/catalog.hpp"
#include "skade/common.hpp"
#include "skade/functions.hpp"
#include "skade/scan.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

#include "duckdb/catalog/catalog_entry/table_catalog_entry.hpp"
#include "duckdb/common/file_system.hpp"
#include "duckdb/execution/operator/scan/physical_table_scan.hpp"
#include "duckdb/execution/physical_plan_generator.hpp"
#include "duckdb/main/client_context_state.hpp"
#include "duckdb/main/prepared_statement_data.hpp"
#include "duckdb/main/attached_database.hpp"
#include "duckdb/main/database_manager.hpp"
#include "duckdb/optimizer/optimizer_extension.hpp"
#include "duckdb/planner/operator/logical_get.hpp"
#include "duckdb/transaction/meta_transaction.hpp"

namespace duckdb {

namespace {

//! DuckDB's file readers whose first argument names the files.
bool ReadsFiles(const string &function) {
	static const unordered_set<string> readers {
	    "read_parquet", "parquet_scan",   "read_csv",  "read_csv_auto",     "read_json",
	    "read_json_auto", "read_ndjson",  "read_ndjson_auto", "read_json_objects", "read_text",
	    "read_blob",    "read_xlsx",      "read_avro"};
	return readers.count(function) > 0;
}

//! A table a plan reads; for a skade table, the version its scan reads (an AT clause pins one).
struct TableRead {
	reference<TableCatalogEntry> table;
	skade_table *version;
};

struct PlanInputs {
	vector<string> files;
	vector<TableRead> tables;
};

void AddFiles(ClientContext &context, const string &named, PlanInputs &inputs) {
	auto &fs = FileSystem::GetFileSystem(context);
	auto pattern = fs.ExpandPath(named); // `~`, as the reader does
	if (!FileSystem::HasGlob(pattern)) {
		inputs.files.push_back(pattern);
		return;
	}
	for (auto &file : fs.Glob(pattern)) {
		inputs.files.push_back(file.path);
	}
}

void Collect(ClientContext &context, LogicalOperator &op, PlanInputs &inputs) {
	if (op.type == LogicalOperatorType::LOGICAL_GET) {
		auto &get = op.Cast<LogicalGet>();
		auto table = get.GetTable();
		if (table) {
			skade_table *version = nullptr;
			if (table->ParentCatalog().GetCatalogType() == "skade" && get.bind_data &&
			    SkadeFunctionName(get.function) == "skade_scan") {
				version = get.bind_data->Cast<SkadeScanBindData>().Version();
			}
			inputs.tables.push_back(TableRead {*table, version});
		} else if (ReadsFiles(SkadeFunctionName(get.function)) && !get.parameters.empty()) {
			auto &files = get.parameters[0];
			if (files.type().id() == LogicalTypeId::LIST) {
				for (auto &file : ListValue::GetChildren(files)) {
					AddFiles(context, file.ToString(), inputs);
				}
			} else if (files.type().id() == LogicalTypeId::VARCHAR) {
				AddFiles(context, StringValue::Get(files), inputs);
			}
		}
	}
	for (auto &child : op.children) {
		Collect(context, *child, inputs);
	}
}

void NoteInputs(OptimizerExtensionInput &input, unique_ptr<LogicalOperator> &plan) {
	auto &context = input.context;
	vector<reference<Catalog>> lakes;
	for (auto &db : DatabaseManager::Get(context).GetDatabases(context)) {
		if (db->GetCatalog().GetCatalogType() == "skade") {
			lakes.push_back(db->GetCatalog());
		}
	}
	if (lakes.empty() || !plan) {
		return;
	}
	PlanInputs inputs;
	Collect(context, *plan, inputs);
	for (auto &lake : lakes) {
		bool outside = !inputs.files.empty();
		for (auto &read : inputs.tables) {
			outside = outside || &read.table.get().ParentCatalog() != &lake.get();
		}
		if (!outside) {
			continue; // the core notes reads of its own tables, with their snapshots
		}
		// Opens the lake's transaction if this is its first statement: a read made before the
		// transaction first touches the lake is its input as much as one made after.
		auto txn = SkadeTransaction::Get(context, lake.get()).Handle();
		for (auto &file : inputs.files) {
			SkadeCheck(skade_txn_read_file(txn, file.c_str()));
		}
		for (auto &read : inputs.tables) {
			auto &table = read.table.get();
			auto &catalog = table.ParentCatalog();
			if (&catalog == &lake.get()) {
				continue;
			}
			if (catalog.GetCatalogType() == "skade") {
				auto version = read.version ? read.version : table.Cast<SkadeTableEntry>().Handle();
				SkadeCheck(skade_txn_read_skade_table(txn, version));
				continue;
			}
			auto path = catalog.InMemory() ? string() : catalog.GetDBPath();
			auto name = SkadeNameString(table.ParentSchema().name) + "." + SkadeNameString(table.name);
			vector<string> names, types;
			for (auto &column : table.GetColumns().Logical()) {
				names.push_back(SkadeNameString(column.GetName()));
				types.push_back(column.GetType().ToString());
			}
			vector<const char *> name_ptrs, type_ptrs;
			for (idx_t i = 0; i < names.size(); i++) {
				name_ptrs.push_back(names[i].c_str());
				type_ptrs.push_back(types[i].c_str());
			}
			SkadeCheck(skade_txn_read_table(txn, path.c_str(), SkadeNameString(catalog.GetName()).c_str(), name.c_str(),
			                                name_ptrs.data(), type_ptrs.data(), names.size()));
		}
	}
}

//! Whether a plan may have read something a lake's transaction notes as an outside input: any
//! table function's rows but skade's own (files, another database's tables), a skade table when
//! several lakes are attached (one lake's table is another's outside input), or rows the
//! optimizer computed ahead (count(*) of a Parquet file, from its footer). (skade's functions,
//! skade_lookup among them, note what they read in the core.)
bool ReadsOutside(const PhysicalOperator &op, idx_t lakes) {
	if (op.type == PhysicalOperatorType::TABLE_SCAN) {
		auto &name = SkadeFunctionName(op.Cast<PhysicalTableScan>().function);
		if (name == "skade_scan" ? lakes > 1 : !StringUtil::StartsWith(name, "skade_")) {
			return true;
		}
	}
	if (op.type == PhysicalOperatorType::COLUMN_DATA_SCAN) {
		return true;
	}
	for (auto &child : op.GetChildren()) {
		if (ReadsOutside(child.get(), lakes)) {
			return true;
		}
	}
	return false;
}

class SkadeRunAgainInputs : public ClientContextState {
public:
#if SKADE_DUCKDB_MAJOR < 2
	RebindQueryInfo OnExecutePrepared(ClientContext &context, PreparedStatementCallbackInfo &info,
	                                  RebindQueryInfo current) override {
		return Decide(context, info.prepared_statement, current);
	}
#endif
	RebindQueryInfo OnRebindPreparedStatement(ClientContext &context, BindPreparedStatementCallbackInfo &info,
	                                          RebindQueryInfo current) override {
		return Decide(context, info.prepared_statement, current);
	}

private:
	static RebindQueryInfo Decide(ClientContext &context, PreparedStatementData &prepared, RebindQueryInfo current) {
		if (current == RebindQueryInfo::ATTEMPT_TO_REBIND || !prepared.physical_plan) {
			return current;
		}
		idx_t lakes = 0;
		for (auto &db : DatabaseManager::Get(context).GetDatabases(context)) {
			lakes += db->GetCatalog().GetCatalogType() == "skade";
		}
		if (lakes == 0 || !ReadsOutside(prepared.physical_plan->Root(), lakes)) {
			return current;
		}
		return RebindQueryInfo::ATTEMPT_TO_REBIND;
	}
};

} // namespace

void SkadeWatchPreparedPlans(ClientContext &context) {
	context.registered_state->GetOrCreate<SkadeRunAgainInputs>("skade_run_again_inputs");
}

OptimizerExtension SkadeLineageInputs() {
	OptimizerExtension extension;
	extension.pre_optimize_function = NoteInputs;
	return extension;
}

} // namespace duckdb
