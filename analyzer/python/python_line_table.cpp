#include "python/python_line_table.h"

#include <limits>

#include "gpuleak/trace_format.h"

namespace gpuleak::analyzer {

namespace {

std::optional<int32_t> as_line(int64_t line) {
    if (line < std::numeric_limits<int32_t>::min() || line > std::numeric_limits<int32_t>::max())
        return std::nullopt;
    return static_cast<int32_t>(line);
}

// 3.10 (Objects/lnotab_notes.txt): pairs of an unsigned bytecode delta in bytes and a signed line
// delta; a line delta of -128 gives the range no line and leaves the running line as it was. Ranges of
// zero length only move the line.
std::optional<int32_t> line_3_10(std::span<const uint8_t> table, int32_t first_line, uint32_t offset) {
    int64_t line = first_line;
    uint64_t start = 0;
    for (size_t at = 0; at + 1 < table.size(); at += 2) {
        const uint64_t end = start + table[at];
        const auto delta = static_cast<int8_t>(table[at + 1]);
        const bool has_line = delta != -128;
        if (has_line)
            line += delta;
        if (offset < end)
            return has_line ? as_line(line) : std::nullopt;
        start = end;
    }
    return std::nullopt;
}

// Objects/locations.md: a varint is 6-bit groups, least significant first, bit 6 set on all but the last.
uint64_t read_varint(std::span<const uint8_t> table, size_t& at) {
    uint64_t value = 0;
    for (unsigned shift = 0; at < table.size() && shift < 64; shift += 6) {
        const uint8_t byte = table[at++];
        value |= static_cast<uint64_t>(byte & 63) << shift;
        if ((byte & 64) == 0)
            break;
    }
    return value;
}

// A signed varint keeps the sign in the lowest bit of the unsigned one.
int64_t read_signed_varint(std::span<const uint8_t> table, size_t& at) {
    const uint64_t value = read_varint(table, at);
    const auto magnitude = static_cast<int64_t>(value >> 1);
    return (value & 1) != 0 ? -magnitude : magnitude;
}

// 3.11 and later (Objects/locations.md): each entry starts with a byte 1cccclll covering l+1 code units;
// code c says how the line moves: 0-9 not at all (columns follow), 10-12 by c-10 (columns follow), 13
// by a signed varint (no columns), 14 by a signed varint (end line and columns follow), 15: no line for
// the range, the running line unchanged. Bytes after the first never have the high bit set.
std::optional<int32_t> line_3_11(std::span<const uint8_t> table, int32_t first_line, uint32_t offset) {
    constexpr unsigned kNoColumns = 13, kLong = 14, kNoLocation = 15;
    int64_t line = first_line;
    uint64_t start = 0;
    for (size_t at = 0; at < table.size();) {
        const uint8_t head = table[at++];
        if ((head & 0x80) == 0)
            return std::nullopt;
        const unsigned code = head >> 3 & 15;
        const uint64_t end = start + (uint64_t{head & 7u} + 1) * 2;
        if (code == kNoColumns || code == kLong)
            line += read_signed_varint(table, at);
        else if (code >= 10 && code <= 12)
            line += code - 10;
        while (at < table.size() && (table[at] & 0x80) == 0)
            ++at;
        if (offset < end)
            return code == kNoLocation ? std::nullopt : as_line(line);
        start = end;
    }
    return std::nullopt;
}

} // namespace

bool python_code_has_locations(std::span<const uint8_t> line_table, uint16_t python_version) {
    if (python_version <= format::python_version(3, 10))
        return !line_table.empty();
    constexpr unsigned kNoLocation = 15;
    for (const uint8_t byte : line_table) {
        if ((byte & 0x80) != 0 && (byte >> 3 & 15) != kNoLocation)
            return true;
    }
    return false;
}

std::optional<int32_t> python_line_at(std::span<const uint8_t> line_table, int32_t first_line,
                                      uint32_t instruction_offset, uint16_t python_version) {
    if (python_version < format::python_version(3, 10))
        return std::nullopt;
    if (instruction_offset == format::kPythonOffsetBeforeFirstInstruction)
        return first_line;
    return python_version == format::python_version(3, 10)
               ? line_3_10(line_table, first_line, instruction_offset)
               : line_3_11(line_table, first_line, instruction_offset);
}

} // namespace gpuleak::analyzer
