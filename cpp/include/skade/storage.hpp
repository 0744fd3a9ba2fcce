// The storage extension that makes ATTACH ... (TYPE skade) open skade catalogs.
#pragma once

#include "skade/common.hpp"

namespace duckdb {

void RegisterSkadeStorage(DatabaseInstance &instance);

} // namespace duckdb
