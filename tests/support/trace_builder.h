// Test-only: lays out a trace file by the rules of include/gpuleak/trace_format.h, independently of the
// writer in interpose/, so reader tests can build exactly the valid, torn and corrupt files they need.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "gpuleak/trace_format.h"

namespace gpuleak::test {

struct TraceLayout {
    uint64_t modules_bytes = 4096;
    uint64_t strings_bytes = 4096;
    uint64_t stacks_bytes = 4096;
    uint64_t live_capacity = 16;
    uint64_t ring_capacity = 8;
    uint64_t notable_capacity = 4;
    uint64_t timeline_capacity = 8;
    uint64_t code_bytes = 4096;
    uint64_t spill_capacity = 4;
};

class TraceBuilder {
  public:
    explicit TraceBuilder(const TraceLayout& layout = {}) {
        std::memcpy(header_.magic, format::kMagic, sizeof(header_.magic));
        header_.format_version = format::kFormatVersion;
        header_.endian_tag = format::kEndianTag;
        header_.header_bytes = format::kHeaderBytes;
        // In no job, as the recorder writes a process whose environment names none.
        header_.node_rank = header_.slurm_task = header_.slurm_local_task = header_.slurm_tasks = -1;
        uint64_t end = format::kHeaderBytes;
        const auto place = [&end](format::Region& region, uint64_t bytes) {
            region = {end, bytes};
            end += (bytes + 63) / 64 * 64;
        };
        place(header_.modules, layout.modules_bytes);
        place(header_.strings, layout.strings_bytes);
        place(header_.stacks, layout.stacks_bytes);
        place(header_.live,
              sizeof(format::LiveStripeMarks) + layout.live_capacity * sizeof(format::LiveSlot));
        place(header_.ring, layout.ring_capacity * sizeof(format::EventRecord));
        place(header_.notable, layout.notable_capacity * sizeof(format::EventRecord));
        place(header_.timeline, layout.timeline_capacity * sizeof(format::TimelineSample));
        place(header_.code, layout.code_bytes);
        place(header_.spill, layout.spill_capacity * sizeof(format::SpillSite));
        header_.live_capacity = layout.live_capacity;
        header_.spill_capacity = layout.spill_capacity;
        header_.ring_capacity = layout.ring_capacity;
        header_.notable_capacity = layout.notable_capacity;
        header_.timeline_capacity = layout.timeline_capacity;
        header_.file_bytes = end;
        file_.resize(end);
    }

    // Fields the tests set directly; bytes() writes it into the file.
    format::FileHeader& header() { return header_; }

    void set_command_line(const std::vector<std::string>& arguments) {
        std::string joined;
        for (const std::string& argument : arguments)
            joined.append(argument).push_back('\0');
        std::memcpy(header_.command_line, joined.data(), joined.size());
        header_.command_line_bytes = static_cast<uint32_t>(joined.size());
    }

    void end_exited(int32_t code, uint64_t time_ns) { end(format::EndState::Exited, code, 0, time_ns); }
    void end_signaled(int32_t signal, uint64_t time_ns) {
        end(format::EndState::Signaled, 0, signal, time_ns);
    }

    // The append functions return the record's offset in the file, for tests that damage it.
    uint64_t add_module(const std::string& path, const std::vector<uint8_t>& build_id, uint64_t load_address,
                        uint64_t low, uint64_t high) {
        format::ModuleRecord record{};
        record.load_address = load_address;
        record.low = low;
        record.high = high;
        record.build_id_bytes = static_cast<uint32_t>(build_id.size());
        record.path_bytes = static_cast<uint32_t>(path.size());
        std::copy(build_id.begin(), build_id.end(), record.build_id);
        return append(header_.modules, header_.modules_used, record, path.data(), path.size() + 1);
    }

    uint64_t add_string(uint32_t id, const std::string& text) {
        format::StringRecord record{};
        record.id = id;
        record.bytes = static_cast<uint32_t>(text.size());
        return append(header_.strings, header_.strings_used, record, text.data(), text.size() + 1);
    }

    uint64_t add_stack(uint32_t id, const std::vector<uint64_t>& frames,
                       const std::vector<format::PythonFrameRecord>& python = {}) {
        format::StackRecord record{};
        record.id = id;
        record.native_count = static_cast<uint16_t>(frames.size());
        record.python_count = static_cast<uint16_t>(python.size());
        std::vector<std::byte> tail;
        add_bytes(tail, frames.data(), frames.size() * sizeof(uint64_t));
        add_bytes(tail, python.data(), python.size() * sizeof(format::PythonFrameRecord));
        return append(header_.stacks, header_.stacks_used, record, tail.data(), tail.size());
    }

