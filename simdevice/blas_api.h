// Every function the simulated libcublas.so.13 and libcublasLt.so.13 export, declared from
// blas_entry_points.def, so that a definition whose signature drifts from the table fails to compile.
#pragma once

#include "blas_abi.h"
#include "sim_export.h"

extern "C" {

#define GPULEAK_BLAS_OWN(lib, ret, name, params) GPULEAK_SIM_EXPORT ret name params;
#define GPULEAK_BLAS_GEMM(lib, name, params, ...) GPULEAK_SIM_EXPORT cublasStatus_t name params;
#define GPULEAK_BLAS_COMPUTE(lib, name, params, ...) GPULEAK_SIM_EXPORT cublasStatus_t name params;
#define GPULEAK_BLAS_REFUSED(lib, name, params) GPULEAK_SIM_EXPORT cublasStatus_t name params;
#include "blas_entry_points.def"

} // extern "C"
