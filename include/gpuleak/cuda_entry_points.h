// The intercepted CUDA entry points as data, generated from cuda_entry_points.def: the hooks', the
// simulated device's and the test programs' one view of the table. A row's index (its EntryPoint value)
// is the `api` byte of the trace records, so rows keep the table's order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <type_traits>

#include "gpuleak/cuda_abi.h"

namespace gpuleak {

// Enumerators are spelled like the table's tokens so that the X-macros can name them directly.
enum class Library : uint8_t { RUNTIME, DRIVER };
enum class StreamMode : uint8_t { LEGACY_STREAM, PER_THREAD_STREAM, NO_STREAM };
enum class Action : uint8_t { Alloc, Free, FreeRange, Trim, Lookup, Context };

enum class EntryPoint : uint8_t {
#define GPULEAK_ALLOC(lib, sym, ...) sym,
#define GPULEAK_FREE(lib, sym, ...) sym,
#define GPULEAK_FREE_RANGE(lib, sym, ...) sym,
#define GPULEAK_TRIM(lib, sym, ...) sym,
#define GPULEAK_LOOKUP(lib, sym, ...) sym,
#define GPULEAK_CONTEXT(lib, sym, ...) sym,
#include "gpuleak/cuda_entry_points.def"
};

inline constexpr const char* kEntryPointNames[] = {
#define GPULEAK_ALLOC(lib, sym, ...) #sym,
#define GPULEAK_FREE(lib, sym, ...) #sym,
#define GPULEAK_FREE_RANGE(lib, sym, ...) #sym,
#define GPULEAK_TRIM(lib, sym, ...) #sym,
#define GPULEAK_LOOKUP(lib, sym, ...) #sym,
#define GPULEAK_CONTEXT(lib, sym, ...) #sym,
#include "gpuleak/cuda_entry_points.def"
};

inline constexpr std::size_t kEntryPointCount = std::size(kEntryPointNames);

// The trace's api byte must be able to hold every row and still tell them from kBeforeAttachApi (254)
// and kPublicApi (255).
static_assert(kEntryPointCount < 254);

// The exported symbol of the row with this index (a trace's api byte); nullptr for any other value.
// Header-only so that the analyzer can name entry points without linking the interposer.
constexpr const char* entry_point_name(std::size_t index) {
    return index < kEntryPointCount ? kEntryPointNames[index] : nullptr;
}

template <Library L> using ResultOf = std::conditional_t<L == Library::RUNTIME, cudaError_t, CUresult>;

template <Library L>
inline constexpr ResultOf<L> kSuccessOf = L == Library::RUNTIME ? cudaSuccess : CUDA_SUCCESS;

} // namespace gpuleak
