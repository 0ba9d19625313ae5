// Address ranges [low, high), each with a value, looked up by address in logarithmic time however many
// ranges cover the address.
//
// Ranges may nest or overlap (inlined calls nest in their function, a library may have been mapped where
// an unloaded one was): the covering range that starts last wins, which for nested ranges is the
// innermost; of ranges that start at the same address, the one given last wins.
#pragma once

#include <algorithm>
#include <cstdint>
#include <set>
#include <utility>
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

    // Cuts the address space at every range boundary and settles, once, which range wins each piece.
    explicit AddressIndex(std::vector<Entry> entries) {
        struct Boundary {
            uint64_t at;
            bool begins;
            size_t entry;
        };
        std::vector<Boundary> boundaries;
        boundaries.reserve(2 * entries.size());
        for (size_t i = 0; i < entries.size(); ++i) {
            if (entries[i].low < entries[i].high) {
                boundaries.push_back({entries[i].low, true, i});
                boundaries.push_back({entries[i].high, false, i});
            }
        }
        std::sort(boundaries.begin(), boundaries.end(),
                  [](const Boundary& a, const Boundary& b) { return a.at < b.at; });
        std::set<std::pair<uint64_t, size_t>> covering; // (low, entry): the last one wins
        for (size_t i = 0; i < boundaries.size();) {
            const uint64_t at = boundaries[i].at;
            for (; i < boundaries.size() && boundaries[i].at == at; ++i) {
                const size_t entry = boundaries[i].entry;
                if (boundaries[i].begins)
                    covering.emplace(entries[entry].low, entry);
                else
                    covering.erase({entries[entry].low, entry});
            }
            if (covering.empty() || i == boundaries.size())
                continue;
            const size_t winner = covering.rbegin()->second;
            if (!pieces_.empty() && pieces_.back().high == at && pieces_.back().entry == winner)
                pieces_.back().high = boundaries[i].at;
            else
                pieces_.push_back({at, boundaries[i].at, winner});
        }
        values_.reserve(entries.size());
        for (Entry& entry : entries)
            values_.push_back(std::move(entry.value));
    }

    [[nodiscard]] const Value* find(uint64_t address) const {
        auto after = std::upper_bound(pieces_.begin(), pieces_.end(), address,
                                      [](uint64_t a, const Piece& piece) { return a < piece.low; });
        if (after == pieces_.begin() || address >= std::prev(after)->high)
            return nullptr;
        return &values_[std::prev(after)->entry];
    }

  private:
    struct Piece {
        uint64_t low;
        uint64_t high;
        size_t entry;
    };
    std::vector<Piece> pieces_; // disjoint, by address
    std::vector<Value> values_; // by entry
};

} // namespace gpuleak::analyzer
