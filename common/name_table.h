// The names of an enumeration's values as a table instead of a switch. Each row names its enumerator, and
// the rows must follow the enumerators' values from 0: a row missing or out of place below the last one
// stops the build. A switch's -Wswitch also caught an enumerator added after the last row; nothing here
// does, so whoever adds one adds its row.
#pragma once

#include <array>
#include <cstddef>
#include <utility>

namespace gpuleak {

template <class Enum, std::size_t N> class NameTable {
  public:
    // `otherwise`: the row whose name a value past the last row gets (a number cast to the enumeration).
    consteval NameTable(const std::pair<Enum, const char*> (&rows)[N], Enum otherwise)
        : otherwise_(static_cast<std::size_t>(otherwise)) {
        for (std::size_t i = 0; i < N; ++i) {
            if (static_cast<std::size_t>(rows[i].first) != i)
                throw "a NameTable's rows follow the enumerators' values from 0";
            names_[i] = rows[i].second;
        }
        if (otherwise_ >= N)
            throw "a NameTable's fallback is one of its rows";
    }

    constexpr const char* operator[](Enum value) const {
        const auto index = static_cast<std::size_t>(value);
        return names_[index < N ? index : otherwise_];
    }

  private:
    std::array<const char*, N> names_{};
    std::size_t otherwise_;
};

} // namespace gpuleak
