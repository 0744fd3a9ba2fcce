// Core status -> DuckDB exception; string lists; Arrow settings.
#include "skade/common.hpp"

namespace duckdb {

namespace {

struct StatusGuard {
	explicit StatusGuard(skade_status *s) : status(s) {
	}
	~StatusGuard() {
		skade_status_free(status);
	}
	skade_status *status;
};

ExceptionType ExceptionTypeFor(int32_t code) {
	switch (code) {
	case SKADE_ERR_INVALID_INPUT:
		return ExceptionType::INVALID_INPUT;
	case SKADE_ERR_CATALOG:
		return ExceptionType::CATALOG;
	case SKADE_ERR_CONSTRAINT:
		return ExceptionType::CONSTRAINT;
	case SKADE_ERR_CONFLICT:
		return ExceptionType::TRANSACTION;
	case SKADE_ERR_NOT_IMPLEMENTED:
		return ExceptionType::NOT_IMPLEMENTED;
	case SKADE_ERR_PERMISSION:
		return ExceptionType::PERMISSION;
	case SKADE_ERR_INTERRUPTED:
		return ExceptionType::INTERRUPT;
	case SKADE_ERR_BINDER:
		return ExceptionType::BINDER;
	case SKADE_ERR_IO:
	case SKADE_ERR_CORRUPT:
	default:
		// Never ExceptionType::INTERNAL: DuckDB invalidates the whole database on those.
		return ExceptionType::IO;
	}
}

} // namespace

ErrorData SkadeErrorData(skade_status *status) {
	StatusGuard guard(status);
	auto type = ExceptionTypeFor(skade_status_code(status));
	return ErrorData(type, SkadeString(skade_status_message(status)));
}

void SkadeCheck(skade_status *status) {
	if (!status) {
		return;
	}
	SkadeErrorData(status).Throw();
}

shared_ptr<ArrowArrayWrapper> SkadeNextChunk(ArrowArrayStreamWrapper &stream) {
	try {
		return stream.GetNextChunk();
	} catch (std::exception &ex) {
		// DuckDB reports "arrow_scan: get_next failed(): External error: <the core's message>"
		ErrorData error(ex);
		auto &message = error.RawMessage();
		const string wrapped = "External error: ";
		auto at = message.find(wrapped);
		if (at == string::npos) {
			throw;
		}
		throw IOException(message.substr(at + wrapped.size()));
	}
}

vector<string> SkadeTakeStrings(skade_strings *list) {
	vector<string> result;
	if (!list) {
		return result;
	}
	auto n = skade_strings_len(list);
	for (size_t i = 0; i < n; i++) {
		result.push_back(SkadeString(skade_strings_get(list, i)));
	}
	skade_strings_free(list);
	return result;
}

ClientProperties SkadeArrowProperties(ClientContext &context) {
	auto props = context.GetClientProperties();
	props.arrow_lossless_conversion = true;
	props.arrow_offset_size = ArrowOffsetSize::REGULAR;
	props.arrow_use_list_view = false;
	props.produce_arrow_string_view = false;
	return props;
}

} // namespace duckdb
