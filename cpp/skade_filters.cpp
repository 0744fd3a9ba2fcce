// DuckDB's pushed-down table filters: described for the core's pruning, and as one expression
// for exact evaluation. Shared by table scans and the changelog function.
#include "skade/filters.hpp"

#include "duckdb/common/arrow/arrow_converter.hpp"
#include "duckdb/planner/expression/bound_conjunction_expression.hpp"
#include "duckdb/planner/expression/bound_reference_expression.hpp"
#if SKADE_DUCKDB_MAJOR >= 2
#include "duckdb/planner/expression/bound_comparison_expression.hpp"
#include "duckdb/planner/expression/bound_constant_expression.hpp"
#include "duckdb/planner/expression/bound_function_expression.hpp"
#include "duckdb/planner/expression/bound_operator_expression.hpp"
#include "duckdb/planner/filter/expression_filter.hpp"
#include "duckdb/planner/table_filter_set.hpp"
#else
#include "duckdb/planner/filter/conjunction_filter.hpp"
#include "duckdb/planner/filter/constant_filter.hpp"
#include "duckdb/planner/filter/in_filter.hpp"
#include "duckdb/planner/filter/optional_filter.hpp"
#endif

namespace duckdb {

namespace {

//! IN lists longer than this do not take part in pruning.
constexpr idx_t MAX_PRUNING_IN_VALUES = 1024;

const char *ComparisonOp(ExpressionType type) {
	switch (type) {
	case ExpressionType::COMPARE_EQUAL:
		return "eq";
	case ExpressionType::COMPARE_NOTEQUAL:
		return "ne";
	case ExpressionType::COMPARE_LESSTHAN:
		return "lt";
	case ExpressionType::COMPARE_LESSTHANOREQUALTO:
		return "le";
	case ExpressionType::COMPARE_GREATERTHAN:
		return "gt";
	case ExpressionType::COMPARE_GREATERTHANOREQUALTO:
		return "ge";
	default:
		return nullptr;
	}
}

//! {"op":"and"|"or","args":[...]} of the parts described: a conjunction still prunes with the
//! parts it can describe, a disjunction with an unknown arm ("") prunes nothing.
string DescribeConjunction(bool is_and, const vector<string> &parts) {
	string args;
	for (auto &c : parts) {
		if (c.empty()) {
			if (is_and) {
				continue;
			}
			return "";
		}
		args += (args.empty() ? "" : ",") + c;
	}
	return StringUtil::Format("{\"op\":\"%s\",\"args\":[%s]}", is_and ? "and" : "or", args);
}

#if SKADE_DUCKDB_MAJOR >= 2

// 2.0: every pushed-down filter is an expression over its column (a BoundReferenceExpression):
// comparisons are functions, IN and IS [NOT] NULL operators, a join's runtime filters calls of
// the optional filter functions wrapping their condition.

//! JSON for one filter expression on table column `col`, or "" when it has no pruning form.
string DescribeExpression(const Expression &expr, idx_t col, vector<Value> &constants) {
	auto column = "\"col\":" + to_string(col);
	if (BoundComparisonExpression::IsComparison(expr)) {
		ExpressionType comparison;
		auto constant =
		    ExpressionFilter::TryGetColumnConstantComparison(expr.Cast<BoundFunctionExpression>(), comparison);
		auto op = ComparisonOp(comparison);
		if (!constant || !op || constant->GetValue().IsNull()) {
			return "";
		}
		constants.push_back(constant->GetValue());
		return StringUtil::Format("{\"op\":\"%s\",%s,\"const\":%d}", op, column, constants.size() - 1);
	}
	switch (expr.GetExpressionClass()) {
	case ExpressionClass::BOUND_OPERATOR: {
		auto &children = expr.Cast<BoundOperatorExpression>().GetChildren();
		if (children.empty() || !ExpressionFilter::IsSimpleFilterColumnRef(*children[0])) {
			return "";
		}
		switch (expr.GetExpressionType()) {
		case ExpressionType::OPERATOR_IS_NULL:
			return "{\"op\":\"is_null\"," + column + "}";
		case ExpressionType::OPERATOR_IS_NOT_NULL:
			return "{\"op\":\"is_not_null\"," + column + "}";
		case ExpressionType::COMPARE_IN: {
			if (children.size() - 1 > MAX_PRUNING_IN_VALUES) {
				return ""; // pruning is optional; DuckDB still applies the whole list
			}
			string list;
			for (idx_t i = 1; i < children.size(); i++) {
				if (children[i]->GetExpressionClass() != ExpressionClass::BOUND_CONSTANT) {
					return "";
				}
				auto &v = children[i]->Cast<BoundConstantExpression>().GetValue();
				if (v.IsNull()) {
					continue;
				}
				constants.push_back(v);
				list += (list.empty() ? "" : ",") + to_string(constants.size() - 1);
			}
			return "{\"op\":\"in\"," + column + ",\"consts\":[" + list + "]}";
		}
		default:
			return "";
		}
	}
	case ExpressionClass::BOUND_CONJUNCTION: {
		vector<string> parts;
		for (auto &child : expr.Cast<BoundConjunctionExpression>().GetChildren()) {
			parts.push_back(DescribeExpression(*child, col, constants));
		}
		return DescribeConjunction(expr.GetExpressionType() == ExpressionType::CONJUNCTION_AND, parts);
	}
	case ExpressionClass::BOUND_FUNCTION: {
		// A join's runtime filter: it may prune, as DuckDB's zone maps use it, but is no condition
		// of the query (DuckDB pushes it below LIMIT and DISTINCT ON too): never a pinned key.
		auto optional_child = ExpressionFilter::GetOptionalFilterChild(expr);
		if (!optional_child) {
			return "";
		}
		auto child = DescribeExpression(*optional_child, col, constants);
		return child.empty() ? "" : "{\"op\":\"hint\",\"arg\":" + child + "}";
	}
	default:
		return "";
	}
}

string DescribeFilter(const TableFilter &filter, idx_t col, vector<Value> &constants) {
	auto &f = ExpressionFilter::GetExpressionFilter(filter, "skade: describing a filter for pruning");
	return f.expr ? DescribeExpression(*f.expr, col, constants) : "";
}

#else

//! JSON for one filter on table column `col`, or "" when it has no pruning form. Constants are
//! appended to `constants` and referenced by position.
string DescribeFilter(const TableFilter &filter, idx_t col, vector<Value> &constants) {
	auto column = "\"col\":" + to_string(col);
	switch (filter.filter_type) {
	case TableFilterType::CONSTANT_COMPARISON: {
		auto &f = filter.Cast<ConstantFilter>();
		auto op = ComparisonOp(f.comparison_type);
		if (!op || f.constant.IsNull()) {
			return "";
		}
		constants.push_back(f.constant);
		return StringUtil::Format("{\"op\":\"%s\",%s,\"const\":%d}", op, column, constants.size() - 1);
	}
	case TableFilterType::IS_NULL:
		return "{\"op\":\"is_null\"," + column + "}";
	case TableFilterType::IS_NOT_NULL:
		return "{\"op\":\"is_not_null\"," + column + "}";
	case TableFilterType::IN_FILTER: {
		auto &f = filter.Cast<InFilter>();
		if (f.values.size() > MAX_PRUNING_IN_VALUES) {
			return ""; // pruning is optional; DuckDB still applies the whole list
		}
		string list;
		for (auto &v : f.values) {
			if (v.IsNull()) {
				continue;
			}
			constants.push_back(v);
			list += (list.empty() ? "" : ",") + to_string(constants.size() - 1);
		}
		return "{\"op\":\"in\"," + column + ",\"consts\":[" + list + "]}";
	}
	case TableFilterType::CONJUNCTION_AND:
	case TableFilterType::CONJUNCTION_OR: {
		auto is_and = filter.filter_type == TableFilterType::CONJUNCTION_AND;
		auto &children = is_and ? filter.Cast<ConjunctionAndFilter>().child_filters
		                        : filter.Cast<ConjunctionOrFilter>().child_filters;
		vector<string> parts;
		for (auto &child : children) {
			parts.push_back(DescribeFilter(*child, col, constants));
		}
		return DescribeConjunction(is_and, parts);
	}
	case TableFilterType::OPTIONAL_FILTER: {
		// A join's runtime filter: it may prune, as DuckDB's zone maps use it, but is no condition
		// of the query (DuckDB pushes it below LIMIT and DISTINCT ON too): never a pinned key.
		auto child = DescribeFilter(*filter.Cast<OptionalFilter>().child_filter, col, constants);
		return child.empty() ? "" : "{\"op\":\"hint\",\"arg\":" + child + "}";
	}
	default:
		return "";
	}
}

#endif

} // namespace

void SkadeDescribeFilters(ClientContext &context, const TableFilterSet &filters, const vector<column_t> &column_ids,
                          SkadeFilterDescription &out) {
	string json;
	vector<Value> constants;
	for (auto &entry : SkadeFilterEntries(filters)) {
		auto col = column_ids[SkadeFilterIndex(entry)];
		if (IsVirtualColumn(col)) {
			continue;
		}
		auto d = DescribeFilter(SkadeFilterOf(entry), col, constants);
		if (!d.empty()) {
			json += (json.empty() ? "" : ",") + d;
		}
	}
	out.json = json.empty() ? "" : "[" + json + "]";
	if (constants.empty()) {
		return;
	}
	vector<LogicalType> types;
	vector<string> names;
	for (auto &v : constants) {
		types.push_back(v.type());
		names.push_back("c" + to_string(names.size()));
	}
	DataChunk chunk;
	chunk.Initialize(Allocator::Get(context), types, 1);
	SkadeSetChunkSize(chunk, 1);
	for (idx_t i = 0; i < constants.size(); i++) {
		chunk.data[i].SetValue(0, constants[i]);
	}
	auto props = SkadeArrowProperties(context);
	ArrowConverter::ToArrowSchema(&out.constants_schema.arrow_schema, types, names, props);
	unordered_map<idx_t, const shared_ptr<ArrowTypeExtensionData>> no_extensions;
	ArrowConverter::ToArrowArray(chunk, &out.constants.arrow_array, props, no_extensions);
	out.has_constants = true;
}

namespace {

#if SKADE_DUCKDB_MAJOR >= 2

//! `expr` (a filter over BoundReferenceExpressions) as a condition on `column`, without the
//! optional filters (a join's runtime filters: DuckDB's own tables never drop a row by them, and
//! they may sit below a LIMIT or DISTINCT ON). nullptr: no condition (true for every row).
unique_ptr<Expression> RequiredExpression(const Expression &expr, const Expression &column) {
	if (ExpressionFilter::IsRootOptionalExpression(expr)) {
		return nullptr;
	}
	if (expr.GetExpressionClass() != ExpressionClass::BOUND_CONJUNCTION) {
		auto result = expr.Copy();
		ExpressionFilter::ReplaceExpressionRecursive(result, column);
		return result;
	}
	auto is_and = expr.GetExpressionType() == ExpressionType::CONJUNCTION_AND;
	auto conj = make_uniq<BoundConjunctionExpression>(expr.GetExpressionType());
	for (auto &child : expr.Cast<BoundConjunctionExpression>().GetChildren()) {
		auto e = RequiredExpression(*child, column);
		if (e) {
			SkadeChildren(*conj).push_back(std::move(e));
		} else if (!is_and) {
			return nullptr; // an arm true for every row
		}
	}
	if (SkadeChildren(*conj).empty()) {
		return nullptr;
	}
	if (SkadeChildren(*conj).size() == 1) {
		return std::move(SkadeChildren(*conj)[0]);
	}
	return std::move(conj);
}

unique_ptr<Expression> RequiredExpression(const TableFilter &filter, const Expression &column) {
	auto &f = ExpressionFilter::GetExpressionFilter(filter, "skade: applying a filter");
	return f.expr ? RequiredExpression(*f.expr, column) : nullptr;
}

#else

//! `filter` as a condition on the rows, without the optional filters (a join's runtime filters:
//! DuckDB's own tables never drop a row by them, and they may sit below a LIMIT or DISTINCT ON).
//! nullptr: no condition (an optional filter is true for every row).
unique_ptr<Expression> RequiredExpression(const TableFilter &filter, const Expression &column) {
	switch (filter.filter_type) {
	case TableFilterType::OPTIONAL_FILTER:
		return nullptr;
	case TableFilterType::CONJUNCTION_AND:
	case TableFilterType::CONJUNCTION_OR: {
		auto is_and = filter.filter_type == TableFilterType::CONJUNCTION_AND;
		auto &children = is_and ? filter.Cast<ConjunctionAndFilter>().child_filters
		                        : filter.Cast<ConjunctionOrFilter>().child_filters;
		auto conj = make_uniq<BoundConjunctionExpression>(is_and ? ExpressionType::CONJUNCTION_AND
		                                                         : ExpressionType::CONJUNCTION_OR);
		for (auto &child : children) {
			auto e = RequiredExpression(*child, column);
			if (e) {
				conj->children.push_back(std::move(e));
			} else if (!is_and) {
				return nullptr; // an arm true for every row
			}
		}
		if (conj->children.empty()) {
			return nullptr;
		}
		if (conj->children.size() == 1) {
			return std::move(conj->children[0]);
		}
		return std::move(conj);
	}
	default:
		return filter.ToExpression(column);
	}
}

#endif

} // namespace

unique_ptr<Expression> SkadeFilterExpression(const TableFilterSet &filters, const vector<LogicalType> &types) {
	vector<unique_ptr<Expression>> exprs;
	for (auto &entry : SkadeFilterEntries(filters)) {
		auto index = SkadeFilterIndex(entry);
		BoundReferenceExpression ref(types[index], index);
		auto e = RequiredExpression(SkadeFilterOf(entry), ref);
		if (e) {
			exprs.push_back(std::move(e));
		}
	}
	if (exprs.empty()) {
		return nullptr;
	}
	if (exprs.size() == 1) {
		return std::move(exprs[0]);
	}
	auto conj = make_uniq<BoundConjunctionExpression>(ExpressionType::CONJUNCTION_AND);
	for (auto &e : exprs) {
		SkadeChildren(*conj).push_back(std::move(e));
	}
	return std::move(conj);
}

} // namespace duckdb
