#include "recording/spill_sites.h"

#include <algorithm>
#include <sys/mman.h>

namespace gpuleak {

using format::SpillSite;

namespace {

uint64_t key_hash(uint32_t stack_id, int16_t device, uint8_t kind) {
    uint64_t x = uint64_t{stack_id} | uint64_t{static_cast<uint16_t>(device)} << 32 | uint64_t{kind} << 48;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return x;
}

// Of two bucket times, the earlier one that is set (0: none).
uint64_t earliest(uint64_t a, uint64_t b) {
    return a == 0 ? b : b == 0 ? a : std::min(a, b);
}

} // namespace

bool SpillSites::attach(SpillSite* records, uint64_t capacity, uint64_t* used) {
    if (capacity == 0 || capacity > UINT32_MAX / 4)
        return false;
    index_size_ = 16;
    while (index_size_ < capacity * 2)
        index_size_ *= 2;
    void* memory = ::mmap(nullptr, index_size_ * sizeof(uint32_t), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED)
        return false;
    index_ = static_cast<uint32_t*>(memory);
    records_ = records;
    capacity_ = capacity;
    used_ = used;
    lock_.reset_after_fork();
    SpillSite& unattributed = records_[0];
    unattributed.kind = static_cast<uint8_t>(format::MemoryKind::None);
    unattributed.device = -2;
    __atomic_store_n(&unattributed.commit, format::kRecordCommit, __ATOMIC_RELEASE);
    __atomic_store_n(used_, uint64_t{1}, __ATOMIC_RELEASE);
    return true;
}

void SpillSites::detach() {
    if (index_ != nullptr)
        ::munmap(index_, index_size_ * sizeof(uint32_t));
    index_ = nullptr;
    records_ = nullptr;
    capacity_ = 0;
    used_ = nullptr;
    lock_.reset_after_fork();
}

uint32_t SpillSites::find_or_add(const Key& key) {
    const uint64_t mask = index_size_ - 1;
    for (uint64_t position = key_hash(key.stack_id, key.device, key.kind) & mask;;
         position = (position + 1) & mask) {
        const uint32_t id = index_[position];
        if (id == 0) {
            const uint64_t next = *used_;
            if (next >= capacity_)
                return 0;
            SpillSite& site = records_[next];
            site.stack_id = key.stack_id;
            site.device = key.device;
            site.kind = key.kind;
            __atomic_store_n(&site.commit, format::kRecordCommit, __ATOMIC_RELEASE);
            __atomic_store_n(used_, next + 1, __ATOMIC_RELEASE);
            index_[position] = static_cast<uint32_t>(next);
            return static_cast<uint32_t>(next);
        }
        const SpillSite& site = records_[id];
        if (Key{site.stack_id, site.device, site.kind} == key)
            return id;
    }
}

// Under the lock: the writer of the tally is the lock's holder.
void SpillSites::change(SpillSite& site, uint64_t count, uint64_t bytes, bool add) {
    const uint32_t version = site.version;
    const format::SpillTally now = site.tally[version % 2];
    format::SpillTally& next = site.tally[(version + 1) % 2];
    next.count = add ? now.count + count : now.count - count;
    next.bytes = add ? now.bytes + bytes : now.bytes - bytes;
    __atomic_store_n(&site.version, version + 1, __ATOMIC_RELEASE);
}

uint32_t SpillSites::add(const format::LiveSlot& allocation) {
    if (records_ == nullptr)
        return 0;
    SpinGuard guard(lock_);
    const uint32_t id = find_or_add({allocation.stack_id, allocation.device, allocation.kind});
    SpillSite& site = records_[id];
    change(site, 1, allocation.size, true);
    // Threads number their allocations under their stripes' locks and get here in any order: the
    // buckets grow to the largest number seen.
    while (allocation.sequence >> site.bucket_shift >= format::kSpillBuckets && site.bucket_shift < 63) {
        for (size_t i = 0; i < format::kSpillBuckets / 2; ++i) {
            const format::SpillBucket& low = site.buckets[2 * i];
            const format::SpillBucket& high = site.buckets[2 * i + 1];
            site.buckets[i] = {low.count + high.count, earliest(low.first_time_ns, high.first_time_ns),
                               std::max(low.last_time_ns, high.last_time_ns)};
        }
        for (size_t i = format::kSpillBuckets / 2; i < format::kSpillBuckets; ++i)
            site.buckets[i] = {};
        ++site.bucket_shift;
    }
    format::SpillBucket& bucket = site.buckets[allocation.sequence >> site.bucket_shift];
    ++bucket.count;
    bucket.first_time_ns = earliest(bucket.first_time_ns, allocation.time_ns);
    bucket.last_time_ns = std::max(bucket.last_time_ns, allocation.time_ns);
    return id;
}

void SpillSites::remove(uint32_t record, const format::LiveSlot& allocation) {
    if (records_ == nullptr || record >= capacity_)
        return;
    SpinGuard guard(lock_);
    SpillSite& site = records_[record];
    change(site, 1, allocation.size, false);
    const uint64_t index = allocation.sequence >> site.bucket_shift;
    if (index < format::kSpillBuckets && site.buckets[index].count > 0)
        --site.buckets[index].count;
}

} // namespace gpuleak
