#include "render/byte_sizes.h"

#include <cmath>

#include <fmt/format.h>

namespace gpuleak::analyzer {

std::string human_bytes(double bytes) {
    const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int unit = 0;
    while (std::fabs(bytes) >= 1024.0 && unit < 4) {
        bytes /= 1024.0;
        ++unit;
    }
    return unit == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.1f} {}", bytes, units[unit]);
}

std::string human_bytes(uint64_t bytes) {
    return human_bytes(static_cast<double>(bytes));
}

} // namespace gpuleak::analyzer
