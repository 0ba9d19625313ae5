#include "hooks/entry_points.h"

#include <cstring>

namespace gpuleak {
namespace {

// Only addresses and literals: the compiler initialises this statically (relocations, no constructor),
// so hooks called before libgpuleak's constructors ran see it complete.
const EntryPointInfo kEntryPoints[] = {
#define GPULEAK_ROW_(lib, sym, base, since, streams, action)                                                 \
    {#sym,                                                                                                   \
     #base,                                                                                                  \
     Library::lib,                                                                                           \
     since,                                                                                                  \
     StreamMode::streams,                                                                                    \
     Action::action,                                                                                         \
     reinterpret_cast<void*>(&gpuleak_hook_##sym)},
#define GPULEAK_ALLOC(lib, sym, base, since, streams, ...) GPULEAK_ROW_(lib, sym, base, since, streams, Alloc)
#define GPULEAK_FREE(lib, sym, base, since, streams, ...) GPULEAK_ROW_(lib, sym, base, since, streams, Free)
#define GPULEAK_FREE_RANGE(lib, sym, base, since, streams, ...)                                              \
    GPULEAK_ROW_(lib, sym, base, since, streams, FreeRange)
#define GPULEAK_TRIM(lib, sym, base, since, streams, ...) GPULEAK_ROW_(lib, sym, base, since, streams, Trim)
#define GPULEAK_LOOKUP(lib, sym, base, since, streams, ...)                                                  \
    GPULEAK_ROW_(lib, sym, base, since, streams, Lookup)
#define GPULEAK_CONTEXT(lib, sym, base, since, streams, ...)                                                 \
    GPULEAK_ROW_(lib, sym, base, since, streams, Context)
#include "gpuleak/cuda_entry_points.def"
#undef GPULEAK_ROW_
};

static_assert(std::size(kEntryPoints) == kEntryPointCount);

EntryPoint row_at(std::size_t index) {
    return static_cast<EntryPoint>(index);
}

} // namespace

const EntryPointInfo& entry_point_info(EntryPoint row) {
    return kEntryPoints[static_cast<std::size_t>(row)];
}

std::optional<EntryPoint> entry_point_by_symbol(const char* symbol) {
    for (std::size_t i = 0; i < kEntryPointCount; ++i) {
        if (std::strcmp(kEntryPoints[i].symbol, symbol) == 0) {
            return row_at(i);
        }
    }
    return std::nullopt;
}

std::optional<EntryPoint> entry_point_by_base(const char* base, int version, uint64_t flags) {
    // A function without a stream parameter has one row that serves both kinds of request.
    const StreamMode variant = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0
                                   ? StreamMode::PER_THREAD_STREAM
                                   : StreamMode::LEGACY_STREAM;
    std::optional<EntryPoint> best;
    for (std::size_t i = 0; i < kEntryPointCount; ++i) {
        const EntryPointInfo& info = kEntryPoints[i];
        if (info.library != Library::DRIVER || info.since > version ||
            (info.streams != variant && info.streams != StreamMode::NO_STREAM) ||
            std::strcmp(info.base, base) != 0) {
            continue;
        }
        if (!best || info.since > entry_point_info(*best).since) {
            best = row_at(i);
        }
    }
    return best;
}

std::optional<EntryPoint> entry_point_by_wrapper(const void* function) {
    for (std::size_t i = 0; i < kEntryPointCount; ++i) {
        if (kEntryPoints[i].wrapper == function) {
            return row_at(i);
        }
    }
    return std::nullopt;
}

} // namespace gpuleak
