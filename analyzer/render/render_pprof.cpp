#include "render/render_pprof.h"

#include <algorithm>
#include <array>
#include <limits>
#include <map>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <zlib.h>

#include "render/profile.pb.h"
#include "report/stack_view.h"

namespace gpuleak::analyzer {

namespace {

namespace pb = perftools::profiles;

// Go's heap profiles' sample types, which pprof offers by name (-sample_index=alloc_space); inuse_space
// is the default.
enum Value { kAllocObjects, kAllocSpace, kInuseObjects, kInuseSpace, kValues };

struct SampleKey {
    uint32_t stack_id = 0;
    format::MemoryKind kind = format::MemoryKind::None;
    int device = 0;
    auto operator<=>(const SampleKey&) const = default;
};

using Values = std::array<int64_t, kValues>;

int64_t int64_of(uint64_t value) {
    return static_cast<int64_t>(std::min<uint64_t>(value, std::numeric_limits<int64_t>::max()));
}

class ProfileBuilder {
  public:
    explicit ProfileBuilder(const ReportOptions& options) : options_(options) {
        string("");
        for (const char* type : {"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"}) {
            pb::ValueType* value_type = profile_.add_sample_type();
            value_type->set_type(string(type));
            value_type->set_unit(string(std::string_view(type).ends_with("objects") ? "count" : "bytes"));
        }
        profile_.set_default_sample_type(string("inuse_space"));
    }

    void add_process(ProcessReport& report) {
        const ProcessModel& model = report.model;
        if (profile_.time_nanos() == 0 || int64_of(model.header.start_realtime_ns) < profile_.time_nanos())
            profile_.set_time_nanos(int64_of(model.header.start_realtime_ns));
        profile_.set_duration_nanos(std::max(profile_.duration_nanos(), int64_of(model.duration_ns)));
        // pprof names the profile by its first mapping's file, the main program's: the first process's.
        if (profile_.mapping_size() == 0 && !model.header.command_line.empty()) {
            pb::Mapping* program = profile_.add_mapping();
            program->set_id(1);
            program->set_filename(string(model.header.command_line.front()));
            program->set_has_functions(true);
            program->set_has_filenames(true);
            program->set_has_line_numbers(true);
        }
        comment(fmt::format("pid {}: {}{}", model.header.pid, fmt::join(model.header.command_line, " "),
                            model.header.simulated_device() ? " (simulated CUDA device: no real GPU was used)"
                                                            : ""));

        // In use: each live allocation with a slot of its own on its stack and device; the rest of a site,
        // its allocations counted by site only, at its shown stack on the device most of its bytes are on.
        std::map<SampleKey, Values> samples;
        std::map<std::pair<uint64_t, format::MemoryKind>, std::pair<uint64_t, uint64_t>>
            slotted; // bytes, count
        for (const LiveAllocation& live : model.live_allocations) {
            if (!program_holds(model, live.kind))
                continue;
            Values& values = samples[{live.stack_id, live.kind, live.device}];
            ++values[kInuseObjects];
            values[kInuseSpace] += int64_of(live.size);
            auto& [bytes, count] = slotted[{site_of(model, live.stack_id), live.kind}];
            bytes += live.size;
            ++count;
        }
        for (const LeakSite& site : model.leak_sites) {
            if (site.segments)
                continue;
            const auto [bytes, count] = slotted[{site_of(model, site.stack_id), site.kind}];
            if (site.bytes <= bytes && site.count <= count)
                continue;
            Values& values = samples[{site.stack_id, site.kind, site.device}];
            values[kInuseObjects] += int64_of(site.count > count ? site.count - count : 0);
            values[kInuseSpace] += int64_of(site.bytes > bytes ? site.bytes - bytes : 0);
        }
        for (const Event& event : model.ring_events) {
            if (event.type != format::EventType::Alloc || !program_holds(model, event.kind))
                continue;
            Values& values = samples[{event.stack_id, event.kind, event.device}];
            ++values[kAllocObjects];
            values[kAllocSpace] += int64_of(event.size);
        }
        for (const auto& [key, values] : samples)
            add_sample(stack_locations(*report.stacks, key.stack_id), values, model.header.pid, key.device,
                       format::kind_name(key.kind));

        if (model.reports_blocks) {
            for (const DeviceSummary& device : model.devices) {
                if (device.cached() == 0)
                    continue;
                Values values{};
                values[kInuseSpace] = int64_of(device.cached());
                add_sample({location_named("[cached by the caching allocator: reserved, not allocated]")},
                           values, model.header.pid, device.device, "cached");
            }
        }
        if (model.events_overwritten > 0)
            comment(fmt::format("pid {}: alloc_space and alloc_objects count the last {} of {} events (the "
                                "ring wrapped); inuse_space and inuse_objects are exact",
                                model.header.pid, model.events - model.events_overwritten, model.events));
    }

