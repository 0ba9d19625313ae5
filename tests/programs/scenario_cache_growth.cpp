// Scenario with a known answer: a small caching allocator (like PyTorch's) reserves segments with
// cudaMalloc and hands out blocks inside them, reporting each block through gpuleak's C API. Each step
// needs a block of a new, larger size, which no cached segment fits: reserved grows while allocated
// stays flat. The report must call it cache growth, not a leak.
#include <cstdlib>
#include <vector>

#include "gpuleak/gpuleak.h"

extern "C" int cudaMalloc(void** pointer, size_t size);

namespace {

struct Segment {
    char* base;
    size_t size;
    bool in_use;
};

class CachingAllocator {
  public:
    void* allocate(size_t size) {
        for (Segment& segment : segments_) {
            if (!segment.in_use && segment.size >= size) {
                segment.in_use = true;
                gpuleak_try_block_alloc(segment.base, size, 0);
                return segment.base;
            }
        }
        void* memory = nullptr;
        if (cudaMalloc(&memory, size) != 0)
            return nullptr;
        segments_.push_back({static_cast<char*>(memory), size, true});
        gpuleak_try_block_alloc(memory, size, 0);
        return memory;
    }
    void release(void* block) {
        for (Segment& segment : segments_) {
            if (segment.base == block) {
                segment.in_use = false;
                gpuleak_try_block_free(block);
            }
        }
    }

  private:
    std::vector<Segment> segments_;
};

} // namespace

int main(int argc, char** argv) {
    const int steps = argc > 1 ? std::atoi(argv[1]) : 20;
    constexpr size_t kMiB = size_t{1} << 20;
    CachingAllocator allocator;
    for (int i = 0; i < steps; ++i) {
        void* block = allocator.allocate((4 + static_cast<size_t>(i)) * kMiB);
        allocator.release(block);
    }
    void* kept = allocator.allocate(kMiB); // the one block live at the end
    return kept != nullptr ? 0 : 1;
}
