// The plugin late_plugin loads: one segment from CUDA, carved into blocks reported through the public
// C API as a caching allocator would.
#include <cstddef>

#include "gpuleak/gpuleak.h"

extern "C" int cudaMalloc(void** pointer, size_t size);

extern "C" __attribute__((visibility("default"))) int plugin_run() {
    void* segment = nullptr;
    if (cudaMalloc(&segment, 2 << 20) != 0)
        return 6;
    auto* base = static_cast<char*>(segment);
    gpuleak_try_block_alloc(base, 4096, 0);
    gpuleak_try_block_alloc(base + 4096, 8192, 0);
    gpuleak_try_block_free(base);
    return 0;
}