    pb::Profile& profile() { return profile_; }

  private:
    int64_t string(std::string_view text) {
        const auto [found, added] = strings_.try_emplace(std::string(text), profile_.string_table_size());
        if (added)
            profile_.add_string_table(std::string(text));
        return found->second;
    }

    void comment(std::string_view text) { profile_.add_comment(string(text)); }

    std::vector<uint64_t> stack_locations(StackFrames& stacks, uint32_t stack_id) {
        std::vector<uint64_t> locations;
        if (stack_id == 0)
            return {location_named("[no stack recorded]")};
        for (const ReportFrame* frame : profile_frames(stacks.frames(stack_id), options_))
            locations.push_back(location_of(*frame));
        return locations;
    }

    uint64_t location_of(const ReportFrame& frame) {
        const ProfileName named = profile_name(frame, options_);
        return location(named.function, named.file, frame.line);
    }

    uint64_t location_named(std::string_view name) { return location(std::string(name), "", 0); }

    uint64_t location(const std::string& name, const std::string& file, uint32_t line) {
        const auto [found, added] = locations_.try_emplace({name, file, line}, profile_.location_size() + 1);
        if (!added)
            return found->second;
        pb::Location* location = profile_.add_location();
        location->set_id(found->second);
        pb::Line* at = location->add_line();
        at->set_function_id(function(name, file));
        at->set_line(line);
        return found->second;
    }

    uint64_t function(const std::string& name, const std::string& file) {
        const auto [found, added] = functions_.try_emplace({name, file}, profile_.function_size() + 1);
        if (added) {
            pb::Function* function = profile_.add_function();
            function->set_id(found->second);
            function->set_name(string(name));
            function->set_system_name(string(name));
            function->set_filename(string(file));
        }
        return found->second;
    }

    void add_sample(const std::vector<uint64_t>& locations, const Values& values, int32_t pid, int device,
                    std::string_view kind) {
        pb::Sample* sample = profile_.add_sample();
        for (const uint64_t location : locations)
            sample->add_location_id(location);
        for (const int64_t value : values)
            sample->add_value(value);
        pb::Label* pid_label = sample->add_label();
        pid_label->set_key(string("pid"));
        pid_label->set_num(pid);
        // Host memory (pinned, registered) is on no device. A string: pprof drops a numeric label of 0.
        if (device >= 0) {
            pb::Label* device_label = sample->add_label();
            device_label->set_key(string("device"));
            device_label->set_str(string(fmt::format("cuda:{}", device)));
        }
        pb::Label* kind_label = sample->add_label();
        kind_label->set_key(string("kind"));
        kind_label->set_str(string(kind));
    }

    const ReportOptions& options_;
    pb::Profile profile_;
    std::unordered_map<std::string, int64_t> strings_;
    std::map<std::tuple<std::string, std::string, uint32_t>, uint64_t> locations_;
    std::map<std::pair<std::string, std::string>, uint64_t> functions_;
};

// The gzip format pprof expects on disk (a zlib stream would not do).
std::string gzipped(const std::string& bytes) {
    z_stream stream{};
    constexpr int kGzipWindow = 15 + 16; // the largest window, with a gzip header and trailer
    if (deflateInit2(&stream, Z_BEST_COMPRESSION, Z_DEFLATED, kGzipWindow, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        throw std::runtime_error("zlib could not start compressing");
    std::string out(deflateBound(&stream, bytes.size()), '\0');
    // zlib's interface is not const-correct: it only reads next_in.
    stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    stream.avail_in = static_cast<uInt>(bytes.size());
    stream.next_out = reinterpret_cast<Bytef*>(out.data());
    stream.avail_out = static_cast<uInt>(out.size());
    const int result = deflate(&stream, Z_FINISH);
    out.resize(stream.total_out);
    deflateEnd(&stream);
    if (result != Z_STREAM_END)
        throw std::runtime_error("zlib could not compress the profile");
    return out;
}

} // namespace

std::string render_pprof(ReportSet& reports, const ReportOptions& options,
                         std::vector<std::string>& warnings) {
    ProfileBuilder builder(options);
    for (size_t i = 0; i < reports.size(); ++i) {
        ProcessReport& report = reports.whole(i);
        builder.add_process(report);
        if (const SpilledCount unattributed = report.model.exactness.unattributed(); unattributed.count > 0)
            warnings.push_back(
                fmt::format("{}: warning: {} allocations ({} bytes) live at the end have no site in the "
                            "trace: the profile leaves them out",
                            report.model.path, unattributed.count, unattributed.bytes));
    }
    std::string bytes;
    builder.profile().SerializeToString(&bytes);
    return gzipped(bytes);
}

} // namespace gpuleak::analyzer
