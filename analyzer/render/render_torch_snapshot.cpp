#include "render/render_torch_snapshot.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>

#include <fmt/format.h>

#include "render/pickle_writer.h"
#include "report/stack_view.h"

namespace gpuleak::analyzer {

using format::EventType;
using format::MemoryKind;

namespace {

// The small pool's segments are 2 MiB and no large pool segment is that small (CUDACachingAllocator's
// kSmallBuffer, kMinLargeAlloc): the only way left to tell the pools apart.
constexpr uint64_t kSmallSegmentBytes = uint64_t{2} << 20;

// A reserved range the allocator hands blocks out of: a cudaMalloc'd allocation, or consecutive VMM
// mappings of one device (an expandable segment grows by mapping more after its end).
struct Segment {
    int device = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    uint64_t stream = 0;
    uint32_t stack_id = 0;
    bool expandable = false;
    [[nodiscard]] uint64_t end() const { return address + size; }
};

struct Block {
    uint64_t address = 0;
    uint64_t size = 0;
    uint32_t stack_id = 0;
    bool active = true; // false: a gap between blocks, free in the allocator's cache
};

// The viewer reads ints of at most 8 signed bytes; no device address or size comes near 2^63, and one
// that did could only be corrupt.
int64_t int64_of(uint64_t value) {
    return static_cast<int64_t>(std::min<uint64_t>(value, std::numeric_limits<int64_t>::max()));
}

class SnapshotWriter {
  public:
    SnapshotWriter(ProcessReport& report, const ReportOptions& options)
        : model_(report.model), stacks_(*report.stacks), options_(options),
          // Without a sub-allocator's blocks a cudaMalloc'd allocation is itself what the program
          // holds, as the report counts it: one block that fills its segment.
          segments_are_blocks_(!report.model.reports_blocks) {}

    std::string write(std::vector<std::string>& warnings) {
        const std::vector<Segment> segments = live_segments();
        const std::vector<Block> blocks = live_blocks(segments);
        std::map<int, std::vector<const Event*>> by_device = device_events();
        int devices = by_device.empty() ? 0 : by_device.rbegin()->first + 1;
        for (const Segment& segment : segments)
            devices = std::max(devices, segment.device + 1);

        out_.begin_dict();
        out_.memo_text("segments");
        out_.begin_list();
        auto block = blocks.begin();
        for (const Segment& segment : segments)
            write_segment(segment, blocks, block);
        for (; block != blocks.end(); ++block)
            note_misplaced(*block);
        out_.end_list();
        // Indexed by device ordinal: the viewer looks a device's trace up by the segments' device.
        out_.memo_text("device_traces");
        out_.begin_list();
        for (int device = 0; device < devices; ++device) {
            out_.begin_list();
            for (const Event* event : by_device[device])
                write_event(*event);
            out_.end_list();
        }
        out_.end_list();
        out_.end_dict();

        if (misplaced_ != 0)
            warnings.push_back(fmt::format("{} blocks ({} bytes) lie in no segment of the trace or overlap "
                                           "another block: the snapshot leaves them out",
                                           misplaced_, misplaced_bytes_));
        if (const SpilledCount spilled = model_.exactness.spilled(); spilled.count > 0)
            warnings.push_back(
                fmt::format("{} allocations ({} bytes) live at the end had no slot of their own "
                            "in the trace's live table: the snapshot leaves them out",
                            spilled.count, spilled.bytes));
        return out_.finish();
    }

  private:
    std::vector<Segment> live_segments() {
        std::vector<Segment> segments;
        std::vector<Segment> mappings;
        for (const LiveAllocation& live : model_.live_allocations) {
            if (live.device < 0)
                continue;
            const Segment segment{live.device,        live.address,  live.size,
                                  live.call_stream(), live.stack_id, live.kind == MemoryKind::VmmMapping};
            if (live.kind == MemoryKind::Device)
                segments.push_back(segment);
            else if (live.kind == MemoryKind::VmmMapping)
                mappings.push_back(segment);
        }
        std::sort(mappings.begin(), mappings.end(),
                  [](const Segment& a, const Segment& b) { return a.address < b.address; });
        for (const Segment& mapping : mappings) {
            Segment* last = segments.empty() ? nullptr : &segments.back();
            if (last != nullptr && last->expandable && last->device == mapping.device &&
                last->end() == mapping.address)
                last->size += mapping.size;
            else
                segments.push_back(mapping);
        }
        // By address, the order PyTorch's own snapshot has; live slots are in no useful order.
        std::sort(segments.begin(), segments.end(),
                  [](const Segment& a, const Segment& b) { return a.address < b.address; });
        return segments;
    }

