// The library whose debug info test_symbolizer reads: built with -g -O2 and loaded with dlopen, so it
// sits at a nonzero load address like any library a program loads.
//
// Each entry point makes a call and returns that call's return address with the source lines a correct
// symbolizer must find for it: the test knows the answers without hard-coding line numbers.
#pragma once

#include <cstdint>

// Plain data: entry points with C linkage return it.
struct FixtureSite {
    uintptr_t return_address;
    int line;        // of the call that return_address returns from
    int caller_line; // when that call is in an inlined function: the line its caller calls it on
};

// The entry points, looked up with dlsym by these names.
extern "C" {
using FixtureEntry = FixtureSite (*)(int seed);
// The return address of the call to it: lets the test take one in its own code.
using FixtureReturnAddress = uintptr_t (*)(int seed);
}
inline constexpr const char* kFixturePlain = "fixture_plain";     // in fixture_plain
inline constexpr const char* kFixtureWidget = "fixture_widget";   // in fixture::Widget::make(int)
inline constexpr const char* kFixtureInlined = "fixture_inlined"; // in fixture::inlined_leaf(int),
                                                                  // inlined into with_inlined_call
inline constexpr const char* kFixtureReturnAddress = "fixture_return_address";
