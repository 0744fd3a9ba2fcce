// Views of a skade catalog: DuckDB view entries rebuilt from what the core keeps.
#pragma once

#include "skade/common.hpp"
#include "duckdb/catalog/catalog_entry/view_catalog_entry.hpp"
#include "duckdb/parser/parsed_data/create_view_info.hpp"

namespace duckdb {

//! The view `schema.name` as this transaction sees it, or nullptr when no view has that name. Its
//! columns are bound the first time a query reads it (as DuckDB binds a view it loaded).
unique_ptr<ViewCatalogEntry> SkadeLoadView(ClientContext &context, SchemaCatalogEntry &schema, skade_txn *txn,
                                           const string &name);

//! CREATE VIEW: hands the view's query, aliases, comment and bound columns to the core.
void SkadeCreateView(ClientContext &context, skade_txn *txn, const string &schema, CreateViewInfo &info);

} // namespace duckdb
