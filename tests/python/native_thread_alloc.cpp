// For test_python_recording.py: an allocation made on the simulated device by a thread that C++
// started and that never ran Python, called from Python through ctypes.
#include <cstddef>
#include <thread>

extern "C" int cudaMalloc(void** pointer, size_t size);

extern "C" __attribute__((visibility("default"))) void* allocate_in_native_thread(size_t size) {
    void* pointer = nullptr;
    std::thread([&pointer, size] {
        if (cudaMalloc(&pointer, size) != 0)
            pointer = nullptr;
    }).join();
    return pointer;
}