    std::vector<Block> live_blocks(const std::vector<Segment>& segments) const {
        std::vector<Block> blocks;
        if (segments_are_blocks_) {
            for (const Segment& segment : segments)
                if (!segment.expandable)
                    blocks.push_back({segment.address, segment.size, segment.stack_id, true});
            return blocks;
        }
        for (const LiveAllocation& live : model_.live_allocations)
            if (live.kind == MemoryKind::Block)
                blocks.push_back({live.address, live.size, live.stack_id, true});
        std::sort(blocks.begin(), blocks.end(),
                  [](const Block& a, const Block& b) { return a.address < b.address; });
        return blocks;
    }

    // The ring's events the snapshot's actions stand for, oldest first, by device.
    std::map<int, std::vector<const Event*>> device_events() const {
        std::map<int, std::vector<const Event*>> by_device;
        for (const Event& event : model_.ring_events) {
            const bool alloc_or_free = event.type == EventType::Alloc || event.type == EventType::Free;
            const bool segment = event.kind == MemoryKind::Device || event.kind == MemoryKind::VmmMapping;
            if (event.device < 0)
                continue;
            // A refusal that gave up after failed cudaMallocs has their "oom" entries already.
            const bool refused_alone = event.refused_by_allocator() && event.failures_given_up_after() == 0;
            if ((alloc_or_free && (segment || event.kind == MemoryKind::Block)) ||
                (event.type == EventType::AllocFailed && event.kind == MemoryKind::Device) || refused_alone)
                by_device[event.device].push_back(&event);
        }
        return by_device;
    }

    // The segment's blocks from `next` on, by address, with the gaps between them as inactive blocks:
    // the viewer places each block after the one before, so they must fill the segment exactly.
    void write_segment(const Segment& segment, const std::vector<Block>& blocks,
                       std::vector<Block>::const_iterator& next) {
        std::vector<Block> filled;
        uint64_t at = segment.address;
        uint64_t allocated = 0;
        for (; next != blocks.end() && next->address < segment.end(); ++next) {
            if (next->address < at || next->size > segment.end() - next->address) {
                // Before this segment (in none), overlapping the block before, or past the segment's end.
                note_misplaced(*next);
                continue;
            }
            if (next->address > at)
                filled.push_back({at, next->address - at, 0, false});
            filled.push_back(*next);
            allocated += next->size;
            at = next->address + next->size;
        }
        if (at < segment.end())
            filled.push_back({at, segment.end() - at, 0, false});

        out_.begin_dict();
        key("device");
        out_.integer(segment.device);
        key("address");
        out_.integer(int64_of(segment.address));
        key("total_size");
        out_.integer(int64_of(segment.size));
        // Requested sizes are not in the trace: a block's is its size, so nothing counts as rounding.
        for (const char* name : {"allocated_size", "active_size", "requested_size"}) {
            key(name);
            out_.integer(int64_of(allocated));
        }
        key("stream");
        out_.integer(int64_of(segment.stream));
        key("segment_type");
        out_.memo_text(segment.size <= kSmallSegmentBytes ? "small" : "large");
        key("is_expandable");
        out_.boolean(segment.expandable);
        key("frames");
        write_frames(segment.stack_id);
        key("blocks");
        out_.begin_list();
        for (const Block& block : filled) {
            out_.begin_dict();
            key("address");
            out_.integer(int64_of(block.address));
            key("size");
            out_.integer(int64_of(block.size));
            key("requested_size");
            out_.integer(int64_of(block.active ? block.size : 0));
            key("state");
            out_.memo_text(block.active ? "active_allocated" : "inactive");
            key("frames");
            if (block.active)
                write_frames(block.stack_id);
            else
                write_no_frames();
            out_.end_dict();
        }
        out_.end_list();
        out_.end_dict();
    }

