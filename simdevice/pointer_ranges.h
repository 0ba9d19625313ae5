// What the driver knows about an address, for its pointer queries (driver_pointers.cpp). Each kind of
// memory is kept by the file that hands it out; each answers for the addresses inside its own ranges.
#pragma once

#include "gpuleak/cuda_abi.h"

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>

namespace gpuleak::sim {

enum class MemoryKind { DEVICE, MANAGED, HOST };

struct PointerRange {
    // The address range the pointer belongs to: the allocation, or for mapped memory the reservation the
    // mapping lies in (CU_POINTER_ATTRIBUTE_RANGE_START_ADDR), and the mapping itself (..._MAPPING_*).
    CUdeviceptr base;
    std::size_t size;
    CUdeviceptr mapping_base;
    std::size_t mapping_size;
    MemoryKind kind;
    int device;
    // The pool a stream-ordered allocation came from, else nullptr.
    CUmemoryPool pool;
    // Process-wide and never reused, as CU_POINTER_ATTRIBUTE_BUFFER_ID promises: the allocation's, or
    // the physical memory's that is mapped there.
    unsigned long long buffer_id;
};

// Of `ranges`, a map from start addresses to entries whose length `length_of` tells, the one that holds
// `address`; end() when none does.
template <typename Ranges, typename LengthOf>
auto range_holding(Ranges& ranges, std::uint64_t address, LengthOf length_of) -> decltype(ranges.end()) {
    auto after = ranges.upper_bound(address);
    if (after == ranges.begin()) {
        return ranges.end();
    }
    const auto found = std::prev(after);
    return address - found->first < length_of(found->second) ? found : ranges.end();
}

unsigned long long next_buffer_id();

std::optional<PointerRange> device_allocation_containing(CUdeviceptr address);
std::optional<PointerRange> page_locked_memory_containing(CUdeviceptr address);
std::optional<PointerRange> mapping_containing(CUdeviceptr address);

// Address space reserved (cuMemAddressReserve) around `address`, mapped there or not: its start and size.
struct Reservation {
    CUdeviceptr base;
    std::size_t size;
};
std::optional<Reservation> reservation_containing(CUdeviceptr address);

} // namespace gpuleak::sim
