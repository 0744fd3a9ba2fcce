// ATTACH ... (TYPE skade): the DuckDB catalog backed by one skade catalog file.
#pragma once

#include "skade/common.hpp"
#include "duckdb/catalog/catalog.hpp"

namespace duckdb {

struct SkadeEntrySet;
struct SkadeTableShape;

class SkadeCatalog : public Catalog {
public:
	SkadeCatalog(AttachedDatabase &db, SkadeCatalogHandle handle, string path, vector<string> bucket_urls = {});

	skade_catalog *Handle() const {
		return handle.get();
	}
	//! The s3:// URLs the catalog uses (its path, DATA_PATH, COMMIT_LOG): each transaction reads
	//! their secrets again (SkadePassSecrets), so that a replaced secret or refreshed token reaches
	//! the core.
	const vector<string> &BucketUrls() const {
		return bucket_urls;
	}

	void Initialize(bool load_builtin) override;
	string GetCatalogType() override {
		return "skade";
	}
	bool SupportsTimeTravel() const override {
		return true;
	}

	optional_ptr<CatalogEntry> CreateSchema(CatalogTransaction transaction, CreateSchemaInfo &info) override;
	optional_ptr<SchemaCatalogEntry> LookupSchema(CatalogTransaction transaction, const EntryLookupInfo &schema_lookup,
	                                              OnEntryNotFound if_not_found) override;
	void ScanSchemas(ClientContext &context, std::function<void(SchemaCatalogEntry &)> callback) override;
	void DropSchema(ClientContext &context, DropInfo &info) override;

	PhysicalOperator &PlanCreateTableAs(ClientContext &context, PhysicalPlanGenerator &planner, LogicalCreateTable &op,
	                                    PhysicalOperator &plan) override;
	PhysicalOperator &PlanInsert(ClientContext &context, PhysicalPlanGenerator &planner, LogicalInsert &op,
	                             optional_ptr<PhysicalOperator> plan) override;
	PhysicalOperator &PlanDelete(ClientContext &context, PhysicalPlanGenerator &planner, LogicalDelete &op,
	                             PhysicalOperator &plan) override;
	PhysicalOperator &PlanUpdate(ClientContext &context, PhysicalPlanGenerator &planner, LogicalUpdate &op,
	                             PhysicalOperator &plan) override;
	PhysicalOperator &PlanMergeInto(ClientContext &context, PhysicalPlanGenerator &planner, LogicalMergeInto &op,
	                                PhysicalOperator &plan) override;

	//! Indexes: refused (DuckDB's own binding assumes its own table scans); ADD PRIMARY KEY: an ALTER.
	unique_ptr<LogicalOperator> BindCreateIndex(Binder &binder, CreateStatement &stmt, TableCatalogEntry &table,
	                                            unique_ptr<LogicalOperator> plan) override;
	unique_ptr<LogicalOperator> BindAlterAddIndex(Binder &binder, TableCatalogEntry &table_entry,
	                                              unique_ptr<LogicalOperator> plan,
	                                              unique_ptr<CreateIndexInfo> create_info,
	                                              unique_ptr<AlterTableInfo> alter_info) override;

	//! CREATE TABLE ... PARTITIONED BY: allowed (DuckDB refuses it for catalogs by default).
	ErrorData SupportsCreateTable(BoundCreateTableInfo &info) override;

	//! DETACH: every acknowledged commit made durable, or an error saying why not.
	void OnDetach(ClientContext &context) override;

	DatabaseSize GetDatabaseSize(ClientContext &context) override;
	bool InMemory() override {
		return false;
	}
	string GetDBPath() override {
		return path;
	}

	//! The transaction's catalog version (see SkadeTransaction::CatalogVersion): DuckDB keeps a
	//! prepared statement's plan while it does not change.
	optional_idx GetCatalogVersion(ClientContext &context) override;
	//! The entry set of the committed state `generation`, shared by the transactions that read it:
	//! the newest generation's set stays with the catalog between transactions (so that a plan
	//! prepared on it can run again), an older one lives as long as a transaction holds it.
	shared_ptr<SkadeEntrySet> SharedEntries(uint64_t generation);

	//! The shape of a table's current columns, from the cache shared by all transactions
	//! (keyed by table id and schema id, which never change meaning), built on a miss.
	shared_ptr<SkadeTableShape> TableShape(ClientContext &context, skade_table *table);

private:
	SkadeCatalogHandle handle;
	string path;
	vector<string> bucket_urls;
	mutex entries_lock;
	shared_ptr<SkadeEntrySet> newest_entries;
	mutex shapes_lock;
	unordered_map<string, shared_ptr<SkadeTableShape>> shapes;
};

} // namespace duckdb
