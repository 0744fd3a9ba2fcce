// DELETE ... RETURNING returns the rows deleted. DuckDB's own tables fetch them by row id; a skade
// row id names a file and a position, which only a scan reads cheaply. So before DuckDB optimizes
// the statement, this rule has its scan of the table read every column and pass them to the sink
// after the row id: as the DELETE's expressions (DuckDB resolves them to the sink's input columns
// through filters and joins) or, in a MERGE on DuckDB 1.5, as its input's last columns (DuckDB 2.0
// binds a MERGE's DELETE that way itself). DuckDB keeps every column below a DML operator, so the
// rest of the optimizer leaves them. With the optimizer disabled the rule does not run, and the
// planner says so (SkadeCatalog::PlanDelete).
#include "skade/modify.hpp"

#include "duckdb/optimizer/optimizer_extension.hpp"
#include "duckdb/planner/expression/bound_columnref_expression.hpp"
#include "duckdb/planner/operator/logical_delete.hpp"
#include "duckdb/planner/operator/logical_get.hpp"
#include "duckdb/planner/operator/logical_merge_into.hpp"
#include "duckdb/planner/operator/logical_projection.hpp"

namespace duckdb {

namespace {

bool IsSkade(TableCatalogEntry &table) {
	return table.ParentCatalog().GetCatalogType() == "skade";
}

//! The scan in `op`'s subtree that a row id reference reads from.
optional_ptr<LogicalGet> ScanOf(LogicalOperator &op, const Expression &row_id) {
	if (row_id.GetExpressionClass() != ExpressionClass::BOUND_COLUMN_REF) {
		return nullptr;
	}
	auto &binding = SkadeBindingOf(row_id.Cast<BoundColumnRefExpression>());
	if (op.type == LogicalOperatorType::LOGICAL_GET) {
		auto &get = op.Cast<LogicalGet>();
		if (get.table_index == binding.table_index) {
			return &get;
		}
	}
	for (auto &child : op.children) {
		auto found = ScanOf(*child, row_id);
		if (found) {
			return found;
		}
	}
	return nullptr;
}

//! References to every column of `table` as `get` outputs it (added to the scan where it does not
//! read it yet), in table order; none when the scan's outputs are projected already.
vector<unique_ptr<Expression>> ReadEveryColumn(LogicalGet &get, TableCatalogEntry &table) {
	vector<unique_ptr<Expression>> result;
	if (!get.projection_ids.empty()) {
		return result;
	}
	for (auto &column : table.GetColumns().Physical()) {
		auto index = column.Logical().index;
		auto &read = get.GetColumnIds();
		idx_t position = read.size();
		for (idx_t i = 0; i < read.size(); i++) {
			if (!read[i].IsVirtualColumn() && read[i].GetPrimaryIndex() == index && !read[i].HasChildren()) {
				position = i;
				break;
			}
		}
		if (position == read.size()) {
			get.AddColumnId(index);
		}
		result.push_back(make_uniq<BoundColumnRefExpression>(column.Type(), SkadeColumnBinding(get.table_index, position)));
	}
	return result;
}

//! A DELETE ... RETURNING: the old rows' columns as its expressions after the row id.
bool AddDeletedColumns(LogicalDelete &del) {
	if (!del.return_chunk || !IsSkade(del.table) || del.expressions.size() != 1) {
		return false;
	}
	auto get = ScanOf(*del.children[0], *del.expressions[0]);
	if (!get) {
		return false;
	}
	for (auto &column : ReadEveryColumn(*get, del.table)) {
		del.expressions.push_back(std::move(column));
	}
	return true;
}

#if SKADE_DUCKDB_MAJOR < 2
//! A MERGE ... RETURNING with a DELETE action: the old rows' columns as its input's last columns.
bool AddMergeDeletedColumns(LogicalMergeInto &merge) {
	if (!merge.return_chunk || !IsSkade(merge.table)) {
		return false;
	}
	bool deletes = false;
	for (auto &entry : merge.actions) {
		for (auto &action : entry.second) {
			deletes = deletes || action->action_type == MergeActionType::MERGE_DELETE;
		}
	}
	auto &input = *merge.children[0];
	if (!deletes || input.type != LogicalOperatorType::LOGICAL_PROJECTION) {
		return false;
	}
	auto &projection = input.Cast<LogicalProjection>();
	if (projection.expressions.size() != merge.row_id_start + 1) {
		return false;
	}
	auto get = ScanOf(*projection.children[0], *projection.expressions[merge.row_id_start]);
	if (!get) {
		return false;
	}
	for (auto &column : ReadEveryColumn(*get, merge.table)) {
		projection.expressions.push_back(std::move(column));
	}
	return true;
}
#endif

bool AddReturnedColumns(LogicalOperator &op) {
	bool changed = false;
	if (op.type == LogicalOperatorType::LOGICAL_DELETE) {
		changed = AddDeletedColumns(op.Cast<LogicalDelete>());
	}
#if SKADE_DUCKDB_MAJOR < 2
	if (op.type == LogicalOperatorType::LOGICAL_MERGE_INTO) {
		changed = AddMergeDeletedColumns(op.Cast<LogicalMergeInto>());
	}
#endif
	for (auto &child : op.children) {
		changed = AddReturnedColumns(*child) || changed;
	}
	return changed;
}

void ReturnDeletedRows(OptimizerExtensionInput &input, unique_ptr<LogicalOperator> &plan) {
	if (plan && AddReturnedColumns(*plan)) {
		plan->ResolveOperatorTypes(); // (the scans and what passes their columns on have more)
	}
}

} // namespace

OptimizerExtension SkadeReturningRule() {
	OptimizerExtension extension;
	extension.pre_optimize_function = ReturnDeletedRows;
	return extension;
}

} // namespace duckdb
