#include "recording/python_code_table.h"

#include "recording/thread_owned.h"

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <span>
#include <sys/mman.h>

#include "python/python_runtime.h"

namespace gpuleak {

namespace {

// A code object is usually a few hundred bytes of trace; module-level code can have line tables of
// tens of KiB, which are cut here (the record says so) rather than refused.
constexpr uint32_t kMaxFilenameBytes = 4096;
constexpr uint32_t kMaxQualnameBytes = 1024;
constexpr uint32_t kMaxLineTableBytes = 64 << 10;

// Used only under the insert lock: too large for the stack of a hooked thread.
struct DescriptionBuffers {
    char filename[kMaxFilenameBytes];
    char qualname[kMaxQualnameBytes];
    uint8_t line_table[kMaxLineTableBytes];
};
constinit DescriptionBuffers g_buffers{};

// The code objects a thread met last, by address: a thread allocating from the same Python code again
// and again finds its ids here, in memory of its own, instead of probing the shared index. The dynamic
// TLS model keeps the 3 KiB out of the static TLS block that a dlopen'ed libgpuleak.so would need.
constexpr uint32_t kRecentCodes = 64;

uint64_t hash_address(uint64_t address) {
    uint64_t h = address * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 29);
}

format::PythonFrameRecord record_of(const PythonFrame& frame, uint32_t id) {
    return {id, frame.instruction_offset | (frame.loop_entry ? format::kPythonFrameLoopEntry : 0)};
}

uint64_t align8(uint64_t bytes) {
    return (bytes + 7) & ~uint64_t{7};
}

} // namespace

struct PythonCodeTable::RecentCodes {
    struct Entry {
        uint64_t address; // 0: empty
        PythonCodeIdentity identity;
        uint32_t id;
        uint32_t confirmed; // the stack whose walk last found the code object's identity unchanged
    };
    uint32_t generation; // of the table whose ids the entries hold
    // Counts the thread's stacks. A code object that one stack holds twice (recursion, the wrappers
    // every nn.Module call goes through) is the same object both times: all its frames are alive
    // while the walk runs. Its identity is read once a stack, not once a frame.
    uint32_t stack = 0;
    std::array<Entry, kRecentCodes> entries;
};