    void write_event(const Event& event) {
        if (event.type == EventType::AllocFailed) {
            // A cudaMalloc that failed: PyTorch frees its cache and tries again before it gives up,
            // so this is where the snapshot's "oom" entries would be, perhaps more than once. Or the
            // allocator refused under its own cap (set_per_process_memory_fraction), and nothing failed.
            entry("oom", event, event.size, false);
            return;
        }
        const bool alloc = event.type == EventType::Alloc;
        switch (event.kind) {
        case MemoryKind::Block:
            block_actions(alloc, event);
            break;
        case MemoryKind::VmmMapping:
            entry(alloc ? "segment_map" : "segment_unmap", event, event.address, true);
            break;
        default: // Device
            if (alloc)
                entry("segment_alloc", event, event.address, true);
            if (segments_are_blocks_)
                block_actions(alloc, event);
            if (!alloc)
                entry("segment_free", event, event.address, true);
            break;
        }
    }

    // A free is PyTorch's pair of entries, requested and completed, which the viewer shows as one.
    void block_actions(bool alloc, const Event& event) {
        if (alloc) {
            entry("alloc", event, event.address, true);
            return;
        }
        entry("free_requested", event, event.address, true);
        entry("free_completed", event, event.address, true);
    }

    // One trace entry; an "oom" has no address but the device's free bytes, given as `value`.
    void entry(const char* action, const Event& event, uint64_t value, bool has_address) {
        out_.begin_dict();
        key("action");
        out_.memo_text(action);
        if (has_address) {
            key("addr");
        } else {
            // 0 where the driver was not asked: _memory_viz reads the field unconditionally.
            key("device_free");
            value = event.free_bytes_then().value_or(0);
        }
        out_.integer(int64_of(value));
        key("size");
        out_.integer(int64_of(event.size));
        key("stream");
        out_.integer(int64_of(event.call_stream()));
        key("time_us");
        const TraceHeader& header = model_.header;
        out_.integer(int64_of((header.start_realtime_ns + since_start(event.time_ns, header)) / 1000));
        key("frames");
        write_frames(event.stack_id);
        out_.end_dict();
    }

    void key(const char* name) { out_.memo_text(name); }

    // PyTorch's frames, innermost first: the frames the other reports show. A stack's list is written
    // once and referred to after, as stacks repeat from event to event.
    void write_frames(uint32_t stack_id) {
        auto written = frame_lists_.find(stack_id);
        if (written != frame_lists_.end()) {
            out_.again(written->second);
            return;
        }
        out_.begin_list();
        for (const ReportFrame* frame : shown_frames(stacks_.frames(stack_id), options_)) {
            out_.begin_dict();
            key("filename");
            if (frame->python)
                out_.memo_text(frame->source_name.empty() ? frame->file : frame->source_name);
            else
                out_.memo_text(frame->file.empty() ? frame->module : frame->file);
            key("line");
            out_.integer(frame->line);
            key("name");
            if (!frame->function.empty())
                out_.memo_text(frame->function);
            else
                out_.memo_text(frame->python ? std::string("?")
                                             : fmt::format("{}+{:#x}", frame->module, frame->module_offset));
            out_.end_dict();
        }
        out_.end_list();
        frame_lists_.emplace(stack_id, out_.memoize());
    }

    void write_no_frames() {
        if (!no_frames_) {
            out_.begin_list();
            out_.end_list();
            no_frames_ = out_.memoize();
            return;
        }
        out_.again(*no_frames_);
    }

    void note_misplaced(const Block& block) {
        ++misplaced_;
        misplaced_bytes_ += block.size;
    }

    const ProcessModel& model_;
    StackFrames& stacks_;
    const ReportOptions& options_;
    bool segments_are_blocks_;
    PickleWriter out_;
    std::map<uint32_t, uint32_t> frame_lists_; // stack id: memo index of its frames
    std::optional<uint32_t> no_frames_;
    uint64_t misplaced_ = 0;
    uint64_t misplaced_bytes_ = 0;
};

} // namespace

std::string render_torch_snapshot(ProcessReport& report, const ReportOptions& options,
                                  std::vector<std::string>& warnings) {
    return SnapshotWriter(report, options).write(warnings);
}

} // namespace gpuleak::analyzer
