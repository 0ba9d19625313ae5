// The device an intercepted call is charged to: the `device` column of cuda_entry_points.def. Each
// function gives a device ordinal, kHostDevice or kUnknownDevice, never a value it did not verify.
#pragma once

#include <cstdint>

#include "cuda_abi.h"
#include "recorder.h"

namespace gpuleak {

// The calling thread's current runtime device (the real cudaGetDevice).
int16_t runtime_device();

// The device of the calling thread's current driver context (the real cuCtxGetDevice); kUnknownDevice
// when the thread has no current context.
int16_t driver_device();

// Where cuMemCreate places its memory: the device of a device location, else kUnknownDevice.
int16_t vmm_prop_device(const CUmemAllocationProp* prop);

// The device the physical allocation behind `handle` (cuMemCreate) was charged to.
int16_t vmm_handle_device(CUmemGenericAllocationHandle handle);

} // namespace gpuleak
