// The PyTorch adapter: compiled against one installed torch's own headers (torch/include) with its
// _GLIBCXX_USE_CXX11_ABI, by build-adapter.sh, and dlopen'ed by libgpuleak.so inside a traced process
// (interpose/hooks/torch_adapter_loader.cpp) once PyTorch's caching allocator has made its first segment,
// or, in a program gpuleak attach records, at once (what the allocator held then is read from its snapshot).
// It attaches a trace tracker to the allocator and reports the blocks it hands to tensors through
// gpuleak's C API, so that the report tells "allocated" (tensors) from "reserved" (segments, which the
// CUDA hooks already record with their own stacks).
//
// Facts this relies on, read in torch's CUDACachingAllocator.cpp (2.11):
// - Tracker callbacks run on the allocating or freeing thread with that device's allocator mutex held:
//   gpuleak_block_alloc there captures the Python stack of the line that made the tensor. The GIL may
//   or may not be held; nothing here takes it or calls into Python.
// - ALLOC carries the requested size, but torch.cuda.memory_allocated() counts the block's size: the
//   request rounded up, or the whole free block it was found in when the allocator did not split it.
//   The block's size is therefore derived here from the allocator's rules (round_size, should_split)
//   and a model of each device's segments and occupied blocks, and checked against torch's own count
//   (at every event at first, then sampled: kCheckInterval).
// - free() lowers allocated_bytes before it records FREE_REQUESTED; FREE_COMPLETED follows when the
//   block is really reusable (at once, or once the streams that used it are done). A block stops being
//   "allocated" at FREE_REQUESTED, as in memory_allocated(); it stays occupied for the model until
//   FREE_COMPLETED, because the allocator does not merge it with its free neighbours before then.
// - Segments (SEGMENT_ALLOC/FREE/MAP/UNMAP) are already recorded by the CUDA hooks as "reserved";
//   they only feed the model here. OOM (addr_: the device's free bytes, size_: the rounded request) is
//   recorded as the block refused, also where no cudaMalloc failed (set_per_process_memory_fraction).
// - Out-of-memory observers run after the OOM entry, once malloc has copied them and unlocked the device's
//   mutex, just before it raises: gpuleak_out_of_memory runs gpuleak.why() there, which takes the GIL.
//   attachOutOfMemoryObserver appends to each device's list without its lock; the loader attaches at the
//   allocator's first segment, before any allocation could have run out of memory.
#include <c10/core/AllocatorConfig.h>
#include <c10/cuda/CUDACachingAllocator.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <dlfcn.h>
#include <map>
#include <unistd.h>
#include <vector>

#include "gpuleak/adapter_api.h"
#include "gpuleak/gpuleak.h"

namespace {

using c10::CachingAllocator::AcceleratorAllocatorConfig;
using c10::CachingDeviceAllocator::TraceEntry;

// The allocator's constants (CUDACachingAllocator.cpp), which the headers do not export.
constexpr uint64_t kMinBlockSize = 512;
constexpr uint64_t kSmallSize = 1 << 20;

// What the loader gets back from gpuleak_torch_adapter_attach_v1.
enum AttachResult : int { kAttached = 0, kNotInitialized = 1, kOtherBackend = 2, kFailed = 3 };

// One line, as libgpuleak says its own: on stderr, or into the log of a program gpuleak attach records.
void warn(const char* text) {
    gpuleak_adapter_warning(text);
}

// round_size of CUDACachingAllocator.cpp: what a request becomes before a block is looked for.
uint64_t round_size(uint64_t size) {
    if (size < kMinBlockSize)
        return kMinBlockSize;
    const uint64_t divisions = AcceleratorAllocatorConfig::roundup_power2_divisions(size);
    if (divisions > 1 && size > kMinBlockSize * divisions) {
        // roundup_power2_next_division: the next of `divisions` equal steps between two powers of two.
        if ((size & (size - 1)) == 0)
            return size;
        const uint64_t floor = uint64_t{1} << (63 - __builtin_clzll(size));
        const uint64_t step = floor >> (63 - __builtin_clzll(divisions));
        if (step == 0)
            return floor << 1;
        const uint64_t rounded = size & ~(step - 1);
        return rounded == size ? size : rounded + step;
    }
    return kMinBlockSize * ((size + kMinBlockSize - 1) / kMinBlockSize);
}

// The blocks of one device that are allocated or waiting to be freed, by address: an open-addressing
// table (linear probing, backward-shift deletion) whose slots are reused, so that an allocation and
// its free cost a few probes and no heap allocation; it grows by doubling, rarely.
class BlockTable {
  public:
    struct Block {
        uint64_t address; // 0: an empty slot (the allocator never hands out address 0)
        uint64_t size;
        bool live; // allocated, not yet freed: counted in torch's allocated_bytes
    };

