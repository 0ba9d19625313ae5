#include "model/live_objects.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace gpuleak::analyzer {

LiveObjects::LiveObjects(size_t expected) : entries_(std::bit_ceil(std::max<size_t>(16, expected * 2))) {}

void LiveObjects::grow() {
    std::vector<Entry> old = std::exchange(entries_, std::vector<Entry>(entries_.size() * 2));
    used_ = 0;
    for (const Entry& entry : old)
        if (entry.used)
            assign(entry.space, entry.address, entry.object());
}

} // namespace gpuleak::analyzer
