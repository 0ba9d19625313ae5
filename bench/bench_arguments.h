// Argument parsing shared by the benchmark programs.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>

// A whole non-negative decimal number of at least `minimum`.
inline bool parse_count(const char* text, uint64_t minimum, uint64_t& out) {
    char* end = nullptr;
    errno = 0;
    unsigned long long value = std::strtoull(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || text[0] == '-' || value < minimum)
        return false;
    out = value;
    return true;
}
