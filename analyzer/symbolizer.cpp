#include "symbolizer.h"

#include <fmt/format.h>

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

DebugModule& Symbolizer::debug_module(Slot& slot) {
    if (slot.debug == nullptr) {
        slot.debug = std::make_unique<DebugModule>(slot.module, debuginfo_path_);
        if (slot.debug->state() != DebugModule::State::Usable)
            warnings_.push_back(fmt::format("{}: {}; its frames are shown as module+offset", slot.module.path,
                                            slot.debug->problem()));
    }
    return *slot.debug;
}

} // namespace gpuleak::analyzer
