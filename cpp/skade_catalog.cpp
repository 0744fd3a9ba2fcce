// The DuckDB Catalog of an attached skade file. Schemas and tables are resolved per transaction
// (SkadeTransaction), in entry sets shared per committed state; this class routes DuckDB's calls.
#include "skade/catalog.hpp"

#include "skade/insert.hpp"
#include "skade/modify.hpp"
#include "skade/schema_entry.hpp"
#include "skade/table_entry.hpp"
#include "skade/transaction.hpp"

#include "duckdb/execution/physical_plan_generator.hpp"
#include "duckdb/parser/constraints/unique_constraint.hpp"
#include "duckdb/parser/parsed_data/alter_table_info.hpp"
#include "duckdb/parser/parsed_data/create_index_info.hpp"
#include "duckdb/parser/parsed_data/create_schema_info.hpp"
#include "duckdb/parser/parsed_data/drop_info.hpp"
#include "duckdb/planner/expression/bound_reference_expression.hpp"
#include "duckdb/planner/operator/logical_create_table.hpp"
#include "duckdb/planner/operator/logical_delete.hpp"
#include "duckdb/planner/operator/logical_update.hpp"
#include "duckdb/planner/operator/logical_insert.hpp"
#if SKADE_DUCKDB_MAJOR >= 2
#include "duckdb/planner/operator/logical_alter.hpp"
#else
#include "duckdb/planner/operator/logical_simple.hpp"
#endif
#include "duckdb/storage/database_size.hpp"

