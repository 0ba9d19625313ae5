// Scenario with a known answer: a small caching allocator with a cap of its own (like PyTorch under
// set_per_process_memory_fraction) reports its blocks through gpuleak's C API and says so when it
// refuses one. "cap": it refuses a request over its cap while the device has room, and no CUDA call
// fails. "device": the device is full; the allocator's cudaMalloc fails, it empties its cache and tries
// once more, then refuses: one out-of-memory error, not three.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "gpuleak/gpuleak.h"

extern "C" int cudaMalloc(void** pointer, size_t size);
extern "C" int cudaFree(void* pointer);
extern "C" int cudaMemGetInfo(size_t* free, size_t* total);

namespace {

constexpr size_t kMiB = size_t{1} << 20;

struct Segment {
    void* base;
    size_t size;
    bool in_use;
};

class CappedAllocator {
  public:
    explicit CappedAllocator(size_t cap) : cap_(cap) {}

    void* allocate(size_t size) {
        for (Segment& segment : segments_) {
            if (!segment.in_use && segment.size == size) {
                segment.in_use = true;
                gpuleak_try_block_alloc(segment.base, size, 0);
                return segment.base;
            }
        }
        if (reserved_ + size > cap_)
            return refuse(size);
        void* memory = nullptr;
        if (cudaMalloc(&memory, size) != 0) {
            empty_cache();
            if (cudaMalloc(&memory, size) != 0)
                return refuse(size);
        }
        reserved_ += size;
        segments_.push_back({memory, size, true});
        gpuleak_try_block_alloc(memory, size, 0);
        return memory;
    }

  private:
    void empty_cache() {
        for (auto segment = segments_.begin(); segment != segments_.end();) {
            if (segment->in_use) {
                ++segment;
                continue;
            }
            cudaFree(segment->base);
            reserved_ -= segment->size;
            segment = segments_.erase(segment);
        }
    }

    __attribute__((noinline)) void* refuse(size_t size) {
        size_t free_bytes = 0;
        size_t total_bytes = 0;
        if (cudaMemGetInfo(&free_bytes, &total_bytes) != 0)
            free_bytes = GPULEAK_FREE_BYTES_UNKNOWN;
        gpuleak_try_block_alloc_failed(size, 0, free_bytes); // refusal site
        return nullptr;
    }

    size_t cap_;
    size_t reserved_ = 0;
    std::vector<Segment> segments_;
};

} // namespace

int main(int argc, char** argv) {
    const bool device_full = argc > 1 && std::strcmp(argv[1], "device") == 0;
    CappedAllocator allocator(device_full ? 1024 * kMiB : 48 * kMiB);
    std::vector<void*> held;
    for (int i = 0; i < (device_full ? 4 : 3); ++i)
        held.push_back(allocator.allocate(16 * kMiB)); // held site
    return allocator.allocate(32 * kMiB) == nullptr ? 0 : 1;
}
