// The simulated devices and the objects the driver's handles point at: primary contexts, default memory
// pools, streams, and the memory charged against each device's capacity.
#pragma once

#include "gpuleak/cuda_abi.h"

#include <cstddef>

namespace gpuleak::sim {

// Reads the configuration and prints the banner, once per process.
void initialize_devices();
// False until cuInit: the real driver answers almost every call before cuInit with NOT_INITIALIZED.
bool devices_initialized();
int device_count();
bool valid_device(int device);

std::size_t device_capacity(int device);
std::size_t device_charged(int device);
// Charges `bytes` to `device`, or charges nothing and returns false when that would exceed its capacity.
bool charge_device(int device, std::size_t bytes);
void uncharge_device(int device, std::size_t bytes);

CUcontext primary_context(int device);
// Retain counts are kept so that releasing an unretained context fails as on a GPU.
void retain_primary_context(int device);
bool release_primary_context(int device);
bool primary_context_active(int device);
// -1 when `context` is not one of ours.
int context_device(CUcontext context);

CUcontext current_context();
void set_current_context(CUcontext context);
// The device of the calling thread's current context: NOT_INITIALIZED before cuInit, INVALID_CONTEXT when
// the thread has none.
CUresult current_device(int& device);

CUmemoryPool default_pool(int device);
// -1 when `pool` is not one of ours.
int pool_device(CUmemoryPool pool);

// Priorities run from kLowestStreamPriority (0, the default) down to kHighestStreamPriority, as on GPUs
// since Volta; a priority outside that range is clamped into it, as the driver does.
inline constexpr int kLowestStreamPriority = 0;
inline constexpr int kHighestStreamPriority = -5;
CUstream create_stream(int device, int priority = kLowestStreamPriority);
bool destroy_stream(CUstream stream);
// The priority `stream` was created with; the default streams have the lowest.
CUresult stream_priority(CUstream stream, int& priority);
// The device `stream` belongs to: the current context's for the NULL, legacy and per-thread streams,
// INVALID_HANDLE for a stream that was never created or is destroyed.
CUresult stream_device(CUstream stream, int& device);

} // namespace gpuleak::sim
