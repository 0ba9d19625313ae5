// Names of an enumeration's values in a table (common/name_table.h).
#include <catch2/catch.hpp>

#include <cstdint>
#include <string>

#include "common/name_table.h"

namespace {

enum class Colour : int8_t { Red, Green, Blue };

constexpr gpuleak::NameTable
    kColourNames({{Colour::Red, "red"}, {Colour::Green, "green"}, {Colour::Blue, nullptr}}, Colour::Green);

// Usable where a constant is.
static_assert(kColourNames[Colour::Red][0] == 'r');

} // namespace

TEST_CASE("a name table names each value by its row") {
    CHECK(std::string(kColourNames[Colour::Red]) == "red");
    CHECK(std::string(kColourNames[Colour::Green]) == "green");
    CHECK(kColourNames[Colour::Blue] == nullptr);
}

TEST_CASE("a value past the rows takes the fallback's name, as a switch's default did") {
    CHECK(std::string(kColourNames[static_cast<Colour>(3)]) == "green");
    CHECK(std::string(kColourNames[static_cast<Colour>(-1)]) == "green");
}
