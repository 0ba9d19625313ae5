#include "device_state.h"

#include "sim_config.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <unordered_set>

struct CUctx_st {
    int device;
};

struct CUmemPoolHandle_st {
    int device;
};

struct CUstream_st {
    int device;
    int priority;
};

namespace gpuleak::sim {
namespace {

// The handles CUDA reserves for the default streams (CU_STREAM_LEGACY, CU_STREAM_PER_THREAD); NULL too.
constexpr std::uintptr_t kLastSpecialStream = 2;

struct Device {
    std::size_t capacity = 0;
    std::size_t charged = 0;
    std::size_t context_bytes = 0;   // wanted while the primary context is retained
    std::size_t context_charged = 0; // what it got
    int primary_retains = 0;
    CUctx_st context{};
    CUmemPoolHandle_st pool{};
};

std::once_flag g_init_once;
std::atomic<bool> g_initialized{false};
int g_device_count = 0;
std::mutex g_mutex;
std::array<Device, kMaxDevices> g_devices;
std::unordered_set<CUstream> g_streams;
thread_local CUcontext t_current_context = nullptr;

} // namespace

void initialize_devices() {
    std::call_once(g_init_once, [] {
        const SimConfig config = read_config_from_environment();
        g_device_count = config.devices;
        for (int device = 0; device < kMaxDevices; ++device) {
            g_devices[device].capacity = config.capacity;
            g_devices[device].context_bytes = std::min(config.context_bytes, config.capacity);
            g_devices[device].context.device = device;
            g_devices[device].pool.device = device;
        }
        if (!config.quiet) {
            std::fprintf(stderr, "gpuleak-sim: simulated CUDA device (no GPU): %s\n",
                         describe_config(config).c_str());
        }
        g_initialized.store(true, std::memory_order_release);
    });
}

bool devices_initialized() {
    return g_initialized.load(std::memory_order_acquire);
}

int device_count() {
    return g_device_count;
}

bool valid_device(int device) {
    return device >= 0 && device < g_device_count;
}

std::size_t device_capacity(int device) {
    return g_devices[device].capacity;
}

std::size_t device_charged(int device) {
    const std::lock_guard lock(g_mutex);
    return g_devices[device].charged;
}

bool charge_device(int device, std::size_t bytes) {
    const std::lock_guard lock(g_mutex);
    Device& d = g_devices[device];
    if (bytes > d.capacity - d.charged) {
        return false;
    }
    d.charged += bytes;
    return true;
}

void uncharge_device(int device, std::size_t bytes) {
    const std::lock_guard lock(g_mutex);
    g_devices[device].charged -= bytes;
}

CUcontext primary_context(int device) {
    return &g_devices[device].context;
}

void retain_primary_context(int device) {
    const std::lock_guard lock(g_mutex);
    Device& d = g_devices[device];
    // Like a real context, it takes its memory when it comes to life, whatever is free.
    if (d.primary_retains++ == 0) {
        d.context_charged = std::min(d.context_bytes, d.capacity - d.charged);
        d.charged += d.context_charged;
    }
}

bool release_primary_context(int device) {
    const std::lock_guard lock(g_mutex);
    Device& d = g_devices[device];
    if (d.primary_retains == 0) {
        return false;
    }
    if (--d.primary_retains == 0) {
        d.charged -= d.context_charged;
        d.context_charged = 0;
    }
    return true;
}

bool primary_context_active(int device) {
    const std::lock_guard lock(g_mutex);
    return g_devices[device].primary_retains > 0;
}

int context_device(CUcontext context) {
    for (int device = 0; device < g_device_count; ++device) {
        if (context == &g_devices[device].context) {
            return device;
        }
    }
    return -1;
}

CUcontext current_context() {
    return t_current_context;
}

void set_current_context(CUcontext context) {
    t_current_context = context;
}

CUresult current_device(int& device) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    if (t_current_context == nullptr) {
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    device = t_current_context->device;
    return CUDA_SUCCESS;
}

CUmemoryPool default_pool(int device) {
    return &g_devices[device].pool;
}

int pool_device(CUmemoryPool pool) {
    for (int device = 0; device < g_device_count; ++device) {
        if (pool == &g_devices[device].pool) {
            return device;
        }
    }
    return -1;
}

CUstream create_stream(int device, int priority) {
    auto* stream =
        new CUstream_st{device, std::clamp(priority, kHighestStreamPriority, kLowestStreamPriority)};
    const std::lock_guard lock(g_mutex);
    g_streams.insert(stream);
    return stream;
}

bool destroy_stream(CUstream stream) {
    {
        const std::lock_guard lock(g_mutex);
        if (g_streams.erase(stream) == 0) {
            return false;
        }
    }
    delete stream;
    return true;
}

namespace {

// Runs read(stream) under the lock when `stream` is one the program created and has not destroyed.
template <class Read> CUresult read_created_stream(CUstream stream, Read&& read) {
    if (!devices_initialized()) {
        return CUDA_ERROR_NOT_INITIALIZED;
    }
    const std::lock_guard lock(g_mutex);
    if (!g_streams.contains(stream)) {
        return CUDA_ERROR_INVALID_HANDLE;
    }
    read(*stream);
    return CUDA_SUCCESS;
}

} // namespace

CUresult stream_device(CUstream stream, int& device) {
    if (reinterpret_cast<std::uintptr_t>(stream) <= kLastSpecialStream) {
        return current_device(device);
    }
    return read_created_stream(stream, [&](const auto& created) { device = created.device; });
}

CUresult stream_priority(CUstream stream, int& priority) {
    if (reinterpret_cast<std::uintptr_t>(stream) <= kLastSpecialStream) {
        int device = 0;
        priority = kLowestStreamPriority;
        return current_device(device);
    }
    return read_created_stream(stream, [&](const auto& created) { priority = created.priority; });
}

} // namespace gpuleak::sim
