// DuckDB's pushed-down table filters: described for the core's pruning, and as one expression
// for exact evaluation. Shared by table scans and the changelog function.
#include "skade/filters.hpp"

#include "duckdb/common/arrow/arrow_converter.hpp"
#include "duckdb/planner/expression/bound_conjunction_expression.hpp"
#include "duckdb/planner/expression/bound_reference_expression.hpp"
#include "duckdb/planner/filter/conjunction_filter.hpp"
#include "duckdb/planner/filter/constant_filter.hpp"
#include "duckdb/planner/filter/in_filter.hpp"
#include "duckdb/planner/filter/optional_filter.hpp"

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
		string args;
		for (auto &child : children) {
			auto c = DescribeFilter(*child, col, constants);
			if (c.empty()) {
				if (is_and) {
					continue; // a conjunction still prunes with its other parts
				}
				return ""; // a disjunction with an unknown arm prunes nothing
			}
			args += (args.empty() ? "" : ",") + c;
		}
		return StringUtil::Format("{\"op\":\"%s\",\"args\":[%s]}", is_and ? "and" : "or", args);
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

} // namespace

void SkadeDescribeFilters(ClientContext &context, const TableFilterSet &filters, const vector<column_t> &column_ids,
                          SkadeFilterDescription &out) {
	string json;
	vector<Value> constants;
	for (auto &entry : filters.filters) {
		auto col = column_ids[entry.first];
		if (IsVirtualColumn(col)) {
			continue;
		}
		auto d = DescribeFilter(*entry.second, col, constants);
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
	for (idx_t i = 0; i < constants.size(); i++) {
		chunk.SetValue(i, 0, constants[i]);
	}
	chunk.SetCardinality(1);
	auto props = SkadeArrowProperties(context);
	ArrowConverter::ToArrowSchema(&out.constants_schema.arrow_schema, types, names, props);
	unordered_map<idx_t, const shared_ptr<ArrowTypeExtensionData>> no_extensions;
	ArrowConverter::ToArrowArray(chunk, &out.constants.arrow_array, props, no_extensions);
	out.has_constants = true;
}

namespace {

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

} // namespace

unique_ptr<Expression> SkadeFilterExpression(const TableFilterSet &filters, const vector<LogicalType> &types) {
	vector<unique_ptr<Expression>> exprs;
	for (auto &entry : filters.filters) {
		BoundReferenceExpression ref(types[entry.first], entry.first);
		auto e = RequiredExpression(*entry.second, ref);
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
		conj->children.push_back(std::move(e));
	}
	return std::move(conj);
}

} // namespace duckdb
