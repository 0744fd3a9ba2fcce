// MERGE INTO, and the INSERT ... ON CONFLICT DO NOTHING / INSERT OR REPLACE statements DuckDB binds
// as MERGE INTO: DuckDB's own merge operator joins source and target and routes each row to one
// action; every writing action is one of skade's sinks, so the statement stays one snapshot.
#include "skade/insert.hpp"
#include "skade/modify.hpp"
#include "skade/table_entry.hpp"

#include "duckdb/execution/operator/persistent/physical_merge_into.hpp"

namespace duckdb {

namespace {

void RefuseReturning(const LogicalMergeInto &op) {
	if (op.return_chunk) {
		// (INSERT OR REPLACE and INSERT ... ON CONFLICT are bound as MERGE INTO too)
		throw NotImplementedException("RETURNING is not supported on skade tables yet (in MERGE INTO, INSERT OR "
		                              "REPLACE or INSERT ... ON CONFLICT)");
	}
}

#if SKADE_DUCKDB_MAJOR >= 2

//! The flag of a skade sink that says whether it ends the statement's writes (nullptr: not a
//! skade sink, e.g. a projection DuckDB put in front of one).
bool *EndsStatement(optional_ptr<PhysicalOperator> op) {
	if (!op) {
		return nullptr;
	}
	if (auto insert = dynamic_cast<SkadeInsert *>(op.get())) {
		return &insert->ends_statement;
	}
	if (auto update = dynamic_cast<SkadeUpdate *>(op.get())) {
		return &update->ends_statement;
	}
	if (auto del = dynamic_cast<SkadeDelete *>(op.get())) {
		return &del->ends_statement;
	}
	throw InternalException("skade: a MERGE action is planned as %s, not as a skade sink", op->GetName());
}

} // namespace

PhysicalOperator &SkadePlanMergeInto(ClientContext &context, PhysicalPlanGenerator &planner, LogicalMergeInto &op,
                                     PhysicalOperator &plan) {
	RefuseReturning(op);
	// 2.0 plans every action through the catalog's own INSERT, UPDATE and DELETE (each action reads
	// its rows from a source of its own, in a pipeline of its own).
	auto &merge = op.table.ParentCatalog().Catalog::PlanMergeInto(context, planner, op, plan).Cast<PhysicalMergeInto>();
	// One sink ends the statement (checks its keys once every action deleted and wrote its rows):
	// the last. Actions in pipelines of their own finish in any order unless they run one after
	// the other, so with several writing actions they do, in order.
	bool *last_writer = nullptr;
	idx_t writers = 0;
	for (auto &action : merge.actions) {
		auto ends_statement = EndsStatement(action->op);
		if (ends_statement) {
			*ends_statement = false;
			last_writer = ends_statement;
			writers++;
		}
	}
	if (last_writer) {
		*last_writer = true;
	}
	if (writers > 1) {
		merge.serialize_actions = true;
		merge.parallel = false;
	}
	return merge;
}

#else

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

} // namespace

PhysicalOperator &SkadePlanMergeInto(ClientContext &context, PhysicalPlanGenerator &planner, LogicalMergeInto &op,
                                     PhysicalOperator &plan) {
	RefuseReturning(op);
	auto &table = op.table.Cast<SkadeTableEntry>();
	auto cardinality = op.EstimateCardinality(context);
	map<MergeActionCondition, vector<unique_ptr<MergeIntoOperator>>> actions;
	// Which sink ends the statement: the last one DuckDB finalizes (actions finalize in order).
	bool *last_writer = nullptr;
	idx_t appends = 0;
	for (auto &entry : op.actions) {
		vector<unique_ptr<MergeIntoOperator>> planned;
		for (auto &action : entry.second) {
			auto result = make_uniq<MergeIntoOperator>();
			result->action_type = action->action_type;
			result->condition = std::move(action->condition);
			switch (action->action_type) {
			case MergeActionType::MERGE_INSERT: {
				result->expressions = InsertInTableOrder(op, *action);
				auto &insert = static_cast<SkadeInsert &>(planner.Make<SkadeInsert>(op.types, table, cardinality));
				for (auto &expr : result->expressions) {
					insert.input_types.push_back(SkadeReturnType(*expr));
				}
				insert.ends_statement = false;
				last_writer = &insert.ends_statement;
				result->op = insert;
				appends++;
				break;
			}
			case MergeActionType::MERGE_UPDATE: {
				auto &update = static_cast<SkadeUpdate &>(planner.Make<SkadeUpdate>(
				    op.types, table, SkadeUpdateInTableOrder(action->columns, action->expressions), cardinality));
				update.ends_statement = false;
				last_writer = &update.ends_statement;
				result->op = update;
				appends++;
				break;
			}
			case MergeActionType::MERGE_DELETE: {
				auto &del = static_cast<SkadeDelete &>(
				    planner.Make<SkadeDelete>(op.types, table, op.row_id_start, cardinality));
				last_writer = &del.ends_statement;
				result->op = del;
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
			planned.push_back(std::move(result));
		}
		actions.emplace(entry.first, std::move(planned));
	}
	if (last_writer) {
		*last_writer = true;
	}
	// DuckDB's merge runs in parallel only with at most one appending action.
	bool parallel = appends <= 1;
	auto &merge = planner.Make<PhysicalMergeInto>(op.types, std::move(actions), op.row_id_start, op.source_marker,
	                                              parallel, op.return_chunk);
	merge.children.push_back(plan);
	return merge;
}

#endif

} // namespace duckdb
