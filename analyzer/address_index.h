// Address ranges [low, high), each with a value, looked up by address in logarithmic time.
//
// Ranges may nest or overlap (a function nested in another, a library mapped where an unloaded one was):
// the covering range that starts last wins, which for nested ranges is the innermost; of ranges that
// start at the same address, the one given last wins.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

namespace gpuleak::analyzer {

template <typename Value> class AddressIndex {
  public:
    struct Entry {
        uint64_t low = 0;
        uint64_t high = 0;
        Value value{};
    };

    AddressIndex() = default;
    explicit AddressIndex(std::vector<Entry> entries) : entries_(std::move(entries)) {
        std::stable_sort(entries_.begin(), entries_.end(),
                         [](const Entry& a, const Entry& b) { return a.low < b.low; });
        reach_.reserve(entries_.size());
        uint64_t reach = 0;
        for (const Entry& entry : entries_) {
            reach = std::max(reach, entry.high);
            reach_.push_back(reach);
        }
    }

    [[nodiscard]] const Value* find(uint64_t address) const {
        auto after = std::upper_bound(entries_.begin(), entries_.end(), address,
                                      [](uint64_t a, const Entry& entry) { return a < entry.low; });
        // Walking back from the last range that starts at or before the address; once no earlier range
        // reaches past it, none can cover it, so a miss costs no more than the overlap there.
        for (auto i = static_cast<size_t>(after - entries_.begin()); i-- > 0 && reach_[i] > address;) {
            if (address < entries_[i].high)
                return &entries_[i].value;
        }
        return nullptr;
    }

  private:
    std::vector<Entry> entries_;  // by low
    std::vector<uint64_t> reach_; // reach_[i]: the highest end among entries_[0..i]
};

} // namespace gpuleak::analyzer
