// The simulated cuBLAS and cuBLASLt (simdevice), loaded the way PyTorch loads the real ones: their
// handles and settings, the argument checks of their computations, the heuristic and the copies.
#include <catch2/catch.hpp>

#include "blas_api.h"

#include <dlfcn.h>

#include <cstdint>
#include <string>
#include <vector>

namespace {

struct BlasLibraries {
    void* driver;
    void* cublas;
    void* cublas_lt;
};

const BlasLibraries& libraries() {
    // The driver first, by path, so that the libraries' dlopen("libcuda.so.1") finds it already loaded.
    static const BlasLibraries loaded{
        dlopen(GPULEAK_SIM_CUDA, RTLD_NOW | RTLD_LOCAL),
        dlopen(GPULEAK_SIM_CUBLAS, RTLD_NOW | RTLD_LOCAL),
        dlopen(GPULEAK_SIM_CUBLASLT, RTLD_NOW | RTLD_LOCAL),
    };
    REQUIRE(loaded.driver != nullptr);
    REQUIRE(loaded.cublas != nullptr);
    REQUIRE(loaded.cublas_lt != nullptr);
    return loaded;
}

template <typename Function> Function blas_function(void* library, const char* version, const char* name) {
    auto* found = reinterpret_cast<Function>(dlvsym(library, name, version));
    INFO(name << "@" << version);
    REQUIRE(found != nullptr);
    return found;
}

#define CUBLAS(name) blas_function<decltype(&::name)>(libraries().cublas, "libcublas.so.13", #name)
#define CUBLASLT(name) blas_function<decltype(&::name)>(libraries().cublas_lt, "libcublasLt.so.13", #name)

struct Row {
    bool lt;
    const char* name;
};

constexpr Row kRows[] = {
#define GPULEAK_BLAS_OWN(lib, ret, name, params) {#lib[6] == 'L', #name},
#define GPULEAK_BLAS_GEMM(lib, name, ...) {#lib[6] == 'L', #name},
#define GPULEAK_BLAS_COMPUTE(lib, name, ...) {#lib[6] == 'L', #name},
#include "blas_entry_points.def"
};

class Handle {
  public:
    Handle() { REQUIRE(CUBLAS(cublasCreate_v2)(&handle_) == CUBLAS_STATUS_SUCCESS); }
    ~Handle() { CUBLAS(cublasDestroy_v2)(handle_); }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    cublasHandle_t get() const { return handle_; }

  private:
    cublasHandle_t handle_ = nullptr;
};

cublasStatus_t sgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m, int n,
                     int k, int lda, int ldb, int ldc) {
    const float one = 1.0F;
    std::vector<float> memory(4096);
    return CUBLAS(cublasSgemm_v2)(handle, transa, transb, m, n, k, &one, memory.data(), lda, memory.data(),
                                  ldb, &one, memory.data(), ldc);
}

constexpr cublasOperation_t kTranspose = 1;

} // namespace

TEST_CASE("every function of the table is exported at the real library's version") {
    const BlasLibraries& loaded = libraries();
    for (const Row& row : kRows) {
        INFO(row.name);
        if (row.lt) {
            CHECK(dlvsym(loaded.cublas_lt, row.name, "libcublasLt.so.13") != nullptr);
        } else {
            CHECK(dlvsym(loaded.cublas, row.name, "libcublas.so.13") != nullptr);
        }
    }
    for (void* library : {loaded.cublas, loaded.cublas_lt}) {
        const auto* marker = static_cast<const char*>(dlsym(library, "gpuleak_simulated_device"));
        REQUIRE(marker != nullptr);
        CHECK(std::string(marker) == "gpuleak simulated CUDA device");
    }
}

