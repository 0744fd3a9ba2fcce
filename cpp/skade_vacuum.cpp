// VACUUM and ANALYZE of a skade table, decided before DuckDB scans it. DuckDB binds both as a scan
// of every column that feeds distinct counts into its own storage, which a skade table does not
// have: after reading the whole table it fails with "Vacuum is only implemented for DuckDB
// tables". ANALYZE has nothing to gather (skade gives DuckDB's optimizer column statistics from
// the table's manifests): it succeeds at once, as a plain `ANALYZE` does. VACUUM is refused up
// front, naming skade_compact, which rewrites a table's small files and deletes. An optimizer
// extension: a statement planned with the optimizer off gets DuckDB's own error.
#include "skade/common.hpp"
#include "skade/functions.hpp"

#include "duckdb/catalog/catalog_entry/table_catalog_entry.hpp"
#include "duckdb/optimizer/optimizer_extension.hpp"
#include "duckdb/parser/keyword_helper.hpp"
#include "duckdb/parser/parsed_data/vacuum_info.hpp"
#include "duckdb/planner/operator/logical_vacuum.hpp"

namespace duckdb {

namespace {

void DecideVacuum(OptimizerExtensionInput &input, unique_ptr<LogicalOperator> &plan) {
	if (!plan || plan->type != LogicalOperatorType::LOGICAL_VACUUM) {
		return;
	}
	auto &vacuum = plan->Cast<LogicalVacuum>();
	if (!vacuum.HasTable() || vacuum.GetTable().ParentCatalog().GetCatalogType() != "skade") {
		return;
	}
	auto &table = vacuum.GetTable();
	auto &info = vacuum.GetInfo();
	if (info.options.vacuum) {
		// the name skade's table functions take: 'lake.t', 'lake.sales.t', 'lake."a.b"' (each part
		// quoted where it must be, then the quotes of the SQL string doubled)
		auto part = [](const string &name) { return KeywordHelper::WriteOptionallyQuoted(name); };
		auto schema = SkadeNameString(table.ParentSchema().name);
		auto qualified = part(SkadeNameString(table.ParentCatalog().GetName())) + "." +
		                 (schema == DEFAULT_SCHEMA ? string() : part(schema) + ".") + part(SkadeNameString(table.name));
		qualified = StringUtil::Replace(qualified, "'", "''");
		throw NotImplementedException(
		    "VACUUM is not supported on skade tables: to rewrite the small files and deletes of %s into one, run "
		    "SELECT * FROM skade_compact('%s') (skade_expire_snapshots('%s', ...) drops old snapshots); ANALYZE is "
		    "not needed (skade gives DuckDB column statistics from the table's manifests)",
		    qualified, qualified, qualified);
	}
	// ANALYZE: nothing to gather. What DuckDB plans for a plain `ANALYZE` (no table): no scan.
	info.has_table = false;
	info.columns.clear();
	vacuum.table = optional_ptr<TableCatalogEntry>();
	vacuum.column_id_map.clear();
	vacuum.children.clear();
}

} // namespace

OptimizerExtension SkadeVacuumRule() {
	OptimizerExtension extension;
	extension.pre_optimize_function = DecideVacuum;
	return extension;
}

} // namespace duckdb
