#include <catch2/catch.hpp>

#include <vector>

#include "gpuleak/trace_format.h"
#include "python/python_line_table.h"

using gpuleak::analyzer::python_line_at;
using gpuleak::format::kPythonOffsetBeforeFirstInstruction;
using gpuleak::format::python_version;

namespace {

constexpr uint16_t k310 = python_version(3, 10);
constexpr uint16_t k312 = python_version(3, 12);

// The first byte of a 3.11+ location entry: `code` for `units` code units.
constexpr uint8_t entry(unsigned code, unsigned units) {
    return static_cast<uint8_t>(0x80 | code << 3 | (units - 1));
}

} // namespace

TEST_CASE("3.10 line tables: byte ranges, line deltas, no-line ranges and empty ranges") {
    const std::vector<uint8_t> table = {
        6, 1,    // [0, 6): line 11
        0, 2,    // empty: the line moves to 13
        4, 0x80, // [6, 10): no line, the running line stays 13
        8, 0xff, // [10, 18): line 12
    };
    CHECK(python_line_at(table, 10, 0, k310) == 11);
    CHECK(python_line_at(table, 10, 4, k310) == 11);
    CHECK(python_line_at(table, 10, 6, k310) == std::nullopt);
    CHECK(python_line_at(table, 10, 10, k310) == 12);
    CHECK(python_line_at(table, 10, 16, k310) == 12);
    CHECK(python_line_at(table, 10, 18, k310) == std::nullopt); // past the table
}

TEST_CASE("3.11+ location tables: every kind of entry moves the line as CPython does") {
    const std::vector<uint8_t> table = {
        entry(13, 2), 0x06,                   // [0, 4): no columns, line +3
        entry(15, 1),                         // [4, 6): no location
        entry(11, 3), 0x05, 0x09,             // [6, 12): one line form, line +1, two column bytes
        entry(14, 1), 0x05, 0x00, 0x01, 0x02, // [12, 14): long form, line -2, end line and columns
        entry(0, 1),  0x03,                   // [14, 16): short form, same line
        entry(13, 1), 0x48, 0x03,             // [16, 18): line +100, a two-byte varint
    };
    CHECK(python_line_at(table, 20, 0, k312) == 23);
    CHECK(python_line_at(table, 20, 2, k312) == 23);
    CHECK(python_line_at(table, 20, 4, k312) == std::nullopt);
    CHECK(python_line_at(table, 20, 6, k312) == 24);
    CHECK(python_line_at(table, 20, 10, k312) == 24);
    CHECK(python_line_at(table, 20, 12, k312) == 22);
    CHECK(python_line_at(table, 20, 14, k312) == 22);
    CHECK(python_line_at(table, 20, 16, k312) == 122);
    CHECK(python_line_at(table, 20, 18, k312) == std::nullopt);
}

TEST_CASE("a frame before its first instruction is at the first line") {
    const std::vector<uint8_t> table = {entry(13, 1), 0x02};
    CHECK(python_line_at(table, 7, kPythonOffsetBeforeFirstInstruction, k312) == 7);
    CHECK(python_line_at(table, 7, kPythonOffsetBeforeFirstInstruction, k310) == 7);
}

TEST_CASE("versions before 3.10 and malformed tables give no line") {
    const std::vector<uint8_t> table = {entry(13, 1), 0x02};
    CHECK(python_line_at(table, 7, 0, python_version(3, 9)) == std::nullopt);
    const std::vector<uint8_t> not_an_entry = {0x02, entry(13, 1), 0x02};
    CHECK(python_line_at(not_an_entry, 7, 0, k312) == std::nullopt);
    CHECK(python_line_at({}, 7, 0, k312) == std::nullopt);
    const std::vector<uint8_t> odd_length = {4};
    CHECK(python_line_at(odd_length, 7, 0, k310) == std::nullopt);
}

TEST_CASE("code without any source location is told apart: the interpreter's trampolines") {
    constexpr uint16_t k313 = python_version(3, 13);
    // _Py_InitCleanup: one entry of 4 code units, no location.
    const std::vector<uint8_t> trampoline{entry(15, 4)};
    CHECK_FALSE(gpuleak::analyzer::python_code_has_locations(trampoline, k313));
    CHECK_FALSE(gpuleak::analyzer::python_code_has_locations({}, k313));
    // A function: a no-location entry, then one moving the line by one (code 11) with columns.
    const std::vector<uint8_t> function{entry(15, 1), entry(11, 2), 0x04, 0x0a};
    CHECK(gpuleak::analyzer::python_code_has_locations(function, k313));
    const std::vector<uint8_t> table_3_10{0x02, 0x01};
    CHECK(gpuleak::analyzer::python_code_has_locations(table_3_10, python_version(3, 10)));
}
