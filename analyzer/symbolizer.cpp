#include "symbolizer.h"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>

#include "debug_module.h"

namespace gpuleak::analyzer {

Symbolizer::Symbolizer(const std::vector<Module>& modules, std::string debuginfo_path)
    : debuginfo_path_(std::move(debuginfo_path)) {
    std::vector<AddressIndex<size_t>::Entry> ranges;
    for (const Module& module : modules) {
        if (module.low >= module.high)
            continue;
        ranges.push_back({module.low, module.high, slots_.size()});
        slots_.push_back({module, nullptr});
    }
    // A range given later wins a tie: the module recorded last is the one loaded there most recently.
    index_ = AddressIndex<size_t>(std::move(ranges));
}

Symbolizer::~Symbolizer() = default;

const std::vector<SourceFrame>& Symbolizer::symbolize(uint64_t return_address) {
    auto [cached, added] = frames_.try_emplace(return_address);
    std::vector<SourceFrame>& frames = cached->second;
    if (!added)
        return frames;

    const size_t* slot_index = index_.find(return_address);
    if (slot_index == nullptr) {
        frames.emplace_back().module_offset = return_address;
        return frames;
    }
    Slot& slot = slots_[*slot_index];
    DebugModule& debug = debug_module(slot);
    if (!slot.reached && debug.state() != DebugModule::State::Usable)
        warnings_.push_back(
            fmt::format("{}: {}; its frames are shown as module+offset", slot.module.path, debug.problem()));
    slot.reached = true;
    if (debug.state() == DebugModule::State::Usable)
        frames = debug.frames_at(return_address - 1);
    else
        frames.emplace_back().stale = debug.state() == DebugModule::State::Stale;
    for (SourceFrame& frame : frames) {
        frame.module = slot.module.path;
        frame.module_offset = return_address - slot.module.load_address;
    }
    return frames;
}

void Symbolizer::read_ahead(const std::vector<uint64_t>& return_addresses, const std::stop_token& stop) {
    std::vector<size_t> hits(slots_.size());
    for (uint64_t address : return_addresses) {
        if (const size_t* slot_index = index_.find(address))
            ++hits[*slot_index];
    }
    // Most hits first: libc and the program are at the bottom of every stack, so when the caller stops
    // this early, what was read is what its report is most likely to need.
    std::vector<size_t> order(slots_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return hits[a] > hits[b]; });
    for (size_t slot_index : order) {
        if (hits[slot_index] == 0 || stop.stop_requested())
            return;
        DebugModule& debug = debug_module(slots_[slot_index]);
        if (debug.state() == DebugModule::State::Usable)
            debug.read_debug_info();
    }
}

DebugModule& Symbolizer::debug_module(Slot& slot) {
    if (slot.debug == nullptr)
        slot.debug = std::make_unique<DebugModule>(slot.module, debuginfo_path_);
    return *slot.debug;
}

} // namespace gpuleak::analyzer
