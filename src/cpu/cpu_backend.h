// The fp32 CPU reference backend: the oracle every other backend is tested against.
#pragma once

#include <memory>

#include "engine/backend.h"

namespace hayate {

std::unique_ptr<Backend> make_cpu_backend(const Model& model, const BackendOptions& options);

}  // namespace hayate