namespace duckdb {

SkadeCatalog::SkadeCatalog(AttachedDatabase &db, SkadeCatalogHandle handle_p, string path_p,
                           vector<string> bucket_urls_p)
    : Catalog(db), handle(std::move(handle_p)), path(std::move(path_p)), bucket_urls(std::move(bucket_urls_p)) {
}

void SkadeCatalog::Initialize(bool load_builtin) {
}

optional_idx SkadeCatalog::GetCatalogVersion(ClientContext &context) {
	return SkadeTransaction::Get(context, *this).CatalogVersion();
}

shared_ptr<SkadeEntrySet> SkadeCatalog::SharedEntries(uint64_t generation) {
	lock_guard<mutex> guard(entries_lock);
	if (newest_entries && newest_entries->generation == generation) {
		return newest_entries;
	}
	auto entries = make_shared_ptr<SkadeEntrySet>(generation);
	if (!newest_entries || generation > newest_entries->generation) {
		newest_entries = entries;
	}
	return entries;
}

optional_ptr<CatalogEntry> SkadeCatalog::CreateSchema(CatalogTransaction transaction, CreateSchemaInfo &info) {
	if (info.on_conflict == OnCreateConflict::REPLACE_ON_CONFLICT) {
		throw NotImplementedException("CREATE OR REPLACE SCHEMA is not supported on skade catalogs");
	}
	auto &txn = SkadeTransaction::Get(transaction, *this);
	auto if_not_exists = info.on_conflict == OnCreateConflict::IGNORE_ON_CONFLICT;
	SkadeCheck(skade_txn_create_schema(txn.Handle(), SkadeSchemaName(info).c_str(), if_not_exists));
	txn.InvalidateEntries();
	return txn.GetSchema(transaction.GetContext(), SkadeSchemaName(info)).get();
}

optional_ptr<SchemaCatalogEntry> SkadeCatalog::LookupSchema(CatalogTransaction transaction,
                                                            const EntryLookupInfo &schema_lookup,
                                                            OnEntryNotFound if_not_found) {
	auto &txn = SkadeTransaction::Get(transaction, *this);
	auto schema = txn.GetSchema(transaction.GetContext(), schema_lookup.GetEntryName());
	if (!schema && if_not_found == OnEntryNotFound::THROW_EXCEPTION) {
		throw CatalogException(schema_lookup.GetErrorContext(), "Schema with name %s does not exist!",
		                       schema_lookup.GetEntryName());
	}
	return schema.get();
}

void SkadeCatalog::ScanSchemas(ClientContext &context, std::function<void(SchemaCatalogEntry &)> callback) {
	auto &txn = SkadeTransaction::Get(context, *this);
	for (auto &name : txn.SchemaNames()) {
		auto schema = txn.GetSchema(context, name);
		if (schema) {
			callback(*schema);
		}
	}
}

void SkadeCatalog::DropSchema(ClientContext &context, DropInfo &info) {
	auto &txn = SkadeTransaction::Get(context, *this);
	auto if_exists = info.if_not_found == OnEntryNotFound::RETURN_NULL;
	SkadeCheck(skade_txn_drop_schema(txn.Handle(), SkadeEntryName(info).c_str(), if_exists, info.cascade));
	txn.InvalidateEntries();
}

//! Whether a table CREATE TABLE ... AS makes keeps its rows in the order written (no sort order,
//! primary key or partitioning reorders them: see skade_table_keeps_arrival_order).
static bool KeepsArrivalOrder(const CreateTableInfo &info) {
	for (auto &constraint : info.constraints) {
		if (constraint->type == ConstraintType::UNIQUE) {
			return false;
		}
	}
	return info.partition_keys.empty() && info.sort_keys.empty();
}

PhysicalOperator &SkadeCatalog::PlanCreateTableAs(ClientContext &context, PhysicalPlanGenerator &planner,
                                                  LogicalCreateTable &op, PhysicalOperator &plan) {
	auto &schema = op.schema.Cast<SkadeSchemaEntry>();
	auto order = SkadeInsert::OrderFor(context, plan, KeepsArrivalOrder(op.info->Base()), false);
	auto &insert = static_cast<SkadeInsert &>(
	    planner.Make<SkadeInsert>(op.types, schema, std::move(op.info), op.estimated_cardinality));
	insert.input_types = plan.types;
	insert.order = order;
	insert.children.push_back(plan);
	return insert;
}

PhysicalOperator &SkadeCatalog::PlanInsert(ClientContext &context, PhysicalPlanGenerator &planner, LogicalInsert &op,
                                           optional_ptr<PhysicalOperator> plan) {
	if (op.on_conflict_info.action_type != OnConflictAction::THROW) {
		// DuckDB binds ON CONFLICT as MERGE INTO (PlanMergeInto); this form is not one of those.
		throw NotImplementedException("this INSERT ... ON CONFLICT form is not supported on skade tables");
	}
	if (!op.column_index_map.empty()) {
		plan = planner.ResolveDefaultsProjection(op, *plan);
	}
	auto &table = op.table.Cast<SkadeTableEntry>();
	// (with RETURNING, op.types are the table's columns: the rows inserted, in the query's order)
	auto &insert = static_cast<SkadeInsert &>(planner.Make<SkadeInsert>(op.types, table, op.estimated_cardinality));
	insert.input_types = plan->types;
	insert.returning = op.return_chunk;
	insert.order =
	    SkadeInsert::OrderFor(context, *plan, skade_table_keeps_arrival_order(table.Handle()), op.return_chunk);
	insert.children.push_back(*plan);
	return insert;
}

PhysicalOperator &SkadeCatalog::PlanDelete(ClientContext &context, PhysicalPlanGenerator &planner, LogicalDelete &op,
                                           PhysicalOperator &plan) {
	auto &row_id = op.expressions[0]->Cast<BoundReferenceExpression>();
	auto &table = op.table.Cast<SkadeTableEntry>();
	auto &del = static_cast<SkadeDelete &>(
	    planner.Make<SkadeDelete>(op.types, table, SkadeReferenceIndex(row_id), op.estimated_cardinality));
	if (op.return_chunk) {
		// The old rows' columns, after the row id (SkadeReturningRule put them there).
		auto columns = table.GetColumns().PhysicalColumnCount();
		if (op.expressions.size() != 1 + columns) {
			throw NotImplementedException("DELETE ... RETURNING on a skade table needs DuckDB's optimizer, which "
			                              "makes the scan read the deleted rows (it is disabled)");
		}
		for (idx_t i = 1; i < op.expressions.size(); i++) {
			del.returned_columns.push_back(SkadeReferenceIndex(op.expressions[i]->Cast<BoundReferenceExpression>()));
		}
#if SKADE_DUCKDB_MAJOR >= 2
		// (2.0's DELETE ... RETURNING outputs the virtual columns too, in the order of this map:
		// LogicalDelete::ResolveTypes)
		for (auto &entry : table.GetVirtualColumns()) {
			del.returned_virtual.push_back(entry.first == COLUMN_IDENTIFIER_ROW_ID ? SkadeReferenceIndex(row_id)
			                                                                       : DConstants::INVALID_INDEX);
		}
#endif
		del.returning = true;
	}
	del.children.push_back(plan);
	return del;
}

PhysicalOperator &SkadeCatalog::PlanUpdate(ClientContext &context, PhysicalPlanGenerator &planner, LogicalUpdate &op,
                                           PhysicalOperator &plan) {
#if SKADE_DUCKDB_MAJOR >= 2
	if (op.capture_old_rows) {
		throw NotImplementedException("triggers that read the old rows of an UPDATE are not supported on skade tables");
	}
#endif
	auto &table = op.table.Cast<SkadeTableEntry>();
	// (the child's last column is the row id; with RETURNING, op.types are the table's columns)
	auto &update = static_cast<SkadeUpdate &>(planner.Make<SkadeUpdate>(
	    op.types, table, SkadeUpdateInTableOrder(op.columns, op.expressions), plan.types.size() - 1,
	    op.estimated_cardinality));
	update.returning = op.return_chunk;
	update.children.push_back(plan);
	return update;
}

PhysicalOperator &SkadeCatalog::PlanMergeInto(ClientContext &context, PhysicalPlanGenerator &planner,
                                              LogicalMergeInto &op, PhysicalOperator &plan) {
	return SkadePlanMergeInto(context, planner, op, plan);
}

unique_ptr<LogicalOperator> SkadeCatalog::BindCreateIndex(Binder &binder, CreateStatement &stmt,
                                                          TableCatalogEntry &table, unique_ptr<LogicalOperator> plan) {
	throw NotImplementedException("CREATE INDEX is not supported on skade tables (table \"%s\"): a PRIMARY KEY "
	                              "gives point lookups their bloom filters and bounds",
	                              SkadeNameString(table.name));
}

unique_ptr<LogicalOperator> SkadeCatalog::BindAlterAddIndex(Binder &binder, TableCatalogEntry &table_entry,
                                                            unique_ptr<LogicalOperator> plan,
                                                            unique_ptr<CreateIndexInfo> create_info,
                                                            unique_ptr<AlterTableInfo> alter_info) {
	// ADD PRIMARY KEY: a plain ALTER (no index to build; the core checks the rows itself)
	auto &constraint = *alter_info->Cast<AddConstraintInfo>().constraint;
	if (constraint.type == ConstraintType::UNIQUE && !constraint.Cast<UniqueConstraint>().IsPrimaryKey()) {
		throw NotImplementedException("UNIQUE constraints are not supported on skade tables; use PRIMARY KEY");
	}
#if SKADE_DUCKDB_MAJOR >= 2
	return make_uniq<LogicalAlter>(unique_ptr<AlterInfo>(std::move(alter_info)));
#else
	return make_uniq<LogicalSimple>(LogicalOperatorType::LOGICAL_ALTER, std::move(alter_info));
#endif
}

ErrorData SkadeCatalog::SupportsCreateTable(BoundCreateTableInfo &info) {
	return ErrorData(); // PARTITIONED BY is a skade table's; the schema entry refuses what is not
}

void SkadeCatalog::OnDetach(ClientContext &context) {
	SkadeCheck(skade_catalog_detach(handle.get()));
}

DatabaseSize SkadeCatalog::GetDatabaseSize(ClientContext &context) {
	// The bytes the lake holds (the catalog file and the live files of every table, as DuckLake
	// counts its data files); DuckDB's blocks and WAL mean nothing here and stay 0.
	DatabaseSize size;
	uint64_t bytes = 0;
	SkadeCheck(skade_fn_database_size(SkadeTransaction::Get(context, *this).Handle(), &bytes));
	size.bytes = bytes;
	return size;
}

shared_ptr<SkadeTableShape> SkadeCatalog::TableShape(ClientContext &context, skade_table *table) {
	auto key = SkadeString(skade_table_uuid(table)) + "/" + to_string(skade_table_schema_id(table));
	{
		lock_guard<mutex> guard(shapes_lock);
		auto it = shapes.find(key);
		if (it != shapes.end()) {
			return it->second;
		}
	}
	auto shape = SkadeTableShape::Build(context, table);
	lock_guard<mutex> guard(shapes_lock);
	// Dropped tables leave their shapes behind: a bound keeps the cache small.
	if (shapes.size() >= 4096) {
		shapes.clear();
	}
	return shapes.emplace(key, std::move(shape)).first->second;
}

} // namespace duckdb
