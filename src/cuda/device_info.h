// The GPU a CUDA backend runs on, as benchmark results record it (name,
// driver, CUDA runtime, SMs, memory). Shared by the single-stream and the
// batched backend.
#pragma once

#include "engine/backend.h"

namespace hayate::cuda {

// The device is one a backend has already opened (a failing query aborts,
// as every CUDA call does).
DeviceInfo device_info(int device);

}  // namespace hayate::cuda
