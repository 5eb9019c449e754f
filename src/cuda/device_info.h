// The GPU the CUDA backend runs on: as benchmark results record it (name,
// driver, CUDA runtime, SMs, memory), how many are visible, event timers on
// a stream, and the read-bandwidth probe every bench reports beside its figures.
#pragma once

#include <cuda_runtime.h>

#include <memory>

#include "engine/batch_backend.h"

namespace hayate::cuda {

// The device is one the backend has already opened (a failing query aborts,
// as every CUDA call does).
DeviceInfo device_info(int device);

// Times a region on the host clock from a point where `s` is idle (start()
// synchronizes it); stop_ms() is called once the host has the region's
// results, which is when its device work is done.
std::unique_ptr<RegionTimer> make_stream_timer(cudaStream_t s);

// Read bandwidth in GB/s: a read-only kernel over 4 GiB (the ceiling a GEMV
// can reach), median of 10 passes after 2 warm-ups; a device-to-device copy
// is printed beside it.
double measure_read_bandwidth_gbs(cudaStream_t s);

}  // namespace hayate::cuda
