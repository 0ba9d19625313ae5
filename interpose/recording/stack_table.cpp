#include "recording/stack_table.h"

#include <cstring>
#include <sys/mman.h>

namespace gpuleak {

namespace {

uint64_t mix(uint64_t h, uint64_t value) {
    h ^= value + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

uint64_t hash_frames(const uint64_t* frames, uint32_t count, const format::PythonFrameRecord* python,
                     uint32_t python_count) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ count ^ (uint64_t{python_count} << 32);
    for (uint32_t i = 0; i < count; ++i)
        h = mix(h, frames[i]);
    for (uint32_t i = 0; i < python_count; ++i)
        h = mix(h, uint64_t{python[i].code_id} << 32 | python[i].offset_and_flags);
    h ^= h >> 29;
    return h == 0 ? 1 : h;
}

} // namespace

bool StackTable::attach(TraceWriter& writer) {
    writer_ = &writer;
    uint64_t region = writer.header()->stacks.size;
    // A stack of a few frames takes about 64 bytes in the file; twice that many index entries keeps
    // probes short until the region is full.
    entry_count_ = 1024;
    while (entry_count_ < region / 32)
        entry_count_ *= 2;
    private_bytes_ = entry_count_ * sizeof(Entry);
    void* memory =
        ::mmap(nullptr, private_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (memory == MAP_FAILED) {
        entries_ = nullptr;
        return false;
    }
    entries_ = static_cast<Entry*>(memory);
    used_ = 0;
    next_id_ = 1;
    insert_lock_.reset_after_fork();
    return true;
}

void StackTable::detach() {
    if (entries_ != nullptr)
        ::munmap(entries_, private_bytes_);
    entries_ = nullptr;
    writer_ = nullptr;
    insert_lock_.reset_after_fork();
}

bool StackTable::matches(const Entry& entry, const uint64_t* frames, uint32_t count,
                         const format::PythonFrameRecord* python, uint32_t python_count) const {
    const auto* record = reinterpret_cast<const format::StackRecord*>(
        writer_->stream_data(TraceWriter::Stream::Stacks, uint64_t{entry.offset_words} * 8));
    const auto* native = reinterpret_cast<const uint8_t*>(record + 1);
    // memcmp and memcpy must not see the null pointer of an empty stack part, even for 0 bytes.
    return record->native_count == count && record->python_count == python_count &&
           (count == 0 || std::memcmp(native, frames, count * sizeof(uint64_t)) == 0) &&
           (python_count == 0 ||
            std::memcmp(native + count * sizeof(uint64_t), python, python_count * sizeof(*python)) == 0);
}

uint32_t StackTable::intern(const uint64_t* frames, uint32_t count, const format::PythonFrameRecord* python,
                            uint32_t python_count, bool& added) {
    added = false;
    if (entries_ == nullptr)
        return 0;
    const uint64_t hash = hash_frames(frames, count, python, python_count);
    const uint64_t mask = entry_count_ - 1;
    uint64_t position = hash & mask;
    // Lock-free lookup: an entry's id and offset are written before its hash is published.
    for (;; position = (position + 1) & mask) {
        uint64_t seen = __atomic_load_n(&entries_[position].hash, __ATOMIC_ACQUIRE);
        if (seen == 0)
            break;
        if (seen == hash && matches(entries_[position], frames, count, python, python_count))
            return entries_[position].id;
    }
    SpinGuard guard(insert_lock_);
    // Another thread may have added it, or other stacks, since the lock-free probe ended.
    for (;; position = (position + 1) & mask) {
        Entry& entry = entries_[position];
        uint64_t seen = __atomic_load_n(&entry.hash, __ATOMIC_ACQUIRE);
        if (seen == 0)
            break;
        if (seen == hash && matches(entry, frames, count, python, python_count))
            return entry.id;
    }
    format::FileHeader& header = *writer_->header();
    if ((used_ + 1) * 4 > entry_count_ * 3) {
        __atomic_fetch_add(&header.stacks_dropped, 1, __ATOMIC_RELAXED);
        return 0;
    }
    const uint32_t id = next_id_;
    const uint32_t bytes = static_cast<uint32_t>(sizeof(format::StackRecord) + count * sizeof(uint64_t) +
                                                 python_count * sizeof(format::PythonFrameRecord));
    int64_t offset = writer_->append_record(TraceWriter::Stream::Stacks, bytes, [&](uint8_t* body) {
        auto* record = reinterpret_cast<format::StackRecord*>(body - sizeof(format::RecordPrefix));
        record->id = id;
        record->native_count = static_cast<uint16_t>(count);
        record->python_count = static_cast<uint16_t>(python_count);
        auto* native = reinterpret_cast<uint8_t*>(record + 1);
        if (count > 0)
            std::memcpy(native, frames, count * sizeof(uint64_t));
        if (python_count > 0)
            std::memcpy(native + count * sizeof(uint64_t), python, python_count * sizeof(*python));
    });
    if (offset < 0) {
        __atomic_fetch_add(&header.stacks_dropped, 1, __ATOMIC_RELAXED);
        return 0;
    }
    Entry& entry = entries_[position];
    entry.id = id;
    entry.offset_words = static_cast<uint32_t>(static_cast<uint64_t>(offset) / 8);
    __atomic_store_n(&entry.hash, hash, __ATOMIC_RELEASE);
    ++used_;
    ++next_id_;
    added = true;
    return id;
}

} // namespace gpuleak
