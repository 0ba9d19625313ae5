#include "symbols/symbolizer.h"

#include <algorithm>
#include <fmt/format.h>
#include <numeric>

#include "symbols/debug_module.h"
#include "symbols/symbol_cache.h"

namespace gpuleak::analyzer {

ModuleRegistry::ModuleRegistry(std::string debuginfo_path, std::string cache_directory)
    : debuginfo_path_(std::move(debuginfo_path)), cache_directory_(std::move(cache_directory)) {}

ModuleRegistry::~ModuleRegistry() {
    // The cache only saves time: failing to write it must not end the report.
    try {
        for (const auto& [key, opened] : modules_)
            if (opened->cache != nullptr && opened->cache->has_additions())
                opened->cache->save({debuginfo_path_, opened->debug->file(), opened->debug->frame_sources()});
    } catch (...) {
    }
}

ModuleRegistry::Opened& ModuleRegistry::open(const Module& module) {
    std::unique_ptr<Opened>& opened = modules_[{module.path, module.build_id}];
    if (opened == nullptr) {
        opened = std::make_unique<Opened>();
        opened->module = module;
        opened->debug = std::make_unique<DebugModule>(module, debuginfo_path_);
    }
    return *opened;
}

ModuleFrameCache* ModuleRegistry::frame_cache(Opened& opened) {
    if (opened.cache == nullptr && opened.debug->state() == DebugModule::State::Usable)
        opened.cache = std::make_unique<ModuleFrameCache>(cache_directory_, opened.module.build_id,
                                                          debuginfo_path_, opened.debug->file());
    return opened.cache.get();
}

Symbolizer::Symbolizer(const std::vector<Module>& modules, std::string debuginfo_path,
                       std::string cache_directory)
    : Symbolizer(modules,
                 std::make_shared<ModuleRegistry>(std::move(debuginfo_path), std::move(cache_directory))) {}

Symbolizer::Symbolizer(const std::vector<Module>& modules, std::shared_ptr<ModuleRegistry> registry)
    : registry_(std::move(registry)) {
    std::vector<AddressIndex<size_t>::Entry> ranges;
    for (const Module& module : modules) {
        if (module.low >= module.high)
            continue;
        ranges.push_back({module.low, module.high, slots_.size()});
        slots_.emplace_back().module = module;
    }
    // A range given later wins a tie: the module recorded last is the one loaded there most recently.
    index_ = AddressIndex<size_t>(std::move(ranges));
}

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
    ModuleRegistry::Opened& shared = opened(slot);
    DebugModule& debug = *shared.debug;
    if (!slot.reached && debug.state() != DebugModule::State::Usable)
        warnings_.push_back(
            fmt::format("{}: {}; its frames are shown as module+offset", slot.module.path, debug.problem()));
    slot.reached = true;
    const uint64_t module_offset = return_address - slot.module.load_address;
    if (ModuleFrameCache* cache = registry_->frame_cache(shared)) {
        if (const ModuleFrameCache::Frames* cached_frames = cache->find(module_offset)) {
            frames = *cached_frames;
        } else {
            frames = debug.frames_at(shared.module.load_address + module_offset - 1);
            cache->add(module_offset, frames);
        }
    } else
        frames.emplace_back().stale = debug.state() == DebugModule::State::Stale;
    for (SourceFrame& frame : frames) {
        frame.module = slot.module.path;
        frame.module_offset = module_offset;
    }
    return frames;
}

void Symbolizer::read_ahead(const std::vector<uint64_t>& return_addresses, const std::stop_token& stop) {
    std::vector<size_t> hits(slots_.size());
    std::vector<bool> uncached(slots_.size());
    for (uint64_t address : return_addresses) {
        const size_t* slot_index = index_.find(address);
        if (slot_index == nullptr)
            continue;
        Slot& slot = slots_[*slot_index];
        ++hits[*slot_index];
        if (!uncached[*slot_index]) {
            const ModuleFrameCache* cache = registry_->frame_cache(opened(slot));
            uncached[*slot_index] =
                cache != nullptr && cache->find(address - slot.module.load_address) == nullptr;
        }
    }
    // Most hits first: libc and the program are at the bottom of every stack, so when the caller stops
    // this early, what was read is what its report is most likely to need.
    std::vector<size_t> order(slots_.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return hits[a] > hits[b]; });
    for (size_t slot_index : order) {
        if (hits[slot_index] == 0 || stop.stop_requested())
            return;
        if (uncached[slot_index])
            opened(slots_[slot_index]).debug->read_debug_info();
    }
}

ModuleRegistry::Opened& Symbolizer::opened(Slot& slot) {
    if (slot.opened == nullptr)
        slot.opened = &registry_->open(slot.module);
    return *slot.opened;
}

} // namespace gpuleak::analyzer
