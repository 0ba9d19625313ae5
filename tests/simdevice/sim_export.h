// What the simulated libraries export. Everything is compiled with -fvisibility=hidden so that, like the
// real libcudart and libcuda, they export the CUDA API and nothing of their internals.
#pragma once

#define GPULEAK_SIM_EXPORT __attribute__((visibility("default")))

extern "C" {
// Present in both simulated libraries so that the interposer can label a trace as recorded on the
// simulator rather than on a GPU.
GPULEAK_SIM_EXPORT extern const char gpuleak_simulated_device[];
}
