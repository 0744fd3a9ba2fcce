// Macros of a skade catalog: DuckDB's macro entries rebuilt from the CREATE MACRO statement the
// core keeps for each.
#pragma once

#include "skade/common.hpp"
#include "duckdb/catalog/catalog_entry/macro_catalog_entry.hpp"
#include "duckdb/parser/parsed_data/create_macro_info.hpp"
#include "duckdb/parser/parsed_data/drop_info.hpp"

namespace duckdb {

//! Whether a lookup, scan or drop of `type` is about macros (scalar: SCALAR_FUNCTION_ENTRY, as the
//! binder looks a function call up, or MACRO_ENTRY; table: TABLE_FUNCTION_ENTRY or
//! TABLE_MACRO_ENTRY).
bool SkadeIsMacroType(CatalogType type);

//! The macros of one schema as one transaction sees them. The core's list (kinds, names,
//! statements) is read once, at the first lookup: a schema on the search path is asked for every
//! function a query calls, and answers the names that are no macro from it. An entry is built
//! (its statement parsed) the first time a statement names it, and lives as long as the schema
//! entry (bound plans may point at it).
class SkadeMacros {
public:
	//! The macro of `type`'s kind named `name`, or nullptr.
	optional_ptr<CatalogEntry> Lookup(ClientContext &context, SchemaCatalogEntry &schema, skade_txn *txn,
	                                  CatalogType type, const string &name);
	//! Every macro of `type`'s kind.
	void Scan(ClientContext &context, SchemaCatalogEntry &schema, skade_txn *txn, CatalogType type,
	          const std::function<void(CatalogEntry &)> &callback);
	//! The macros of `type`'s kind already built (a scan without a context can build none).
	void ScanBuilt(CatalogType type, const std::function<void(CatalogEntry &)> &callback);

private:
	struct Stored {
		string name;
		string sql;
		unique_ptr<MacroCatalogEntry> entry;
	};
	case_insensitive_map_t<Stored> &Kind(CatalogType type);
	void Load(SchemaCatalogEntry &schema, skade_txn *txn);
	CatalogEntry &Built(ClientContext &context, SchemaCatalogEntry &schema, CatalogType type, Stored &stored);

	mutex lock;
	bool loaded = false;
	case_insensitive_map_t<Stored> scalar;
	case_insensitive_map_t<Stored> table;
};

//! The name a CREATE MACRO gives its macro.
string SkadeMacroName(const CreateMacroInfo &info);

//! CREATE [OR REPLACE] MACRO [IF NOT EXISTS]: hands the statement, as DuckDB prints it, to the core.
void SkadeCreateMacro(ClientContext &context, skade_txn *txn, const string &schema, CreateMacroInfo &info);

//! DROP MACRO [TABLE].
void SkadeDropMacro(skade_txn *txn, const string &schema, DropInfo &info);

} // namespace duckdb
