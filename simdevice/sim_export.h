// What the simulated libraries export. Everything is compiled with -fvisibility=hidden so that, like the
// real libcudart and libcuda, they export the CUDA API and nothing of their internals.
#pragma once

#include <cstddef>

#define GPULEAK_SIM_EXPORT __attribute__((visibility("default")))

extern "C" {
// Present in both simulated libraries so that the interposer can label a trace as recorded on the
// simulator rather than on a GPU.
GPULEAK_SIM_EXPORT extern const char gpuleak_simulated_device[];
// The simulated driver's, for its NVML stand-in: the bytes charged to `device` (this process's use of it,
// contexts included), as NVML reads them for the process from the kernel driver. 0 for a device that is
// not one.
GPULEAK_SIM_EXPORT std::size_t gpuleak_sim_device_charged(int device);
// The simulated driver's, for the recorder's host samples: of the device memory allocated, the bytes whose
// host pages are resident, which a real device would hold in its own memory, not in the process's RSS.
// The pages of a large allocation stay untouched (and out of RSS) until the program writes them. Takes the
// driver's allocation lock only if it is free: SIZE_MAX when another thread holds it.
GPULEAK_SIM_EXPORT std::size_t gpuleak_sim_device_resident_bytes();
}
