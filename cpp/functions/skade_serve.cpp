// The Iceberg REST catalog servers of this process: skade_serve(lake, port := , host := ,
// token := , client_id := , client_secret := ) starts one and returns its address,
// skade_servers() lists them, skade_serve_stop(lake_or_address) stops them. The server is the
// core's (src/rest/); this file reads arguments.
#include "skade/functions.hpp"

#include "skade/catalog.hpp"
#include "skade/transaction.hpp"

namespace duckdb {

namespace {

//! A VARCHAR named parameter; `has` tells whether it was given (not NULL).
string NamedString(TableFunctionBindInput &input, const string &name, bool &has) {
	auto value = SkadeNamedParameter(input, name);
	has = !value.IsNull();
	if (!has) {
		return "";
	}
	auto text = StringValue::Get(value);
	if (text.find('\0') != string::npos) {
		throw BinderException("skade_serve: %s contains a NUL character", name);
	}
	return text;
}

unique_ptr<FunctionData> BindServe(ClientContext &context, TableFunctionBindInput &input,
                                   vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_serve");
	auto catalog_name = SkadeNameString(SkadeCatalogByName(context, StringValue::Get(input.inputs[0])).GetName());
	auto port_value = SkadeNamedParameter(input, "port");
	int64_t port = port_value.IsNull() ? 8181 : port_value.GetValue<int64_t>();
	bool has_host, has_token, has_id, has_secret;
	auto host = NamedString(input, "host", has_host);
	auto token = NamedString(input, "token", has_token);
	auto client_id = NamedString(input, "client_id", has_id);
	auto client_secret = NamedString(input, "client_secret", has_secret);
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		auto &catalog = SkadeCatalogByName(context, catalog_name);
		SkadeCheck(skade_fn_serve(SkadeTransaction::Get(context, catalog).Handle(), catalog_name.c_str(),
		                          has_host ? host.c_str() : nullptr, port, has_token ? token.c_str() : nullptr,
		                          has_id ? client_id.c_str() : nullptr,
		                          has_secret ? client_secret.c_str() : nullptr, &out));
	};
	return SkadeArrowFunctionBind(context, "skade_serve", std::move(data), return_types, names);
}

unique_ptr<FunctionData> BindServers(ClientContext &context, TableFunctionBindInput &input,
                                     vector<LogicalType> &return_types, vector<SkadeName> &names) {
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [](ClientContext &context, ArrowArrayStream &out) { SkadeCheck(skade_fn_servers(&out)); };
	return SkadeArrowFunctionBind(context, "skade_servers", std::move(data), return_types, names);
}

unique_ptr<FunctionData> BindStop(ClientContext &context, TableFunctionBindInput &input,
                                  vector<LogicalType> &return_types, vector<SkadeName> &names) {
	SkadeRequireArguments(input, "skade_serve_stop");
	auto which = StringValue::Get(input.inputs[0]);
	auto data = make_uniq<SkadeArrowFunctionData>();
	data->open = [=](ClientContext &context, ArrowArrayStream &out) {
		SkadeCheck(skade_fn_serve_stop(which.c_str(), &out));
	};
	return SkadeArrowFunctionBind(context, "skade_serve_stop", std::move(data), return_types, names);
}

} // namespace

vector<TableFunction> SkadeServeFunctions() {
	auto serve = SkadeArrowFunction("skade_serve", {LogicalType::VARCHAR}, BindServe);
	SkadeAddNamedParameter(serve, "port", LogicalType::BIGINT);
	SkadeAddNamedParameter(serve, "host", LogicalType::VARCHAR);
	SkadeAddNamedParameter(serve, "token", LogicalType::VARCHAR);
	SkadeAddNamedParameter(serve, "client_id", LogicalType::VARCHAR);
	SkadeAddNamedParameter(serve, "client_secret", LogicalType::VARCHAR);
	return {serve, SkadeArrowFunction("skade_servers", {}, BindServers),
	        SkadeArrowFunction("skade_serve_stop", {LogicalType::VARCHAR}, BindStop)};
}

} // namespace duckdb