TEST_CASE(
    "a cuBLAS handle keeps its stream and modes, checks its workspace, and a null one is not initialised") {
    CHECK(CUBLAS(cublasCreate_v2)(nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    cublasHandle_t handle = nullptr;
    REQUIRE(CUBLAS(cublasCreate_v2)(&handle) == CUBLAS_STATUS_SUCCESS);

    // Any stream: the handle only keeps it.
    static char stream_stand_in;
    auto* const stream = reinterpret_cast<cudaStream_t>(&stream_stand_in);
    CHECK(CUBLAS(cublasSetStream_v2)(handle, stream) == CUBLAS_STATUS_SUCCESS);
    cudaStream_t kept = nullptr;
    CHECK(CUBLAS(cublasGetStream_v2)(handle, &kept) == CUBLAS_STATUS_SUCCESS);
    CHECK(kept == stream);
    CHECK(CUBLAS(cublasSetMathMode)(handle, 3 | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) ==
          CUBLAS_STATUS_SUCCESS);
    cublasMath_t math = 0;
    CHECK(CUBLAS(cublasGetMathMode)(handle, &math) == CUBLAS_STATUS_SUCCESS);
    CHECK(math == (3 | CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    CHECK(CUBLAS(cublasSetMathMode)(handle, 8) == CUBLAS_STATUS_SUCCESS);
    for (const cublasMath_t undefined : {5, 7, 9}) {
        CHECK(CUBLAS(cublasSetMathMode)(handle, undefined) == CUBLAS_STATUS_INVALID_VALUE);
    }
    CHECK(CUBLAS(cublasGetMathMode)(handle, nullptr) == CUBLAS_STATUS_INVALID_VALUE);

    CHECK(CUBLAS(cublasSetPointerMode_v2)(handle, CUBLAS_POINTER_MODE_DEVICE) == CUBLAS_STATUS_SUCCESS);
    cublasPointerMode_t pointer_mode = 0;
    CHECK(CUBLAS(cublasGetPointerMode_v2)(handle, &pointer_mode) == CUBLAS_STATUS_SUCCESS);
    CHECK(pointer_mode == CUBLAS_POINTER_MODE_DEVICE);
    CHECK(CUBLAS(cublasSetPointerMode_v2)(handle, 2) == CUBLAS_STATUS_INVALID_VALUE);

    // A workspace must be aligned to 256 bytes, as PyTorch's caching allocator's blocks are.
    alignas(256) static char workspace[1024];
    CHECK(CUBLAS(cublasSetWorkspace_v2)(handle, workspace, sizeof workspace) == CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLAS(cublasSetWorkspace_v2)(handle, workspace + 16, 512) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(CUBLAS(cublasSetWorkspace_v2)(handle, nullptr, 0) == CUBLAS_STATUS_SUCCESS);

    REQUIRE(CUBLAS(cublasDestroy_v2)(handle) == CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLAS(cublasSetStream_v2)(nullptr, nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);
    CHECK(CUBLAS(cublasDestroy_v2)(nullptr) == CUBLAS_STATUS_NOT_INITIALIZED);
    CHECK(sgemm(nullptr, CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, 2, 2, 2) == CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST_CASE("matrix products check their shapes and leading dimensions as cuBLAS does") {
    const Handle handle;
    CHECK(sgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 4, 3, 2, 4, 2, 4) == CUBLAS_STATUS_SUCCESS);
    CHECK(sgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 0, 0, 0, 1, 1, 1) == CUBLAS_STATUS_SUCCESS);
    CHECK(sgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, -1, 3, 2, 4, 2, 4) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(sgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 4, 3, -2, 4, 2, 4) == CUBLAS_STATUS_INVALID_VALUE);
    // op(A) = A is m x k and needs lda >= m; transposed, A is k x m and needs lda >= k.
    CHECK(sgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 4, 3, 2, 3, 2, 4) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(sgemm(handle.get(), kTranspose, CUBLAS_OP_N, 4, 3, 2, 2, 2, 4) == CUBLAS_STATUS_SUCCESS);
    CHECK(sgemm(handle.get(), CUBLAS_OP_N, kTranspose, 4, 3, 2, 4, 2, 4) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(sgemm(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 4, 3, 2, 4, 2, 3) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(sgemm(handle.get(), 7, CUBLAS_OP_N, 4, 3, 2, 4, 2, 4) == CUBLAS_STATUS_INVALID_VALUE);

    const float one = 1.0F;
    std::vector<float> memory(64);
    float* matrices[] = {memory.data(), memory.data() + 16};
    CHECK(CUBLAS(cublasSgemmBatched)(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, matrices, 2,
                                     matrices, 2, &one, matrices, 2, 2) == CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLAS(cublasSgemmBatched)(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, matrices, 1,
                                     matrices, 2, &one, matrices, 2, 2) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(CUBLAS(cublasSgemmStridedBatched)(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one,
                                            memory.data(), 2, 4, memory.data(), 2, 4, &one, memory.data(), 2,
                                            4, -1) == CUBLAS_STATUS_INVALID_VALUE);
    constexpr cudaDataType kFloat = 0;           // CUDA_R_32F
    constexpr cublasComputeType_t kFloat32 = 68; // CUBLAS_COMPUTE_32F
    CHECK(CUBLAS(cublasGemmEx)(handle.get(), CUBLAS_OP_N, CUBLAS_OP_N, 2, 2, 2, &one, memory.data(), kFloat,
                               2, memory.data(), kFloat, 2, &one, memory.data(), kFloat, 2, kFloat32,
                               -1) == CUBLAS_STATUS_SUCCESS);
    // Other computations check their handle and sizes.
    CHECK(CUBLAS(cublasSaxpy_v2)(handle.get(), 4, &one, memory.data(), 1, memory.data(), 1) ==
          CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLAS(cublasSaxpy_v2)(handle.get(), -4, &one, memory.data(), 1, memory.data(), 1) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(CUBLAS(cublasSaxpy_v2)(nullptr, 4, &one, memory.data(), 1, memory.data(), 1) ==
          CUBLAS_STATUS_NOT_INITIALIZED);
}

TEST_CASE("the batched solvers, which would report outcomes they cannot know, are refused") {
    const Handle handle;
    std::vector<float> memory(64);
    float* matrices[] = {memory.data(), memory.data() + 16};
    std::vector<int> pivots(8);
    std::vector<int> outcomes(2, -1);
    CHECK(CUBLAS(cublasSgetrfBatched)(handle.get(), 4, matrices, 4, pivots.data(), outcomes.data(), 2) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
    // No outcome is made up.
    CHECK(outcomes == std::vector<int>{-1, -1});
}

// The macros are those blas_abi_check.cpp compares with the toolkit's CUBLAS_VER_* wherever its headers
// are installed; what this checks is that both libraries answer them.
TEST_CASE("version queries answer the toolkit's cuBLAS release") {
    constexpr int kVersion =
        GPULEAK_CUBLAS_VER_MAJOR * 10000 + GPULEAK_CUBLAS_VER_MINOR * 100 + GPULEAK_CUBLAS_VER_PATCH;
    static_assert(kVersion >= 130000, "the simulated libraries stand in for CUDA 13's cuBLAS");
    int version = 0;
    CHECK(CUBLAS(cublasGetVersion_v2)(nullptr, &version) == CUBLAS_STATUS_SUCCESS);
    CHECK(version == kVersion);
    CHECK(CUBLASLT(cublasLtGetVersion)() == static_cast<size_t>(kVersion));
    int major = 0;
    int patch = -1;
    CHECK(CUBLAS(cublasGetProperty)(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS);
    CHECK(major == GPULEAK_CUBLAS_VER_MAJOR);
    CHECK(CUBLASLT(cublasLtGetProperty)(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS);
    CHECK(patch == GPULEAK_CUBLAS_VER_PATCH);
    CHECK(CUBLAS(cublasGetProperty)(7, &major) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(std::string(CUBLAS(cublasGetStatusName)(CUBLAS_STATUS_INVALID_VALUE)) ==
          "CUBLAS_STATUS_INVALID_VALUE");
}

// TensorFlow's CUDA 12 build loads cuBLAS by these sonames: the same table, at their own version nodes,
// answering CUDA 12.8's cuBLAS, as the libcudart.so.12 beside them answers CUDA 12.8.
TEST_CASE("the CUDA 12 builds export the table at their own version nodes and answer cuBLAS 12") {
    libraries(); // the driver, which they find loaded
    void* cublas12 = dlopen(GPULEAK_SIM_CUBLAS12, RTLD_NOW | RTLD_LOCAL);
    void* cublas_lt12 = dlopen(GPULEAK_SIM_CUBLASLT12, RTLD_NOW | RTLD_LOCAL);
    REQUIRE(cublas12 != nullptr);
    REQUIRE(cublas_lt12 != nullptr);
    for (const Row& row : kRows) {
        INFO(row.name);
        if (row.lt) {
            CHECK(dlvsym(cublas_lt12, row.name, "libcublasLt.so.12") != nullptr);
            CHECK(dlvsym(cublas_lt12, row.name, "libcublasLt.so.13") == nullptr);
        } else {
            CHECK(dlvsym(cublas12, row.name, "libcublas.so.12") != nullptr);
            CHECK(dlvsym(cublas12, row.name, "libcublas.so.13") == nullptr);
        }
    }
    int version = 0;
    CHECK(blas_function<decltype(&::cublasGetVersion_v2)>(cublas12, "libcublas.so.12", "cublasGetVersion_v2")(
              nullptr, &version) == CUBLAS_STATUS_SUCCESS);
    CHECK(version / 10000 == 12);
    CHECK(blas_function<decltype(&::cublasLtGetVersion)>(
              cublas_lt12, "libcublasLt.so.12", "cublasLtGetVersion")() == static_cast<size_t>(version));
    int major = 0;
    CHECK(blas_function<decltype(&::cublasGetProperty)>(cublas12, "libcublas.so.12", "cublasGetProperty")(
              MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS);
    CHECK(major == 12);

    // And computes like the CUDA 13 build: a product's shapes checked, on a handle of its own.
    cublasHandle_t handle = nullptr;
    REQUIRE(blas_function<decltype(&::cublasCreate_v2)>(cublas12, "libcublas.so.12",
                                                        "cublasCreate_v2")(&handle) == CUBLAS_STATUS_SUCCESS);
    const auto gemm =
        blas_function<decltype(&::cublasSgemm_v2)>(cublas12, "libcublas.so.12", "cublasSgemm_v2");
    const float one = 1.0F;
    std::vector<float> memory(4096);
    CHECK(gemm(handle, 0, 0, 8, 8, 8, &one, memory.data(), 8, memory.data(), 8, &one, memory.data(), 8) ==
          CUBLAS_STATUS_SUCCESS);
    CHECK(gemm(handle, 0, 0, 8, 8, 8, &one, memory.data(), 4, memory.data(), 8, &one, memory.data(), 8) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(blas_function<decltype(&::cublasDestroy_v2)>(cublas12, "libcublas.so.12",
                                                       "cublasDestroy_v2")(handle) == CUBLAS_STATUS_SUCCESS);
}

namespace {

struct Layouts {
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;

    Layouts(uint64_t m, uint64_t n, uint64_t k) {
        constexpr cudaDataType kFloat = 0;
        REQUIRE(CUBLASLT(cublasLtMatrixLayoutCreate)(&a, kFloat, m, k, static_cast<int64_t>(m)) ==
                CUBLAS_STATUS_SUCCESS);
        REQUIRE(CUBLASLT(cublasLtMatrixLayoutCreate)(&b, kFloat, k, n, static_cast<int64_t>(k)) ==
                CUBLAS_STATUS_SUCCESS);
        REQUIRE(CUBLASLT(cublasLtMatrixLayoutCreate)(&c, kFloat, m, n, static_cast<int64_t>(m)) ==
                CUBLAS_STATUS_SUCCESS);
    }
    ~Layouts() {
        for (cublasLtMatrixLayout_t layout : {a, b, c}) {
            CUBLASLT(cublasLtMatrixLayoutDestroy)(layout);
        }
    }
    Layouts(const Layouts&) = delete;
    Layouts& operator=(const Layouts&) = delete;
};

} // namespace

TEST_CASE("cuBLASLt offers one algorithm without workspace and refuses shapes that do not fit") {
    // PyTorch hands cuBLASLt its cuBLAS handle, cast.
    const Handle handle;
    const auto lt = reinterpret_cast<cublasLtHandle_t>(handle.get());
    cublasLtMatmulDesc_t description = nullptr;
    REQUIRE(CUBLASLT(cublasLtMatmulDescCreate)(&description, 68, 0) == CUBLAS_STATUS_SUCCESS);
    cublasLtMatmulPreference_t preference = nullptr;
    REQUIRE(CUBLASLT(cublasLtMatmulPreferenceCreate)(&preference) == CUBLAS_STATUS_SUCCESS);
    const uint64_t workspace_limit = 1 << 20;
    CHECK(CUBLASLT(cublasLtMatmulPreferenceSetAttribute)(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace_limit,
                                                         sizeof workspace_limit) == CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLASLT(cublasLtMatmulPreferenceSetAttribute)(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace_limit, 4) == CUBLAS_STATUS_INVALID_VALUE);

    const Layouts layouts(4, 3, 2);
    cublasLtMatmulHeuristicResult_t results[2] = {};
    int returned = 0;
    REQUIRE(CUBLASLT(cublasLtMatmulAlgoGetHeuristic)(lt, description, layouts.a, layouts.b, layouts.c,
                                                     layouts.c, preference, 2, results,
                                                     &returned) == CUBLAS_STATUS_SUCCESS);
    CHECK(returned == 1);
    CHECK(results[0].state == CUBLAS_STATUS_SUCCESS);
    CHECK(results[0].workspaceSize == 0);
    const float one = 1.0F;
    std::vector<float> memory(64);
    CHECK(CUBLASLT(cublasLtMatmul)(lt, description, &one, memory.data(), layouts.a, memory.data(), layouts.b,
                                   &one, memory.data(), layouts.c, memory.data(), layouts.c, &results[0].algo,
                                   nullptr, 0, nullptr) == CUBLAS_STATUS_SUCCESS);

    // Transposing A makes op(A) 2 x 4, which does not fit B (2 x 3).
    const int32_t transpose = kTranspose;
    REQUIRE(CUBLASLT(cublasLtMatmulDescSetAttribute)(description, CUBLASLT_MATMUL_DESC_TRANSA, &transpose,
                                                     sizeof transpose) == CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLASLT(cublasLtMatmulAlgoGetHeuristic)(lt, description, layouts.a, layouts.b, layouts.c,
                                                   layouts.c, preference, 1, results,
                                                   &returned) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(CUBLASLT(cublasLtMatmul)(lt, description, &one, memory.data(), layouts.a, memory.data(), layouts.b,
                                   &one, memory.data(), layouts.c, memory.data(), layouts.c, nullptr, nullptr,
                                   0, nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(CUBLASLT(cublasLtMatmulDescSetAttribute)(description, CUBLASLT_MATMUL_DESC_TRANSA, &transpose, 8) ==
          CUBLAS_STATUS_INVALID_VALUE);
    const int32_t no_such_operation = 7;
    CHECK(CUBLASLT(cublasLtMatmulDescSetAttribute)(description, CUBLASLT_MATMUL_DESC_TRANSB,
                                                   &no_such_operation,
                                                   sizeof no_such_operation) == CUBLAS_STATUS_INVALID_VALUE);

    // A handle of cuBLASLt's own works the same; none at all is not initialised.
    cublasLtHandle_t own = nullptr;
    REQUIRE(CUBLASLT(cublasLtCreate)(&own) == CUBLAS_STATUS_SUCCESS);
    const int32_t no_transpose = CUBLAS_OP_N;
    REQUIRE(CUBLASLT(cublasLtMatmulDescSetAttribute)(description, CUBLASLT_MATMUL_DESC_TRANSA, &no_transpose,
                                                     sizeof no_transpose) == CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLASLT(cublasLtMatmulAlgoGetHeuristic)(own, description, layouts.a, layouts.b, layouts.c,
                                                   layouts.c, preference, 1, results,
                                                   &returned) == CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLASLT(cublasLtDestroy)(own) == CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLASLT(cublasLtMatmulAlgoGetHeuristic)(nullptr, description, layouts.a, layouts.b, layouts.c,
                                                   layouts.c, preference, 1, results,
                                                   &returned) == CUBLAS_STATUS_NOT_INITIALIZED);

    CUBLASLT(cublasLtMatmulPreferenceDestroy)(preference);
    CUBLASLT(cublasLtMatmulDescDestroy)(description);
}

TEST_CASE(
    "cuBLASLt's descriptors read back what they were created with, given or documented, as XLA reads them") {
    cublasLtMatmulDesc_t description = nullptr;
    constexpr cublasComputeType_t kCompute32F = 68;
    REQUIRE(CUBLASLT(cublasLtMatmulDescCreate)(&description, kCompute32F, 0) == CUBLAS_STATUS_SUCCESS);
    int32_t compute = 0;
    size_t written = 0;
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, &compute,
                                                   sizeof compute, &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(compute == kCompute32F);
    CHECK(written == sizeof compute);
    uint32_t epilogue = 0;
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                                   sizeof epilogue, nullptr) == CUBLAS_STATUS_SUCCESS);
    CHECK(epilogue == CUBLASLT_EPILOGUE_DEFAULT);
    const int32_t transpose = kTranspose;
    REQUIRE(CUBLASLT(cublasLtMatmulDescSetAttribute)(description, CUBLASLT_MATMUL_DESC_TRANSB, &transpose,
                                                     sizeof transpose) == CUBLAS_STATUS_SUCCESS);
    int32_t read_back = 0;
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, CUBLASLT_MATMUL_DESC_TRANSB, &read_back,
                                                   sizeof read_back, &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(read_back == kTranspose);
    // With no room, the size it needs; with the wrong size, or an attribute cuBLASLt does not have,
    // nothing.
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, CUBLASLT_MATMUL_DESC_TRANSB, nullptr, 0,
                                                   &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(written == sizeof(int32_t));
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, CUBLASLT_MATMUL_DESC_TRANSB, nullptr, 0,
                                                   nullptr) == CUBLAS_STATUS_INVALID_VALUE);
    uint64_t wide = 0;
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, CUBLASLT_MATMUL_DESC_TRANSB, &wide,
                                                   sizeof wide, &written) == CUBLAS_STATUS_INVALID_VALUE);
    constexpr cublasLtMatmulDescAttributes_t kUndocumented = 9;
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, kUndocumented, &wide, sizeof wide,
                                                   &written) == CUBLAS_STATUS_INVALID_VALUE);
    CHECK(CUBLASLT(cublasLtMatmulDescSetAttribute)(description, kUndocumented, &wide, sizeof wide) ==
          CUBLAS_STATUS_INVALID_VALUE);
    // An attribute never given reads as its documented default.
    const void* bias_back = &wide;
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_back,
                                                   sizeof bias_back, &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(bias_back == nullptr);
    int32_t aux_type = 0;
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_DATA_TYPE,
                                                   &aux_type, sizeof aux_type,
                                                   &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(aux_type == -1);
    int32_t fill = 0;
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, CUBLASLT_MATMUL_DESC_FILL_MODE, &fill,
                                                   sizeof fill, &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(fill == CUBLAS_FILL_MODE_FULL);
    // A one-byte flag takes one byte, no more.
    const int8_t fast = 1;
    CHECK(CUBLASLT(cublasLtMatmulDescSetAttribute)(description, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast,
                                                   sizeof fast) == CUBLAS_STATUS_SUCCESS);
    const int32_t fast_wide = 1;
    CHECK(CUBLASLT(cublasLtMatmulDescSetAttribute)(description, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_wide,
                                                   sizeof fast_wide) == CUBLAS_STATUS_INVALID_VALUE);
    const void* bias = &wide;
    REQUIRE(CUBLASLT(cublasLtMatmulDescSetAttribute)(description, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                                     sizeof bias) == CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLASLT(cublasLtMatmulDescGetAttribute)(description, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias_back,
                                                   sizeof bias_back, &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(bias_back == bias);
    CUBLASLT(cublasLtMatmulDescDestroy)(description);

    const Layouts layouts(4, 3, 2);
    uint32_t type = 99;
    uint64_t rows = 0;
    int32_t batches = 0;
    CHECK(CUBLASLT(cublasLtMatrixLayoutGetAttribute)(layouts.a, CUBLASLT_MATRIX_LAYOUT_TYPE, &type,
                                                     sizeof type, &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(type == 0);
    CHECK(CUBLASLT(cublasLtMatrixLayoutGetAttribute)(layouts.a, CUBLASLT_MATRIX_LAYOUT_ROWS, &rows,
                                                     sizeof rows, &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(rows == 4);
    const int32_t eight = 8;
    REQUIRE(CUBLASLT(cublasLtMatrixLayoutSetAttribute)(layouts.b, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &eight,
                                                       sizeof eight) == CUBLAS_STATUS_SUCCESS);
    CHECK(CUBLASLT(cublasLtMatrixLayoutGetAttribute)(layouts.b, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batches,
                                                     sizeof batches, &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(batches == 8);
    CHECK(CUBLASLT(cublasLtMatrixLayoutSetAttribute)(layouts.b, CUBLASLT_MATRIX_LAYOUT_ROWS, &eight,
                                                     sizeof eight) == CUBLAS_STATUS_INVALID_VALUE);

    cublasLtMatmulPreference_t preference = nullptr;
    REQUIRE(CUBLASLT(cublasLtMatmulPreferenceCreate)(&preference) == CUBLAS_STATUS_SUCCESS);
    uint64_t workspace = 1;
    CHECK(CUBLASLT(cublasLtMatmulPreferenceGetAttribute)(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                         &workspace, sizeof workspace,
                                                         &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(workspace == 0);
    uint32_t alignment = 0;
    CHECK(CUBLASLT(cublasLtMatmulPreferenceGetAttribute)(
              preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignment, sizeof alignment,
              &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(alignment == 256);
    uint64_t implementations = 0;
    CHECK(CUBLASLT(cublasLtMatmulPreferenceGetAttribute)(preference, CUBLASLT_MATMUL_PREF_IMPL_MASK,
                                                         &implementations, sizeof implementations,
                                                         &written) == CUBLAS_STATUS_SUCCESS);
    CHECK(implementations == ~uint64_t{0});
    CUBLASLT(cublasLtMatmulPreferenceDestroy)(preference);
}

TEST_CASE("cuBLAS's copy helpers copy columns and strided elements") {
    // Device memory is host memory on the simulated device.
    const std::vector<int> host{1, 2, 3, 99, 4, 5, 6, 99}; // a 3 x 2 matrix, leading dimension 4
    std::vector<int> device(6, 0);
    CHECK(CUBLAS(cublasSetMatrixAsync)(3, 2, sizeof(int), host.data(), 4, device.data(), 3, nullptr) ==
          CUBLAS_STATUS_SUCCESS);
    CHECK(device == std::vector<int>{1, 2, 3, 4, 5, 6});
    std::vector<int> back(8, 0);
    CHECK(CUBLAS(cublasGetMatrixAsync)(3, 2, sizeof(int), device.data(), 3, back.data(), 4, nullptr) ==
          CUBLAS_STATUS_SUCCESS);
    CHECK(back == std::vector<int>{1, 2, 3, 0, 4, 5, 6, 0});
    CHECK(CUBLAS(cublasSetMatrixAsync)(3, 2, sizeof(int), host.data(), 2, device.data(), 3, nullptr) ==
          CUBLAS_STATUS_INVALID_VALUE);

    std::vector<int> every_other(3, 0);
    CHECK(CUBLAS(cublasGetVectorAsync)(3, sizeof(int), device.data(), 2, every_other.data(), 1, nullptr) ==
          CUBLAS_STATUS_SUCCESS);
    CHECK(every_other == std::vector<int>{1, 3, 5});
    CHECK(CUBLAS(cublasSetVectorAsync)(3, sizeof(int), host.data(), 0, device.data(), 1, nullptr) ==
          CUBLAS_STATUS_INVALID_VALUE);
}
