#include "hooks/attach.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include "common/warning.h"
#include "gpuleak/adapter_api.h"
#include "gpuleak/gpuleak.h"
#include "hooks/bound_calls.h"
#include "hooks/real_functions.h"
#include "hooks/torch_adapter_loader.h"
#include "recording/recorder.h"

namespace gpuleak {
namespace {

constinit int g_log_fd = -1;

} // namespace

bool loaded_at_start() {
    void* program = dlopen(nullptr, RTLD_LAZY);
    if (program == nullptr)
        return true;
    const bool global = real_dlsym(program, "gpuleak_active") == reinterpret_cast<void*>(&gpuleak_active);
    dlclose(program);
    return global;
}

} // namespace gpuleak

int gpuleak_attach(const char* output_pattern, const char* log_path) {
    using namespace gpuleak;
    if (output_pattern == nullptr || log_path == nullptr)
        return GPULEAK_ATTACH_NO_TRACE;
    const int log = ::open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0644);
    const int before = send_warnings_to(log);
    // After each sample: libraries the program loaded since (an import) have bound their calls to the real
    // functions.
    switch (attach_recording(output_pattern, redirect_bound_calls)) {
    case AttachOutcome::Recording:
        send_warnings_to(before);
        if (log >= 0)
            ::close(log);
        return GPULEAK_ATTACH_RECORDING;
    case AttachOutcome::NoTrace:
        send_warnings_to(-1);
        if (log >= 0)
            ::close(log);
        return GPULEAK_ATTACH_NO_TRACE;
    case AttachOutcome::Attached:
        break;
    }
    g_log_fd = log;
    redirect_bound_calls();
    attach_to_loaded_torch();
    return GPULEAK_ATTACH_OK;
}

int gpuleak_detach() {
    using namespace gpuleak;
    // Calls go where they went before first: none reaches the recorder as it ends.
    restore_bound_calls();
    if (!detach_recording())
        return GPULEAK_ATTACH_NOT_ATTACHED;
    send_warnings_to(-1);
    if (g_log_fd >= 0)
        ::close(g_log_fd);
    g_log_fd = -1;
    return GPULEAK_ATTACH_OK;
}

__attribute__((visibility("default"))) void gpuleak_segment_before_attach(const void* ptr, size_t size,
                                                                          int device, int expandable) {
    if (ptr != nullptr)
        gpuleak::record_before_attach(expandable != 0 ? gpuleak::MemoryKind::VmmMapping
                                                      : gpuleak::MemoryKind::Device,
                                      reinterpret_cast<uint64_t>(ptr), size, static_cast<int16_t>(device));
}

__attribute__((visibility("default"))) void gpuleak_block_before_attach(const void* ptr, size_t size,
                                                                        int device) {
    if (ptr != nullptr)
        gpuleak::record_before_attach(gpuleak::MemoryKind::Block, reinterpret_cast<uint64_t>(ptr), size,
                                      static_cast<int16_t>(device));
}

__attribute__((visibility("default"))) int gpuleak_attached_while_running() {
    return gpuleak::recording_attached() ? 1 : 0;
}
