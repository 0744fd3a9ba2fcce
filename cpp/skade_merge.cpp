// MERGE INTO, and the INSERT ... ON CONFLICT DO NOTHING / DO UPDATE and INSERT OR REPLACE
// statements DuckDB binds as MERGE INTO: DuckDB's own merge operator joins source and target and
// routes each row to one action; every writing action is one of skade's sinks, so the statement
// stays one snapshot. With RETURNING each sink returns its rows (INSERT and UPDATE the new ones,
// DELETE the old ones) and DuckDB's merge adds the action's name (merge_action).
#include "skade/insert.hpp"
#include "skade/modify.hpp"
#include "skade/table_entry.hpp"

#include "duckdb/execution/operator/persistent/physical_merge_into.hpp"
#include "duckdb/planner/expression/bound_cast_expression.hpp"

namespace duckdb {

namespace {

//! Casts each of the values of the table's columns, in table order, to its column's type (the
//! sinks read rows of the table's types, and RETURNING returns them).
vector<unique_ptr<Expression>> AsColumnTypes(ClientContext &context, SkadeTableEntry &table,
                                             vector<unique_ptr<Expression>> values) {
	auto &columns = table.GetColumns();
	for (idx_t i = 0; i < values.size(); i++) {
		values[i] = BoundCastExpression::AddCastToType(context, std::move(values[i]),
		                                               columns.GetColumn(PhysicalIndex(i)).Type());
	}
	return values;
}

//! An INSERT action's values for every column in table order (defaults where the action names
//! no value).
vector<unique_ptr<Expression>> InsertInTableOrder(LogicalMergeInto &op, BoundMergeIntoAction &action) {
	if (action.column_index_map.empty()) {
		return std::move(action.expressions);
	}
	vector<unique_ptr<Expression>> result;
	for (auto &col : op.table.GetColumns().Physical()) {
		auto mapped = action.column_index_map[col.Physical()];
		if (mapped == DConstants::INVALID_INDEX) {
			result.push_back(op.bound_defaults[col.StorageOid()]->Copy());
		} else {
			result.push_back(std::move(action.expressions[mapped]));
		}
	}
	return result;
}

//! Where a DELETE action finds the deleted rows' columns in the merge's input, in table order.
vector<idx_t> DeletedColumns(LogicalMergeInto &op, PhysicalOperator &input, idx_t column_count) {
#if SKADE_DUCKDB_MAJOR >= 2
	// (DuckDB 2.0's binder puts them in the merge's input)
	for (auto column : op.delete_return_columns) {
		if (column == DConstants::INVALID_INDEX) {
			throw InternalException("skade: a MERGE's DELETE does not read every column to return");
		}
	}
	if (op.delete_return_columns.size() != column_count) {
		throw InternalException("skade: a MERGE's DELETE does not read every column to return");
	}
	return op.delete_return_columns;
#else
	// (SkadeReturningRule put them last, after the row id)
	if (input.types.size() != op.row_id_start + 1 + column_count) {
		throw NotImplementedException("MERGE ... RETURNING with a DELETE on a skade table needs DuckDB's optimizer, "
		                              "which makes the merge read the deleted rows (it is disabled)");
	}
	vector<idx_t> result;
	for (idx_t i = 0; i < column_count; i++) {
		result.push_back(op.row_id_start + 1 + i);
	}
	return result;
#endif
}

} // namespace

PhysicalOperator &SkadePlanMergeInto(ClientContext &context, PhysicalPlanGenerator &planner, LogicalMergeInto &op,
                                     PhysicalOperator &plan) {
	auto &table = op.table.Cast<SkadeTableEntry>();
#if SKADE_DUCKDB_MAJOR >= 2
	auto cardinality = op.estimated_cardinality; // (planning the child consumed the logical plan)
#else
	auto cardinality = op.EstimateCardinality(context);
#endif
	// The sinks' rows: with RETURNING the table's columns (the merge adds merge_action), else a count.
	auto sink_types = op.types;
	if (op.return_chunk) {
		sink_types.pop_back();
	}
	auto column_count = table.GetColumns().PhysicalColumnCount();
	map<MergeActionCondition, vector<unique_ptr<MergeIntoOperator>>> actions;
	vector<SkadeWriteOperator *> sinks;
	vector<bool *> ends_statement;
	idx_t appends = 0;
	for (auto &entry : op.actions) {
		vector<unique_ptr<MergeIntoOperator>> planned;
		for (auto &action : entry.second) {
			auto result = make_uniq<MergeIntoOperator>();
			result->action_type = action->action_type;
			result->condition = std::move(action->condition);
			SkadeWriteOperator *sink = nullptr;
			switch (action->action_type) {
			case MergeActionType::MERGE_INSERT: {
				// (the merge computes the values: the sink reads rows of the table's columns)
				result->expressions = AsColumnTypes(context, table, InsertInTableOrder(op, *action));
				auto &insert = static_cast<SkadeInsert &>(planner.Make<SkadeInsert>(sink_types, table, cardinality));
				for (auto &expr : result->expressions) {
					insert.input_types.push_back(SkadeReturnType(*expr));
				}
				ends_statement.push_back(&insert.ends_statement);
				sink = &insert;
				appends++;
				break;
			}
			case MergeActionType::MERGE_UPDATE: {
				auto values =
				    AsColumnTypes(context, table, SkadeUpdateInTableOrder(action->columns, action->expressions));
				auto &update = static_cast<SkadeUpdate &>(
				    planner.Make<SkadeUpdate>(sink_types, table, std::move(values), op.row_id_start, cardinality));
				ends_statement.push_back(&update.ends_statement);
				sink = &update;
				appends++;
				break;
			}
			case MergeActionType::MERGE_DELETE: {
				auto &del = static_cast<SkadeDelete &>(
				    planner.Make<SkadeDelete>(sink_types, table, op.row_id_start, cardinality));
				if (op.return_chunk) {
					del.returned_columns = DeletedColumns(op, plan, column_count);
				}
				ends_statement.push_back(&del.ends_statement);
				sink = &del;
				break;
			}
			case MergeActionType::MERGE_ERROR:
				result->expressions = std::move(action->expressions);
				break;
			case MergeActionType::MERGE_DO_NOTHING:
				break;
			default:
				throw NotImplementedException("this MERGE action is not supported on skade tables");
			}
			if (sink) {
				sink->returning = op.return_chunk;
				result->op = *sink;
#if SKADE_DUCKDB_MAJOR >= 2
				// 2.0 feeds each action from a source of its own, in a pipeline of its own (an INSERT's
				// values computed in a projection over it).
				sink->children.push_back(PlanMergeActionSource(planner, plan, entry.first, *result));
#endif
				sinks.push_back(sink);
			}
			planned.push_back(std::move(result));
		}
		actions.emplace(entry.first, std::move(planned));
	}
	// One sink ends the statement (checks its keys once every action deleted and wrote its rows):
	// the one DuckDB finalizes last. 1.5 finalizes the actions in order; 2.0 runs several writing
	// actions one after the other, in order, when told to (else in any order).
	for (auto ends : ends_statement) {
		*ends = false;
	}
	if (!ends_statement.empty()) {
		*ends_statement.back() = true;
	}
	// DuckDB's merge runs in parallel only with at most one appending action, and without RETURNING.
	bool parallel = appends <= 1 && !op.return_chunk;
#if SKADE_DUCKDB_MAJOR >= 2
	bool serialize = sinks.size() > 1;
	return planner.Make<PhysicalMergeInto>(op.types, plan, std::move(actions), op.row_id_start, op.source_marker,
	                                       parallel && !serialize, op.return_chunk, serialize);
#else
	auto &merge = planner.Make<PhysicalMergeInto>(op.types, std::move(actions), op.row_id_start, op.source_marker,
	                                              parallel, op.return_chunk);
	merge.children.push_back(plan);
	return merge;
#endif
}

} // namespace duckdb