    // The block at `address`, or nullptr.
    Block* find(uint64_t address) {
        if (slots_.empty())
            return nullptr;
        for (size_t i = home(address);; i = (i + 1) & mask()) {
            if (slots_[i].address == address)
                return &slots_[i];
            if (slots_[i].address == 0)
                return nullptr;
        }
    }

    // Records a live block at `address`, in place of one that may still be there (its free went by
    // unseen).
    void insert(uint64_t address, uint64_t size) {
        if ((count_ + 1) * 2 > slots_.size())
            grow();
        size_t i = home(address);
        while (slots_[i].address != 0 && slots_[i].address != address)
            i = (i + 1) & mask();
        if (slots_[i].address == 0)
            ++count_;
        slots_[i] = {address, size, true};
    }

    void erase(Block* block) {
        // Backward-shift deletion: moves each later block of the run that may live in the hole back
        // into it, so that lookups need no tombstones.
        size_t hole = static_cast<size_t>(block - slots_.data());
        for (size_t i = (hole + 1) & mask(); slots_[i].address != 0; i = (i + 1) & mask()) {
            const size_t wanted = home(slots_[i].address);
            // Movable when its home is not inside the (cyclic) stretch from after the hole to i.
            if (((i - wanted) & mask()) >= ((i - hole) & mask())) {
                slots_[hole] = slots_[i];
                hole = i;
            }
        }
        slots_[hole] = {};
        --count_;
    }

  private:
    size_t mask() const { return slots_.size() - 1; }
    // Fibonacci hashing of the address without its low bits, always multiples of kMinBlockSize.
    size_t home(uint64_t address) const {
        return static_cast<size_t>(((address >> 9) * 0x9E3779B97F4A7C15ull) >> shift_);
    }

    void grow() {
        std::vector<Block> previous(slots_.empty() ? 1024 : slots_.size() * 2);
        previous.swap(slots_);
        shift_ = 64 - static_cast<unsigned>(__builtin_ctzll(slots_.size()));
        for (const Block& block : previous) {
            if (block.address == 0)
                continue;
            size_t i = home(block.address);
            while (slots_[i].address != 0)
                i = (i + 1) & mask();
            slots_[i] = block;
        }
    }

    std::vector<Block> slots_;
    size_t count_ = 0;
    unsigned shift_ = 64;
};

// How often the model is compared with torch's count: at every allocation and free for a first
// stretch, then at one in about kCheckInterval, at random so that no periodic pattern of the program
// escapes it. A rule of torch's that the model gets wrong shows at every block it concerns, so
// sampling still catches it in a program that keeps making such blocks; reading torch's count copies
// its whole DeviceStats under the allocator's mutex, which at every event cost more than the rest of
// the adapter together.
constexpr uint32_t kCheckedFirst = 4096;
constexpr uint32_t kCheckInterval = 256;

// One device's allocator as far as the block sizes need it. Only touched with that device's allocator
// mutex held, so it needs no lock of its own.
struct DeviceModel {
    BlockTable blocks;
    // Of the large pool only (blocks above kSmallSize), where a block's size depends on its
    // neighbours: segments from cudaMalloc, and the blocks occupied in them, by address. Large blocks
    // are few and each one costs the allocator far more than a tree node.
    std::map<uint64_t, uint64_t> segments;
    std::map<uint64_t, uint64_t> large_occupied;
    int64_t allocated = 0; // the sum of the live blocks: torch's allocated_bytes, if all is right
    uint32_t events_checked = 0;
    uint32_t until_check = 1;
    uint32_t random = 0x9E3779B9u;

    // Whether this allocation or free is one to compare with torch's count.
    bool check_due() {
        if (--until_check != 0)
            return false;
        if (events_checked < kCheckedFirst) {
            ++events_checked;
            until_check = 1;
        } else {
            // xorshift32: uniform in [1, 2 * kCheckInterval - 1], kCheckInterval on average.
            random ^= random << 13;
            random ^= random >> 17;
            random ^= random << 5;
            until_check = 1 + random % (2 * kCheckInterval - 1);
        }
        return true;
    }

