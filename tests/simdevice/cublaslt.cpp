// cuBLASLt: handles, the descriptors of a matrix product, the algorithm heuristic and the product
// itself. The heuristic offers one algorithm that needs no workspace; a product computes nothing, as the
// simulated kernels do, after checking that its matrices' shapes fit together as cuBLASLt does.
#include "blas_context.h"
#include "blas_library.h"

#include <algorithm>
#include <cstring>
#include <new>

using namespace gpuleak::sim;

namespace {

// What a product's shapes depend on; the types only choose kernels, which compute nothing here.
struct MatmulDescription {
    int32_t transa = CUBLAS_OP_N;
    int32_t transb = CUBLAS_OP_N;
};

struct MatrixLayout {
    uint64_t rows;
    uint64_t cols;
    int64_t ld;
    int32_t order = CUBLASLT_ORDER_COL;
    int32_t batch_count = 1;
};

// Its one setting the simulator reads, the workspace limit, is only checked: the one algorithm the
// heuristic offers needs no workspace, so it fits any limit.
struct MatmulPreference {};

// The descriptors' handle types are opaque pointers; each stands for the stand-in's own object.
MatmulDescription* description_of(cublasLtMatmulDesc_t desc) {
    return reinterpret_cast<MatmulDescription*>(desc);
}

MatrixLayout* layout_of(cublasLtMatrixLayout_t layout) {
    return reinterpret_cast<MatrixLayout*>(layout);
}

MatmulPreference* preference_of(cublasLtMatmulPreference_t preference) {
    return reinterpret_cast<MatmulPreference*>(preference);
}

template <typename Object, typename Handle, typename... Fields>
cublasStatus_t create(Handle* out, Fields... fields) {
    if (out == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    auto* object = new (std::nothrow) Object{fields...};
    if (object == nullptr) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    *out = reinterpret_cast<Handle>(object);
    return CUBLAS_STATUS_SUCCESS;
}

// Reads an attribute of type T from `buf`, refusing a buffer of any other size, as cuBLASLt does.
template <typename T> bool read_attribute(T& field, const void* buf, size_t sizeInBytes) {
    if (buf == nullptr || sizeInBytes != sizeof(T)) {
        return false;
    }
    std::memcpy(&field, buf, sizeof(T));
    return true;
}

// CUBLAS_OP_N, CUBLAS_OP_T or CUBLAS_OP_C.
bool read_operation(int32_t& field, const void* buf, size_t sizeInBytes) {
    int32_t operation = 0;
    if (!read_attribute(operation, buf, sizeInBytes) || operation < CUBLAS_OP_N || operation > CUBLAS_OP_C) {
        return false;
    }
    field = operation;
    return true;
}

// Attributes the simulator has no use for are accepted when they carry a value.
bool other_attribute(const void* buf, size_t sizeInBytes) {
    return buf != nullptr && sizeInBytes > 0;
}

struct Shape {
    uint64_t rows;
    uint64_t cols;
};

Shape operated(const MatrixLayout& layout, int32_t operation) {
    return operation == CUBLAS_OP_N ? Shape{layout.rows, layout.cols} : Shape{layout.cols, layout.rows};
}

bool well_formed(const MatrixLayout& layout) {
    return layout.order != CUBLASLT_ORDER_COL ||
           layout.ld >= static_cast<int64_t>(std::max<uint64_t>(1, layout.rows));
}

// D = op(A) op(B) (+ C): op(A) is m x k, op(B) k x n, C and D m x n, in the same number of batches.
cublasStatus_t product_status(cublasLtHandle_t handle, cublasLtMatmulDesc_t computeDesc,
                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc) {
    if (!live_handle(handle)) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    if (computeDesc == nullptr || Adesc == nullptr || Bdesc == nullptr || Cdesc == nullptr ||
        Ddesc == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const MatmulDescription& description = *description_of(computeDesc);
    const MatrixLayout& a = *layout_of(Adesc);
    const MatrixLayout& b = *layout_of(Bdesc);
    const MatrixLayout& c = *layout_of(Cdesc);
    const MatrixLayout& d = *layout_of(Ddesc);
    const Shape op_a = operated(a, description.transa);
    const Shape op_b = operated(b, description.transb);
    const bool shapes_fit = op_a.cols == op_b.rows && c.rows == op_a.rows && c.cols == op_b.cols &&
                            d.rows == c.rows && d.cols == c.cols;
    const bool batches_fit =
        a.batch_count == d.batch_count && b.batch_count == d.batch_count && c.batch_count == d.batch_count;
    if (!shapes_fit || !batches_fit || !well_formed(a) || !well_formed(b) || !well_formed(c) ||
        !well_formed(d)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace

extern "C" {

cublasStatus_t cublasLtCreate(cublasLtHandle_t* lightHandle) {
    if (lightHandle == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (const cublasStatus_t status = blas_library_status(); status != CUBLAS_STATUS_SUCCESS) {
        return status;
    }
    auto* context = new (std::nothrow) cublasLtContext{kBlasHandleMark};
    if (context == nullptr) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    *lightHandle = context;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t lightHandle) {
    if (!live_handle(lightHandle)) {
        return CUBLAS_STATUS_NOT_INITIALIZED;
    }
    delete lightHandle;
    return CUBLAS_STATUS_SUCCESS;
}

size_t cublasLtGetVersion(void) {
    return kCublasVersion;
}

cublasStatus_t cublasLtGetProperty(libraryPropertyType type, int* value) {
    return blas_property(type, value);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t /*computeType*/,
                                        cudaDataType_t /*scaleType*/) {
    return create<MatmulDescription>(matmulDesc);
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
    delete description_of(matmulDesc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t sizeInBytes) {
    if (matmulDesc == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    MatmulDescription& description = *description_of(matmulDesc);
    bool accepted = false;
    switch (attr) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
        accepted = read_operation(description.transa, buf, sizeInBytes);
        break;
    case CUBLASLT_MATMUL_DESC_TRANSB:
        accepted = read_operation(description.transb, buf, sizeInBytes);
        break;
    default:
        accepted = other_attribute(buf, sizeInBytes);
    }
    return accepted ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType /*type*/,
                                          uint64_t rows, uint64_t cols, int64_t ld) {
    return create<MatrixLayout>(matLayout, rows, cols, ld);
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
    delete layout_of(matLayout);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                size_t sizeInBytes) {
    if (matLayout == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    MatrixLayout& layout = *layout_of(matLayout);
    bool accepted = false;
    switch (attr) {
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
        accepted = read_attribute(layout.order, buf, sizeInBytes);
        break;
    case CUBLASLT_MATRIX_LAYOUT_ROWS:
        accepted = read_attribute(layout.rows, buf, sizeInBytes);
        break;
    case CUBLASLT_MATRIX_LAYOUT_COLS:
        accepted = read_attribute(layout.cols, buf, sizeInBytes);
        break;
    case CUBLASLT_MATRIX_LAYOUT_LD:
        accepted = read_attribute(layout.ld, buf, sizeInBytes);
        break;
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
        accepted = read_attribute(layout.batch_count, buf, sizeInBytes);
        break;
    default:
        accepted = other_attribute(buf, sizeInBytes);
    }
    return accepted ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    return create<MatmulPreference>(pref);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    delete preference_of(pref);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
    if (pref == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    uint64_t workspace_limit = 0;
    const bool accepted = attr == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES
                              ? read_attribute(workspace_limit, buf, sizeInBytes)
                              : other_attribute(buf, sizeInBytes);
    return accepted ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_INVALID_VALUE;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle,
                                              cublasLtMatmulDesc_t operationDesc,
                                              cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                              cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                              cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                              cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                              int* returnAlgoCount) {
    const cublasStatus_t status = product_status(lightHandle, operationDesc, Adesc, Bdesc, Cdesc, Ddesc);
    if (status != CUBLAS_STATUS_SUCCESS) {
        return status;
    }
    if (preference == nullptr || requestedAlgoCount <= 0 || heuristicResultsArray == nullptr ||
        returnAlgoCount == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    heuristicResultsArray[0] = cublasLtMatmulHeuristicResult_t{};
    heuristicResultsArray[0].algo.data[0] = 1;
    heuristicResultsArray[0].state = CUBLAS_STATUS_SUCCESS;
    heuristicResultsArray[0].wavesCount = 1.0F;
    *returnAlgoCount = 1;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc,
                              const void* /*alpha*/, const void* /*A*/, cublasLtMatrixLayout_t Adesc,
                              const void* /*B*/, cublasLtMatrixLayout_t Bdesc, const void* /*beta*/,
                              const void* /*C*/, cublasLtMatrixLayout_t Cdesc, void* /*D*/,
                              cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t* /*algo*/,
                              void* workspace, size_t workspaceSizeInBytes, cudaStream_t /*stream*/) {
    const cublasStatus_t status = product_status(lightHandle, computeDesc, Adesc, Bdesc, Cdesc, Ddesc);
    if (status != CUBLAS_STATUS_SUCCESS) {
        return status;
    }
    return workspace == nullptr && workspaceSizeInBytes > 0 ? CUBLAS_STATUS_INVALID_VALUE
                                                            : CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