bool PythonCodeTable::attach(TraceWriter& writer) {
    writer_ = &writer;
    // A code record takes a few hundred bytes: one index entry per 128 bytes of region keeps probes
    // short until the region is full.
    entry_count_ = 1024;
    while (entry_count_ < writer.header()->code.size / 128)
        entry_count_ *= 2;
    void* memory = ::mmap(nullptr, entry_count_ * sizeof(Entry), PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    entries_ = memory == MAP_FAILED ? nullptr : static_cast<Entry*>(memory);
    used_ = 0;
    next_id_ = 1;
    ++generation_;
    insert_lock_.reset_after_fork();
    return entries_ != nullptr;
}

void PythonCodeTable::detach() {
    if (entries_ != nullptr)
        ::munmap(entries_, entry_count_ * sizeof(Entry));
    entries_ = nullptr;
    writer_ = nullptr;
    insert_lock_.reset_after_fork();
}

void PythonCodeTable::records_of(const PythonFrame* frames, uint32_t count,
                                 format::PythonFrameRecord* records) {
    const PythonRuntime* python = python_runtime();
    if (python == nullptr || entries_ == nullptr) {
        for (uint32_t i = 0; i < count; ++i)
            records[i] = record_of(frames[i], 0);
        return;
    }
    RecentCodes* recent_codes = ThreadOwned<RecentCodes>::get();
    if (recent_codes == nullptr) {
        // The thread is ending: each code object is looked up in the table.
        for (uint32_t i = 0; i < count; ++i) {
            const uint64_t code_object = frames[i].code_object;
            records[i] = record_of(frames[i],
                                   find_or_add(code_object, read_captured_code_identity(*python, code_object),
                                               Owner::this_thread));
        }
        return;
    }
    // 0 is no stack's number: entries of a new table, or made when the counter wrapped, are confirmed
    // by none.
    if (recent_codes->generation != generation_ || ++recent_codes->stack == 0) {
        recent_codes->entries = {};
        recent_codes->generation = generation_;
        recent_codes->stack = 1;
    }
    const uint32_t stack = recent_codes->stack;
    for (uint32_t i = 0; i < count; ++i) {
        const uint64_t code_object = frames[i].code_object;
        RecentCodes::Entry& recent = recent_codes->entries[hash_address(code_object) % kRecentCodes];
        uint32_t id = recent.id;
        if (recent.address != code_object || recent.confirmed != stack) {
            const PythonCodeIdentity identity = read_captured_code_identity(*python, code_object);
            if (recent.address != code_object || !(identity == recent.identity)) {
                id = find_or_add(code_object, identity, Owner::this_thread);
                if (id == 0) {
                    records[i] = record_of(frames[i], 0);
                    continue;
                }
                recent = {code_object, identity, id, 0};
            }
            recent.confirmed = stack;
        }
        records[i] = record_of(frames[i], id);
    }
}

uint32_t PythonCodeTable::probe(uint64_t code_object, const PythonCodeIdentity& identity,
                                uint64_t& position) const {
    const uint64_t mask = entry_count_ - 1;
    // Entries are never changed once published: a code object that replaced another at the same
    // address gets an entry of its own further along the probe.
    for (;; position = (position + 1) & mask) {
        const Entry& entry = entries_[position];
        const uint64_t seen = __atomic_load_n(&entry.address, __ATOMIC_ACQUIRE);
        if (seen == 0)
            return 0;
        if (seen == code_object && entry.identity == identity)
            return entry.id;
    }
}

uint32_t PythonCodeTable::find_or_add(uint64_t code_object, const PythonCodeIdentity& identity, Owner owner) {
    uint64_t position = hash_address(code_object) & (entry_count_ - 1);
    const uint32_t id = probe(code_object, identity, position);
    return id != 0 ? id : add(code_object, identity, position, owner);
}

void PythonCodeTable::records_of_other_thread(const PythonFrame* frames, uint32_t count,
                                              format::PythonFrameRecord* records) {
    for (uint32_t i = 0; i < count; ++i) {
        PythonCodeIdentity identity;
        const bool readable =
            entries_ != nullptr && read_other_threads_code_identity(frames[i].code_object, identity);
        records[i] = record_of(
            frames[i], readable ? find_or_add(frames[i].code_object, identity, Owner::other_thread) : 0);
    }
}

uint32_t PythonCodeTable::add(uint64_t code_object, const PythonCodeIdentity& identity, uint64_t position,
                              Owner owner) {
    SpinGuard guard(insert_lock_);
    // Another thread may have added it, or other code objects, since the lock-free probe ended.
    if (const uint32_t id = probe(code_object, identity, position); id != 0)
        return id;
    format::FileHeader& header = *writer_->header();
    PythonCodeDescription description;
    const PythonCodeBuffers buffers{std::span(g_buffers.filename), std::span(g_buffers.qualname),
                                    std::span(g_buffers.line_table)};
    const bool described = owner == Owner::this_thread
                               ? describe_python_code(code_object, buffers, description)
                               : describe_other_threads_code(code_object, buffers, description);
    if ((used_ + 1) * 4 > entry_count_ * 3 || !described || !(description.identity == identity)) {
        __atomic_fetch_add(&header.code_dropped, 1, __ATOMIC_RELAXED);
        return 0;
    }
    const uint32_t id =
        append_record(code_object, description, g_buffers.filename, g_buffers.qualname, g_buffers.line_table);
    if (id == 0)
        return 0;
    Entry& entry = entries_[position];
    entry.identity = identity;
    entry.id = id;
    __atomic_store_n(&entry.address, code_object, __ATOMIC_RELEASE);
    ++used_;
    return id;
}

uint32_t PythonCodeTable::append_record(uint64_t code_object, const PythonCodeDescription& description,
                                        const char* filename, const char* qualname,
                                        const uint8_t* line_table) {
    format::FileHeader& header = *writer_->header();
    // Before the first record: a reader needs the version to decode any line table.
    if (__atomic_load_n(&header.python_version, __ATOMIC_RELAXED) == 0) {
        if (const PythonRuntime* runtime = python_runtime())
            __atomic_store_n(&header.python_version, runtime->layout.version, __ATOMIC_RELEASE);
    }
    const uint32_t id = next_id_;
    const uint64_t bytes = align8(sizeof(format::CodeRecord) + description.filename_size +
                                  description.qualname_size + description.line_table_size);
    const int64_t offset =
        writer_->append_record(TraceWriter::Stream::Code, static_cast<uint32_t>(bytes), [&](uint8_t* body) {
            auto* record = reinterpret_cast<format::CodeRecord*>(body - sizeof(format::RecordPrefix));
            record->id = id;
            record->first_line = description.identity.first_line;
            record->address = code_object;
            record->filename_bytes = description.filename_size;
            record->qualname_bytes = description.qualname_size;
            record->line_table_bytes = description.line_table_size;
            record->flags = description.truncated ? static_cast<uint32_t>(format::CodeFlag::Truncated) : 0;
            auto* cursor = reinterpret_cast<uint8_t*>(record + 1);
            std::memcpy(cursor, filename, description.filename_size);
            cursor += description.filename_size;
            std::memcpy(cursor, qualname, description.qualname_size);
            cursor += description.qualname_size;
            std::memcpy(cursor, line_table, description.line_table_size);
        });
    if (offset < 0) {
        __atomic_fetch_add(&header.code_dropped, 1, __ATOMIC_RELAXED);
        return 0;
    }
    ++next_id_;
    return id;
}

// Each frame: its DescribedFrame, then its file name, qualified name and line table, padded to 8.
struct DescribedFrame {
    uint64_t code_object;
    uint32_t offset_and_flags;
    PythonCodeDescription description;
};

struct DescribedFrames {
    uint32_t count;
    uint32_t bytes; // of the frames after this header
};

namespace {

uint8_t* described_body(DescribedFrames* described) {
    return reinterpret_cast<uint8_t*>(described + 1);
}

} // namespace

DescribedFrames* describe_frames(const PythonFrame* frames, uint32_t count) {
    if (count == 0 || python_runtime() == nullptr)
        return nullptr;
    auto* buffers = static_cast<DescriptionBuffers*>(std::malloc(sizeof(DescriptionBuffers)));
    auto* described = static_cast<DescribedFrames*>(std::malloc(sizeof(DescribedFrames)));
    uint64_t capacity = 0;
    if (buffers == nullptr || described == nullptr) {
        std::free(buffers);
        std::free(described);
        return nullptr;
    }
    *described = {0, 0};
    for (uint32_t i = 0; i < count; ++i) {
        PythonCodeDescription description;
        const PythonCodeBuffers spans{std::span(buffers->filename), std::span(buffers->qualname),
                                      std::span(buffers->line_table)};
        // A frame that cannot be read stays, without its code (code_object 0), as records_of keeps it
        // with a code id of 0: the frames' places among the native ones depend on each of them.
        uint64_t code_object = frames[i].code_object;
        if (!describe_python_code(code_object, spans, description)) {
            code_object = 0;
            description = {};
        }
        const uint64_t bytes = align8(sizeof(DescribedFrame) + description.filename_size +
                                      description.qualname_size + description.line_table_size);
        if (described->bytes + bytes > capacity) {
            const uint64_t wanted = std::max<uint64_t>(2 * capacity, described->bytes + bytes);
            auto* grown =
                static_cast<DescribedFrames*>(std::realloc(described, sizeof(DescribedFrames) + wanted));
            if (grown == nullptr)
                break;
            described = grown;
            capacity = wanted;
        }
        uint8_t* cursor = described_body(described) + described->bytes;
        const DescribedFrame frame{code_object, record_of(frames[i], 0).offset_and_flags, description};
        std::memcpy(cursor, &frame, sizeof frame);
        cursor += sizeof frame;
        std::memcpy(cursor, buffers->filename, description.filename_size);
        cursor += description.filename_size;
        std::memcpy(cursor, buffers->qualname, description.qualname_size);
        cursor += description.qualname_size;
        std::memcpy(cursor, buffers->line_table, description.line_table_size);
        described->bytes += static_cast<uint32_t>(bytes);
        ++described->count;
    }
    std::free(buffers);
    return described;
}

void release_described_frames(DescribedFrames* described) {
    std::free(described);
}

uint32_t PythonCodeTable::records_of_described(const DescribedFrames& described,
                                               format::PythonFrameRecord* records) {
    const uint8_t* cursor = reinterpret_cast<const uint8_t*>(&described + 1);
    for (uint32_t i = 0; i < described.count; ++i) {
        DescribedFrame frame;
        std::memcpy(&frame, cursor, sizeof frame);
        const PythonCodeDescription& description = frame.description;
        const auto* filename = reinterpret_cast<const char*>(cursor + sizeof frame);
        const char* qualname = filename + description.filename_size;
        const auto* line_table = reinterpret_cast<const uint8_t*>(qualname + description.qualname_size);
        uint32_t id = 0;
        if (writer_ != nullptr && frame.code_object != 0) {
            SpinGuard guard(insert_lock_);
            id = append_record(frame.code_object, description, filename, qualname, line_table);
        }
        records[i] = {id, frame.offset_and_flags};
        cursor += align8(sizeof frame + description.filename_size + description.qualname_size +
                         description.line_table_size);
    }
    return described.count;
}

} // namespace gpuleak