    // The size of the block the allocator hands out at `address` for a request of `requested` bytes.
    uint64_t block_size(uint64_t address, uint64_t requested) const {
        const uint64_t size = round_size(requested);
        // Small-pool blocks, and every block with expandable segments, are split whenever at least
        // kMinBlockSize would remain; sizes are multiples of it, so the block is exactly the request.
        if (size <= kSmallSize || AcceleratorAllocatorConfig::use_expandable_segments())
            return size;
        // A large block is split only below max_split_size and when more than kSmallSize remains of
        // the free block it was found in: the free run from `address` to the next occupied block or
        // the end of the segment (free neighbours are always merged).
        auto segment = segments.upper_bound(address);
        if (segment == segments.begin())
            return size;
        --segment;
        uint64_t end = segment->first + segment->second;
        if (address >= end)
            return size;
        auto next = large_occupied.upper_bound(address);
        if (next != large_occupied.end() && next->first < end)
            end = next->first;
        const uint64_t found = end - address;
        if (found < size)
            return size;
        const bool split = size < AcceleratorAllocatorConfig::max_split_size() && found - size > kSmallSize;
        return split ? size : found;
    }
};

DeviceModel g_devices[C10_COMPILE_TIME_MAX_GPUS];

// Py_IsFinalizing (3.13+) or _Py_IsFinalizing (3.10-3.12): a plain read of the runtime's state, safe
// without the GIL. nullptr outside a Python program.
using IsFinalizing = int (*)();
IsFinalizing g_python_finalizing = nullptr;
std::atomic<bool> g_disagreement_reported{false};

// Compares the model with torch's own count (its stats are updated around the trace entries: before
// FREE_REQUESTED, after ALLOC), so that a torch whose rules differ from the model's says so once
// instead of silently reporting wrong sizes.
void check_against_torch(c10::DeviceIndex device, int64_t expected) {
    if (g_disagreement_reported.load(std::memory_order_relaxed))
        return;
    const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
    const int64_t counted =
        stats.allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)].current;
    if (counted != expected && !g_disagreement_reported.exchange(true)) {
        char text[256];
        std::snprintf(text, sizeof text,
                      "the PyTorch adapter's block sizes disagree with torch's count on device %d (%lld "
                      "against %lld bytes); allocated bytes in this trace are approximate",
                      static_cast<int>(device), static_cast<long long>(expected),
                      static_cast<long long>(counted));
        warn(text);
    }
}

void on_trace_entry(const TraceEntry& entry) {
    if (entry.device_ < 0 || entry.device_ >= C10_COMPILE_TIME_MAX_GPUS)
        return;
    DeviceModel& model = g_devices[entry.device_];
    const uint64_t address = entry.addr_;
    switch (entry.action_) {
    case TraceEntry::SEGMENT_ALLOC:
        model.segments[address] = entry.size_;
        break;
    case TraceEntry::SEGMENT_FREE:
        model.segments.erase(address);
        break;
    case TraceEntry::ALLOC: {
        if (model.check_due())
            check_against_torch(entry.device_, model.allocated);
        const uint64_t size = model.block_size(address, entry.size_);
        model.blocks.insert(address, size);
        if (size > kSmallSize)
            model.large_occupied[address] = size;
        model.allocated += static_cast<int64_t>(size);
        // NOLINTNEXTLINE(performance-no-int-to-ptr): the allocator reports addresses as integers.
        gpuleak_block_alloc(reinterpret_cast<const void*>(address), size, entry.device_);
        break;
    }
    case TraceEntry::FREE_REQUESTED: {
        BlockTable::Block* block = model.blocks.find(address);
        if (block == nullptr || !block->live)
            break; // allocated before the adapter was attached
        block->live = false;
        model.allocated -= static_cast<int64_t>(block->size);
        // Tensors that die as the interpreter tears the program's modules down were still held when
        // the program's own code ended: what the report calls held at the end, as
        // torch.cuda.memory_allocated() said on the script's last line. Recording those frees would
        // make every leak look released.
        if (g_python_finalizing == nullptr || g_python_finalizing() == 0) {
            // NOLINTNEXTLINE(performance-no-int-to-ptr): the allocator reports addresses as integers.
            gpuleak_block_free(reinterpret_cast<const void*>(address));
        }
        if (model.check_due())
            check_against_torch(entry.device_, model.allocated);
        break;
    }
    case TraceEntry::FREE_COMPLETED: {
        BlockTable::Block* block = model.blocks.find(address);
        if (block == nullptr)
            break;
        if (block->size > kSmallSize)
            model.large_occupied.erase(address);
        model.blocks.erase(block);
        break;
    }
    case TraceEntry::OOM:
        gpuleak_block_alloc_failed(entry.size_, entry.device_, address);
        break;
    default:
        // SEGMENT_MAP/UNMAP: expandable segments always split, so their blocks need no model;
        // SNAPSHOT and annotations: nothing.
        break;
    }
}

