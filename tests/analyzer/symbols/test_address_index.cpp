#include <catch2/catch.hpp>

#include "symbols/address_index.h"

using gpuleak::analyzer::AddressIndex;

namespace {

int value_at(const AddressIndex<int>& index, uint64_t address) {
    const int* value = index.find(address);
    return value != nullptr ? *value : -1;
}

} // namespace

TEST_CASE("an address index finds the range that covers an address and nothing in gaps") {
    AddressIndex<int> index({{100, 200, 1}, {300, 400, 2}, {200, 250, 3}, {500, 500, 4}});
    CHECK(value_at(index, 99) == -1);
    CHECK(value_at(index, 100) == 1);
    CHECK(value_at(index, 199) == 1);
    CHECK(value_at(index, 200) == 3);
    CHECK(value_at(index, 250) == -1);
    CHECK(value_at(index, 399) == 2);
    CHECK(value_at(index, 400) == -1);
    CHECK(value_at(index, 500) == -1); // an empty range covers nothing
    CHECK(value_at(AddressIndex<int>(), 0) == -1);
}

TEST_CASE("an address index picks the innermost of nested ranges") {
    // A function with an inlined call, itself with an inlined call, given outermost first.
    AddressIndex<int> index(
        {{0x1000, 0x2000, 1}, {0x1100, 0x1800, 2}, {0x1200, 0x1300, 3}, {0x1100, 0x1180, 4}});
    CHECK(value_at(index, 0x1000) == 1);
    CHECK(value_at(index, 0x1100) == 4); // starts with 2, given after it
    CHECK(value_at(index, 0x1180) == 2);
    CHECK(value_at(index, 0x1250) == 3);
    CHECK(value_at(index, 0x1300) == 2);
    CHECK(value_at(index, 0x1800) == 1);
    CHECK(value_at(index, 0x1fff) == 1);
}

TEST_CASE("an address index lets the range that starts last win where ranges overlap") {
    AddressIndex<int> index({{100, 300, 1}, {200, 400, 2}, {250, 260, 3}});
    CHECK(value_at(index, 150) == 1);
    CHECK(value_at(index, 200) == 2);
    CHECK(value_at(index, 255) == 3);
    CHECK(value_at(index, 299) == 2);
    CHECK(value_at(index, 350) == 2);
}
