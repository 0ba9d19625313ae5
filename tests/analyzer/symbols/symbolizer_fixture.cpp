#include "symbolizer_fixture.h"

extern "C" {

// A real call, never inlined; its callers use the result, so it is no tail call (a jump) either: the
// return address lies in the caller, right after the call.
[[gnu::noinline]] uintptr_t fixture_return_address(int) {
    return reinterpret_cast<uintptr_t>(__builtin_return_address(0));
}

[[gnu::noinline]] FixtureSite fixture_plain(int seed) {
    return {fixture_return_address(seed), __LINE__, 0};
}

} // extern "C"

namespace fixture {

class Widget {
  public:
    [[gnu::noinline]] static FixtureSite make(int seed);
};

FixtureSite Widget::make(int seed) {
    return {fixture_return_address(seed * 3), __LINE__, 0};
}

[[gnu::always_inline]] inline FixtureSite inlined_leaf(int seed) {
    return {fixture_return_address(seed + 1), __LINE__, 0};
}

[[gnu::noinline]] FixtureSite with_inlined_call(int seed) {
    constexpr int kCallLine = __LINE__ + 1;
    FixtureSite site = inlined_leaf(seed);
    site.caller_line = kCallLine;
    return site;
}

} // namespace fixture

extern "C" {

FixtureSite fixture_widget(int seed) {
    return fixture::Widget::make(seed);
}

FixtureSite fixture_inlined(int seed) {
    return fixture::with_inlined_call(seed);
}

} // extern "C"