    // Filename, qualname and line table follow the record back to back, as the writer lays them out.
    uint64_t add_code(uint32_t id, const std::string& filename, const std::string& qualname,
                      int32_t first_line, const std::vector<uint8_t>& line_table, uint32_t flags = 0) {
        format::CodeRecord record{};
        record.id = id;
        record.first_line = first_line;
        record.address = 0x7f0000000000 + id * 0x100;
        record.filename_bytes = static_cast<uint32_t>(filename.size());
        record.qualname_bytes = static_cast<uint32_t>(qualname.size());
        record.line_table_bytes = static_cast<uint32_t>(line_table.size());
        record.flags = flags;
        std::vector<std::byte> tail;
        add_bytes(tail, filename.data(), filename.size());
        add_bytes(tail, qualname.data(), qualname.size());
        add_bytes(tail, line_table.data(), line_table.size());
        return append(header_.code, header_.code_used, record, tail.data(), tail.size());
    }

    // Writes spill record `index` (committed, with its tally in the copy `version` selects) and counts
    // it among the used records.
    void set_spill(uint64_t index, format::SpillSite record) {
        if (record.commit == 0)
            record.commit = format::kRecordCommit;
        put(header_.spill.offset + index * sizeof(record), record);
        header_.spill_used = std::max(header_.spill_used, index + 1);
    }

    // Raises the mark of the slot's stripe to cover it, as the writer does (a slot past the capacity
    // belongs to no stripe).
    void set_live(uint64_t slot, const format::LiveSlot& record) {
        put(header_.live.offset + sizeof(format::LiveStripeMarks) + slot * sizeof(record), record);
        if (slot >= header_.live_capacity)
            return;
        uint32_t stripe = 0;
        while (format::live_stripe_start(header_.live_capacity, stripe + 1) <= slot)
            ++stripe;
        const uint64_t used = slot - format::live_stripe_start(header_.live_capacity, stripe) + 1;
        if (used > live_mark(stripe))
            set_live_mark(stripe, used);
    }

    [[nodiscard]] uint64_t live_mark(uint32_t stripe) const {
        uint64_t used = 0;
        std::memcpy(&used, file_.data() + live_mark_offset(stripe), sizeof(used));
        return used;
    }
    void set_live_mark(uint32_t stripe, uint64_t used) { put(live_mark_offset(stripe), used); }

    // Claims the next sequence number and commits the event into its ring slot; returns the slot's offset.
    uint64_t append_event(format::EventRecord record) {
        const uint64_t sequence = header_.ring_head++;
        record.commit = sequence + 1;
        const uint64_t offset = header_.ring.offset + sequence % header_.ring_capacity * sizeof(record);
        put(offset, record);
        return offset;
    }

    // Claims the next notable index; events beyond the capacity are dropped, as the writer does.
    void add_notable(format::EventRecord record) {
        const uint64_t index = header_.notable_count++;
        if (index >= header_.notable_capacity)
            return;
        record.commit = index + 1;
        put(header_.notable.offset + index * sizeof(record), record);
    }

    void set_timeline(uint64_t slot, const format::TimelineSample& record) {
        put(header_.timeline.offset + slot * sizeof(record), record);
    }

    template <class T> void put(uint64_t offset, const T& value) {
        std::memcpy(file_.data() + offset, &value, sizeof(value));
    }

    [[nodiscard]] std::vector<std::byte> bytes() const {
        std::vector<std::byte> file = file_;
        std::memcpy(file.data(), &header_, sizeof(header_));
        return file;
    }

  private:
    [[nodiscard]] uint64_t live_mark_offset(uint32_t stripe) const {
        return header_.live.offset + offsetof(format::LiveStripeMarks, used) + stripe * sizeof(uint64_t);
    }

    void end(format::EndState state, int32_t code, int32_t signal, uint64_t time_ns) {
        header_.end_state = static_cast<uint32_t>(state);
        header_.exit_code = code;
        header_.end_signal = signal;
        header_.end_monotonic_ns = time_ns;
        header_.end_commit = format::kEndCommit;
    }

    // An empty vector's data() may be null, which memcpy must not see.
    static void add_bytes(std::vector<std::byte>& out, const void* data, std::size_t bytes) {
        if (bytes == 0)
            return;
        const std::size_t at = out.size();
        out.resize(at + bytes);
        std::memcpy(out.data() + at, data, bytes);
    }

    template <class Record>
    uint64_t append(const format::Region& region, uint64_t& used, Record record, const void* tail,
                    std::size_t tail_bytes) {
        const uint64_t bytes = (sizeof(record) + tail_bytes + 7) / 8 * 8;
        record.prefix = {format::kRecordCommit, static_cast<uint32_t>(bytes)};
        const uint64_t offset = region.offset + used;
        put(offset, record);
        if (tail_bytes != 0) // an empty vector's data() may be null, which memcpy must not see
            std::memcpy(file_.data() + offset + sizeof(record), tail, tail_bytes);
        used += bytes;
        return offset;
    }

    format::FileHeader header_{};
    std::vector<std::byte> file_;
};

} // namespace gpuleak::test
