// What the hooks ask CUDA about an intercepted call: the device it is charged to (the `device` column of
// cuda_entry_points.def: a device ordinal, kHostDevice or kUnknownDevice, never a value it did not
// verify), and the driver's view of that device's memory.
#pragma once

#include <cstdint>

#include "gpuleak/cuda_abi.h"
#include "recording/recorder.h"

namespace gpuleak {

// The calling thread's current runtime device (the real cudaGetDevice).
int16_t runtime_device();

// The device of the calling thread's current driver context (the real cuCtxGetDevice); kUnknownDevice
// when the thread has no current context.
int16_t driver_device();

// The driver's view of the current context's device: free and total bytes (the real cuMemGetInfo).
// False when the thread has no current context. Used per the driver minus what gpuleak saw allocated is
// memory held outside the allocators: contexts, libraries that allocate by other means, other processes.
bool driver_memory_info(uint64_t& free_bytes, uint64_t& total_bytes);

// The UUID of `device` as its driver gives it (the real cuDeviceGetUuid_v2): what tells one physical device
// from another where processes number the devices they see differently (CUDA_VISIBLE_DEVICES). All zero
// when the driver cannot say.
DeviceUuid device_uuid(int device);

// Where cuMemCreate places its memory: the device of a device location, else kUnknownDevice.
int16_t vmm_prop_device(const CUmemAllocationProp* prop);

// The device the physical allocation behind `handle` (cuMemCreate) was charged to.
int16_t vmm_handle_device(CUmemGenericAllocationHandle handle);

} // namespace gpuleak
