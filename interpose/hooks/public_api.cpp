// The public C API of include/gpuleak/gpuleak.h.
#include "gpuleak/gpuleak.h"

#include <cstring>

#include "hooks/saved_tensor_hooks.h"
#include "recording/recorder.h"

extern "C" {

__attribute__((visibility("default"))) void gpuleak_mark(const char* label) {
    gpuleak::record_marker(label);
}

__attribute__((visibility("default"))) void gpuleak_block_alloc(const void* ptr, size_t size, int device) {
    if (ptr == nullptr)
        return;
    gpuleak::record_alloc({gpuleak::MemoryKind::Block, reinterpret_cast<uint64_t>(ptr), size,
                           static_cast<int16_t>(device), 0, gpuleak::kPublicApi});
}

__attribute__((visibility("default"))) void gpuleak_block_free(const void* ptr) {
    if (ptr == nullptr)
        return;
    gpuleak::record_free(gpuleak::KeySpace::BlockSpace, reinterpret_cast<uint64_t>(ptr), 0,
                         gpuleak::kPublicApi);
}

__attribute__((visibility("default"))) void gpuleak_block_alloc_failed(size_t size, int device,
                                                                       size_t free_bytes) {
    gpuleak::record_block_refusal(size, static_cast<int16_t>(device),
                                  free_bytes == GPULEAK_FREE_BYTES_UNKNOWN ? gpuleak::kUnknownFreeBytes
                                                                           : free_bytes);
}

__attribute__((visibility("default"))) void gpuleak_name_source(const char* file, const char* name,
                                                                const char* text) {
    gpuleak::record_source_name(file, name, text);
}

__attribute__((visibility("default"))) void gpuleak_retainers(const char* label, const char* document) {
    gpuleak::record_retainers(label, document);
}

__attribute__((visibility("default"))) int gpuleak_saved_tensor_hooks(void) {
    return static_cast<int>(gpuleak::saved_tensor_hooks());
}

__attribute__((visibility("default"))) int gpuleak_why_moments(void) {
    return static_cast<int>(gpuleak::why_moments());
}

__attribute__((visibility("default"))) void gpuleak_out_of_memory(int device) {
    gpuleak::note_out_of_memory(device);
}

__attribute__((visibility("default"))) void gpuleak_cell_error(const char* cell) {
    gpuleak::note_cell_error(cell);
}

__attribute__((visibility("default"))) int gpuleak_active(void) {
    return gpuleak::recording_active() ? 1 : 0;
}

__attribute__((visibility("default"))) size_t gpuleak_trace_path(char* buf, size_t capacity) {
    const char* path = gpuleak::trace_path();
    if (path == nullptr)
        return 0;
    size_t length = std::strlen(path);
    if (buf != nullptr && capacity > 0) {
        size_t copied = length < capacity - 1 ? length : capacity - 1;
        std::memcpy(buf, path, copied);
        buf[copied] = '\0';
    }
    return length;
}

} // extern "C"
