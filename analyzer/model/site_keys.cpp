#include "model/site_keys.h"

#include <algorithm>
#include <map>
#include <vector>

#include "python/python_stacks.h"

namespace gpuleak::analyzer {

namespace {

// Above every stack id, which is 32 bits: a Python site never takes the key of a native stack.
constexpr uint64_t kFirstPythonSite = uint64_t{1} << 32;

} // namespace

SiteKeys::SiteKeys(const TraceReader& trace) {
    const PythonStacks python(trace);
    std::map<std::vector<PythonLocation>, uint64_t> sites;
    for (const auto& [stack_id, frames] : trace.python_stacks()) {
        const std::vector<PythonLocation>& locations = python.of(stack_id);
        if (!std::all_of(locations.begin(), locations.end(), PythonStacks::known))
            continue;
        python_sites_[stack_id] = sites.try_emplace(locations, kFirstPythonSite + sites.size()).first->second;
    }
}

uint64_t SiteKeys::of(uint32_t stack_id) const {
    auto found = python_sites_.find(stack_id);
    return found == python_sites_.end() ? stack_id : found->second;
}

} // namespace gpuleak::analyzer
