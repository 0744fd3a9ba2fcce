// A schema of a skade catalog, as the transactions of one entry set see it (SkadeEntrySet): its
// entries are built through the transaction of the client that asks.
#pragma once

#include "skade/common.hpp"
#include "skade/macro_entry.hpp"
#include "duckdb/catalog/catalog_entry/schema_catalog_entry.hpp"
#include "duckdb/catalog/catalog_entry/view_catalog_entry.hpp"

namespace duckdb {

class SkadeTableEntry;
class SkadeTransaction;

class SkadeSchemaEntry : public SchemaCatalogEntry {
public:
	SkadeSchemaEntry(Catalog &catalog, CreateSchemaInfo &info);
	~SkadeSchemaEntry() override;

	//! The table, cached in the entry set, or nullptr.
	optional_ptr<SkadeTableEntry> GetTable(ClientContext &context, const string &name);
	//! The view, cached in the entry set, or nullptr.
	optional_ptr<ViewCatalogEntry> GetView(ClientContext &context, const string &name);
	//! The macro of `type`'s kind (see SkadeIsMacroType), or nullptr.
	optional_ptr<CatalogEntry> GetMacro(ClientContext &context, CatalogType type, const string &name);
	//! Wraps a core table handle into an entry owned by this schema.
	SkadeTableEntry &AddTable(ClientContext &context, SkadeTableHandle table);

	optional_ptr<CatalogEntry> CreateTable(CatalogTransaction transaction, BoundCreateTableInfo &info) override;
	optional_ptr<CatalogEntry> LookupEntry(CatalogTransaction transaction, const EntryLookupInfo &lookup_info) override;
	void Scan(ClientContext &context, CatalogType type, const std::function<void(CatalogEntry &)> &callback) override;
	void Scan(CatalogType type, const std::function<void(CatalogEntry &)> &callback) override;
	void DropEntry(ClientContext &context, DropInfo &info) override;
	void Alter(CatalogTransaction transaction, AlterInfo &info) override;

	optional_ptr<CatalogEntry> CreateIndex(CatalogTransaction transaction, CreateIndexInfo &info,
	                                       TableCatalogEntry &table) override;
	optional_ptr<CatalogEntry> CreateFunction(CatalogTransaction transaction, CreateFunctionInfo &info) override;
	optional_ptr<CatalogEntry> CreateView(CatalogTransaction transaction, CreateViewInfo &info) override;
	optional_ptr<CatalogEntry> CreateSequence(CatalogTransaction transaction, CreateSequenceInfo &info) override;
	optional_ptr<CatalogEntry> CreateTableFunction(CatalogTransaction transaction,
	                                               CreateTableFunctionInfo &info) override;
	optional_ptr<CatalogEntry> CreateCopyFunction(CatalogTransaction transaction,
	                                              CreateCopyFunctionInfo &info) override;
	optional_ptr<CatalogEntry> CreatePragmaFunction(CatalogTransaction transaction,
	                                                CreatePragmaFunctionInfo &info) override;
	optional_ptr<CatalogEntry> CreateCollation(CatalogTransaction transaction, CreateCollationInfo &info) override;
	optional_ptr<CatalogEntry> CreateType(CatalogTransaction transaction, CreateTypeInfo &info) override;

private:
	//! The transaction of the client asking (every transaction of the entry set reads the same
	//! committed state).
	SkadeTransaction &Txn(ClientContext &context);

	mutex lock;
	case_insensitive_map_t<unique_ptr<SkadeTableEntry>> tables;
	case_insensitive_map_t<unique_ptr<ViewCatalogEntry>> views;
	SkadeMacros macros;
};

} // namespace duckdb
