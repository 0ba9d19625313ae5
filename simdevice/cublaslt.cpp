// cuBLASLt: handles, the descriptors of a matrix product, the algorithm heuristic and the product
// itself. The heuristic offers one algorithm that needs no workspace; a product computes nothing, as the
// simulated kernels do, after checking that its matrices' shapes fit together as cuBLASLt does.
#include "blas_context.h"
#include "blas_library.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <new>
#include <utility>
#include <vector>

using namespace gpuleak::sim;

namespace {

// An attribute as cublasLt.h documents it: the size of its value, and the value.
struct Documented {
    int attribute;
    size_t size;
    std::array<unsigned char, 8> bytes; // its value: its default until it is set
};

template <typename T> constexpr Documented documented(int attribute, T initial) {
    static_assert(sizeof(T) <= 8, "cuBLASLt's attributes are at most 8 bytes");
    Documented result{attribute, sizeof(T), {}};
    const auto bytes = std::bit_cast<std::array<unsigned char, sizeof(T)>>(initial);
    std::copy(bytes.begin(), bytes.end(), result.bytes.begin());
    return result;
}

enum class Descriptor { MatmulDesc, MatrixLayout, MatmulPreference };

template <Descriptor kind> constexpr size_t documented_count() {
    size_t count = 0;
#define GPULEAK_LT_ATTRIBUTE(descriptor, name, value, type, initial) count += kind == Descriptor::descriptor;
#include "blaslt_attributes.def"
    return count;
}

template <Descriptor kind> constexpr auto documented_attributes() {
    std::array<Documented, documented_count<kind>()> table{};
    size_t at = 0;
#define GPULEAK_LT_ATTRIBUTE(descriptor, name, value, type, initial)                                         \
    if (kind == Descriptor::descriptor)                                                                      \
        table[at++] = documented<type>(name, static_cast<type>(initial));
#include "blaslt_attributes.def"
    return table;
}

// Every attribute a descriptor has, starting at its documented default and holding the bytes it was
// last given, so that reading one back returns what was set or its default, as cuBLASLt does.
class Attributes {
  public:
    template <Descriptor kind> static Attributes documented_for() {
        static constexpr auto kTable = documented_attributes<kind>();
        Attributes attributes;
        attributes.values_.assign(kTable.begin(), kTable.end());
        return attributes;
    }

    template <typename T> void set(int attribute, T value) { set_bytes(attribute, &value, sizeof value); }

    void set_bytes(int attribute, const void* buf, size_t sizeInBytes) {
        Documented* value = find(attribute);
        std::memcpy(value->bytes.data(), buf, sizeInBytes);
    }

    // A descriptor of another kind than the call takes (a program's mistake) reads as zeros, which the
    // shape checks refuse, rather than crash the program.
    template <typename T> T get(int attribute) const {
        T value{};
        if (const Documented* documented = find(attribute);
            documented != nullptr && documented->size == sizeof value)
            std::memcpy(&value, documented->bytes.data(), sizeof value);
        return value;
    }

    // Only a documented attribute, at the size of its type, as cuBLASLt takes them.
    bool fits(int attribute, size_t sizeInBytes) const {
        const Documented* value = find(attribute);
        return value != nullptr && value->size == sizeInBytes;
    }

    // cublasLt*GetAttribute: with sizeInBytes 0, only the size needed; otherwise the value, into a buffer
    // of exactly its size.
    cublasStatus_t read(int attribute, void* buf, size_t sizeInBytes, size_t* sizeWritten) const {
        const Documented* value = find(attribute);
        if (value == nullptr) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        if (sizeInBytes == 0) {
            if (sizeWritten == nullptr) {
                return CUBLAS_STATUS_INVALID_VALUE;
            }
            *sizeWritten = value->size;
            return CUBLAS_STATUS_SUCCESS;
        }
        if (buf == nullptr || sizeInBytes != value->size) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        std::memcpy(buf, value->bytes.data(), value->size);
        if (sizeWritten != nullptr) {
            *sizeWritten = value->size;
        }
        return CUBLAS_STATUS_SUCCESS;
    }