// gpuleak attach: the allocator has worked since long before. What its snapshot holds goes into the model,
// so that the blocks made from now on get their sizes right, and to gpuleak as held before the attach:
// each segment as reserved, each block handed out as allocated. Done before the tracker is attached, while
// nothing else touches the model; what the allocator does between the snapshot and the attach is missed.
void seed_from_snapshot(c10::cuda::CUDACachingAllocator::CUDAAllocator& allocator) {
    const c10::cuda::CUDACachingAllocator::SnapshotInfo snapshot = allocator.snapshot({0, 0}, false);
    for (const c10::CachingDeviceAllocator::SegmentInfo& segment : snapshot.segments) {
        if (segment.device < 0 || segment.device >= C10_COMPILE_TIME_MAX_GPUS)
            continue;
        DeviceModel& model = g_devices[segment.device];
        // NOLINTBEGIN(performance-no-int-to-ptr): the allocator reports addresses as integers.
        gpuleak_segment_before_attach(reinterpret_cast<const void*>(segment.address), segment.total_size,
                                      segment.device, segment.is_expandable ? 1 : 0);
        if (segment.is_large && !segment.is_expandable)
            model.segments[segment.address] = segment.total_size;
        uint64_t address = segment.address;
        for (const c10::CachingDeviceAllocator::BlockInfo& block : segment.blocks) {
            if (block.allocated) {
                model.blocks.insert(address, block.size);
                model.allocated += static_cast<int64_t>(block.size);
                gpuleak_block_before_attach(reinterpret_cast<const void*>(address), block.size,
                                            segment.device);
            }
            // A block freed but still in use by a stream stays occupied until its free completes.
            if ((block.allocated || block.active) && block.size > kSmallSize)
                model.large_occupied[address] = block.size;
            address += block.size;
        }
        // NOLINTEND(performance-no-int-to-ptr)
    }
}

} // namespace

// Attaches the tracker to every device's allocator. The allocator attaches to the devices it has, so
// this must run after CUDA's lazy init: the loader calls it at the allocator's first segment, and
// again later when the allocator was not initialized yet. The allocator's own lock for that device is
// held by the calling thread (a recursive mutex); the other devices' locks are taken one at a time.
extern "C" __attribute__((visibility("default"))) int gpuleak_torch_adapter_attach_v1() noexcept {
    try {
        c10::cuda::CUDACachingAllocator::CUDAAllocator* allocator = c10::cuda::CUDACachingAllocator::get();
        if (allocator == nullptr || !allocator->initialized())
            return kNotInitialized;
        // cudaMallocAsync (PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync) has no trace trackers and
        // other block rules; its cudaMallocAsync calls are recorded by the hooks anyway.
        if (allocator->name() != "native")
            return kOtherBackend;
        if (gpuleak_attached_while_running() != 0)
            seed_from_snapshot(*allocator);
        g_python_finalizing = reinterpret_cast<IsFinalizing>(dlsym(RTLD_DEFAULT, "Py_IsFinalizing"));
        if (g_python_finalizing == nullptr)
            g_python_finalizing = reinterpret_cast<IsFinalizing>(dlsym(RTLD_DEFAULT, "_Py_IsFinalizing"));
        // Called once the allocator gave up, with its lock released, before it raises OutOfMemoryError: in
        // the thread that allocated, which may take the GIL there, as PyTorch's own Python observers do.
        allocator->attachOutOfMemoryObserver(
            [](int64_t device, size_t /*allocated*/, size_t /*device_total*/, size_t /*device_free*/) {
                gpuleak_out_of_memory(static_cast<int>(device));
            });
        allocator->attachAllocatorTraceTracker([](const TraceEntry& entry) {
            // A throw would unwind through the allocator with its lock held: out of memory for the
            // model's maps loses this event, not the program.
            try {
                on_trace_entry(entry);
            } catch (...) {
                warn("the PyTorch adapter could not record an allocator event (out of memory)");
            }
        });
        return kAttached;
    } catch (...) {
        return kFailed;
    }
}