  private:
    Documented* find(int attribute) { return const_cast<Documented*>(std::as_const(*this).find(attribute)); }

    const Documented* find(int attribute) const {
        const auto found = std::find_if(values_.begin(), values_.end(), [attribute](const Documented& value) {
            return value.attribute == attribute;
        });
        return found == values_.end() ? nullptr : &*found;
    }

    std::vector<Documented> values_;
};

// Each descriptor (a matmul description, a matrix layout, a preference) is the stand-in's own
// Attributes behind the library's opaque handle type: what a product's shapes depend on is read from them
// (the operations, rows, columns, leading dimension, order and batches); the types only choose kernels,
// which compute nothing here.
template <typename Handle> Attributes* attributes_of(Handle handle) {
    return reinterpret_cast<Attributes*>(handle);
}

template <Descriptor kind, typename Handle> cublasStatus_t create(Handle* out, Attributes** created) {
    if (out == nullptr) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    auto* attributes = new (std::nothrow) Attributes(Attributes::documented_for<kind>());
    if (attributes == nullptr) {
        return CUBLAS_STATUS_ALLOC_FAILED;
    }
    *out = reinterpret_cast<Handle>(attributes);
    *created = attributes;
    return CUBLAS_STATUS_SUCCESS;
}

bool valid_operation(int32_t operation) {
    return operation >= CUBLAS_OP_N && operation <= CUBLAS_OP_C;
}

// cublasLt*SetAttribute: a documented attribute at its own size (an operation only when valid).
template <typename Handle>
cublasStatus_t set_attribute(Handle handle, int attribute, const void* buf, size_t sizeInBytes,
                             bool is_operation = false) {
    if (handle == nullptr || buf == nullptr || sizeInBytes == 0 ||
        !attributes_of(handle)->fits(attribute, sizeInBytes)) {
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    if (is_operation) {
        int32_t operation = 0;
        std::memcpy(&operation, buf, sizeof operation);
        if (!valid_operation(operation)) {
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    attributes_of(handle)->set_bytes(attribute, buf, sizeInBytes);
    return CUBLAS_STATUS_SUCCESS;
}

template <typename Handle>
cublasStatus_t get_attribute(Handle handle, int attribute, void* buf, size_t sizeInBytes,
                             size_t* sizeWritten) {
    return handle == nullptr ? CUBLAS_STATUS_INVALID_VALUE
                             : attributes_of(handle)->read(attribute, buf, sizeInBytes, sizeWritten);
}

struct Shape {
    uint64_t rows;
    uint64_t cols;
};

Shape operated(const Attributes& layout, int32_t operation) {
    const auto rows = layout.get<uint64_t>(CUBLASLT_MATRIX_LAYOUT_ROWS);
    const auto cols = layout.get<uint64_t>(CUBLASLT_MATRIX_LAYOUT_COLS);
    return operation == CUBLAS_OP_N ? Shape{rows, cols} : Shape{cols, rows};
}

bool well_formed(const Attributes& layout) {
    return layout.get<int32_t>(CUBLASLT_MATRIX_LAYOUT_ORDER) != CUBLASLT_ORDER_COL ||
           layout.get<int64_t>(CUBLASLT_MATRIX_LAYOUT_LD) >=
               static_cast<int64_t>(std::max<uint64_t>(1, layout.get<uint64_t>(CUBLASLT_MATRIX_LAYOUT_ROWS)));
}

int32_t batches(const Attributes& layout) {
    return layout.get<int32_t>(CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT);
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
    const Attributes& description = *attributes_of(computeDesc);
    const Attributes& a = *attributes_of(Adesc);
    const Attributes& b = *attributes_of(Bdesc);
    const Attributes& c = *attributes_of(Cdesc);
    const Attributes& d = *attributes_of(Ddesc);
    const Shape op_a = operated(a, description.get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSA));
    const Shape op_b = operated(b, description.get<int32_t>(CUBLASLT_MATMUL_DESC_TRANSB));
    const Shape op_c = operated(c, CUBLAS_OP_N);
    const Shape op_d = operated(d, CUBLAS_OP_N);
    const bool shapes_fit = op_a.cols == op_b.rows && op_c.rows == op_a.rows && op_c.cols == op_b.cols &&
                            op_d.rows == op_c.rows && op_d.cols == op_c.cols;
    const bool batches_fit = batches(a) == batches(d) && batches(b) == batches(d) && batches(c) == batches(d);
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

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* matmulDesc, cublasComputeType_t computeType,
                                        cudaDataType_t scaleType) {
    Attributes* attributes = nullptr;
    const cublasStatus_t status = create<Descriptor::MatmulDesc>(matmulDesc, &attributes);
    if (status == CUBLAS_STATUS_SUCCESS) {
        attributes->set<int32_t>(CUBLASLT_MATMUL_DESC_COMPUTE_TYPE, computeType);
        attributes->set<int32_t>(CUBLASLT_MATMUL_DESC_SCALE_TYPE, scaleType);
    }
    return status;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t matmulDesc) {
    delete attributes_of(matmulDesc);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t sizeInBytes) {
    const bool is_operation = attr == CUBLASLT_MATMUL_DESC_TRANSA || attr == CUBLASLT_MATMUL_DESC_TRANSB ||
                              attr == CUBLASLT_MATMUL_DESC_TRANSC;
    return set_attribute(matmulDesc, attr, buf, sizeInBytes, is_operation);
}

cublasStatus_t cublasLtMatmulDescGetAttribute(cublasLtMatmulDesc_t matmulDesc,
                                              cublasLtMatmulDescAttributes_t attr, void* buf,
                                              size_t sizeInBytes, size_t* sizeWritten) {
    return get_attribute(matmulDesc, attr, buf, sizeInBytes, sizeWritten);
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* matLayout, cudaDataType type, uint64_t rows,
                                          uint64_t cols, int64_t ld) {
    Attributes* attributes = nullptr;
    const cublasStatus_t status = create<Descriptor::MatrixLayout>(matLayout, &attributes);
    if (status == CUBLAS_STATUS_SUCCESS) {
        attributes->set<uint32_t>(CUBLASLT_MATRIX_LAYOUT_TYPE, type);
        attributes->set(CUBLASLT_MATRIX_LAYOUT_ROWS, rows);
        attributes->set(CUBLASLT_MATRIX_LAYOUT_COLS, cols);
        attributes->set(CUBLASLT_MATRIX_LAYOUT_LD, ld);
    }
    return status;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t matLayout) {
    delete attributes_of(matLayout);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                size_t sizeInBytes) {
    return set_attribute(matLayout, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatrixLayoutGetAttribute(cublasLtMatrixLayout_t matLayout,
                                                cublasLtMatrixLayoutAttribute_t attr, void* buf,
                                                size_t sizeInBytes, size_t* sizeWritten) {
    return get_attribute(matLayout, attr, buf, sizeInBytes, sizeWritten);
}

// The simulator reads none of its settings: the one algorithm the heuristic offers needs no workspace,
// so it fits any workspace limit.
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
    Attributes* attributes = nullptr;
    return create<Descriptor::MatmulPreference>(pref, &attributes);
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
    delete attributes_of(pref);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t sizeInBytes) {
    return set_attribute(pref, attr, buf, sizeInBytes);
}

cublasStatus_t cublasLtMatmulPreferenceGetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr, void* buf,
                                                    size_t sizeInBytes, size_t* sizeWritten) {
    return get_attribute(pref, attr, buf, sizeInBytes, sizeWritten);
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
