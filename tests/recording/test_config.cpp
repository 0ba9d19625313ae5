// GPULEAK_OUTPUT's expansion: the pid, the rank of a distributed run, the machine, and '%' itself.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "gpuleak/gpuleak.h"
#include "recording/config.h"

namespace {

std::string expanded(const char* pattern, int pid, const char* rank, unsigned long capacity = 256,
                     const char* host = "node7") {
    char out[256];
    REQUIRE(capacity <= sizeof out);
    if (!gpuleak::expand_output_pattern(pattern, {pid, rank, host}, out, capacity))
        return "<does not fit>";
    return out;
}

// Sets RANK and LOCAL_RANK for one test (nullptr: unset) and restores neither: no other test reads them.
void set_ranks(const char* rank, const char* local_rank) {
    for (auto [name, value] : {std::pair{"RANK", rank}, std::pair{"LOCAL_RANK", local_rank}}) {
        if (value == nullptr)
            unsetenv(name);
        else
            setenv(name, value, 1);
    }
}

} // namespace

TEST_CASE("%p is the pid and %% a percent sign") {
    CHECK(expanded("gpuleak.%p.trace", 4242, nullptr) == "gpuleak.4242.trace");
    CHECK(expanded("/tmp/100%%/t.%p", 7, nullptr) == "/tmp/100%/t.7");
    CHECK(expanded("%p%p", 12, nullptr) == "1212");
}

TEST_CASE("%r is the rank with its separator, nothing without a rank") {
    CHECK(expanded("gpuleak.%r%p.trace", 4242, "3") == "gpuleak.rank3.4242.trace");
    CHECK(expanded("gpuleak.%r%p.trace", 4242, nullptr) == "gpuleak.4242.trace");
    CHECK(expanded("%%r", 1, "3") == "%r");
}

TEST_CASE("%h is the machine's name, made safe for a file name") {
    CHECK(expanded("gpuleak.%h.%p.trace", 4242, nullptr) == "gpuleak.node7.4242.trace");
    CHECK(expanded("%h", 1, nullptr, 256, "gpu-12.cluster_a") == "gpu-12.cluster_a");
    // Nothing that climbs out of the directory or starts another path component.
    CHECK(expanded("run/%h/t", 1, nullptr, 256, "a/b c") == "run/a_b_c/t");
    CHECK(expanded("run/%h/t", 1, nullptr, 256, "..") == "run/.._/t");
    CHECK(expanded("run/%h/t", 1, nullptr, 256, "") == "run/_/t");
    CHECK(expanded("t.%h", 1, nullptr, 8) == "t.node7");
    CHECK(expanded("t.%h", 1, nullptr, 7) == "<does not fit>");
}

TEST_CASE("an expansion that does not fit is refused") {
    CHECK(expanded("t.%p", 123456, nullptr, 9) == "t.123456");
    CHECK(expanded("t.%p", 123456, nullptr, 8) == "<does not fit>");
    CHECK(expanded("t.%r", 1, "12", 10) == "t.rank12.");
    CHECK(expanded("t.%r", 1, "12", 9) == "<does not fit>");
}

TEST_CASE("the rank comes from RANK, else LOCAL_RANK, and only when it is a number") {
    set_ranks("5", "1");
    CHECK(std::string(gpuleak::rank_from_environment()) == "5");
    set_ranks(nullptr, "1");
    CHECK(std::string(gpuleak::rank_from_environment()) == "1");
    set_ranks(nullptr, nullptr);
    CHECK(gpuleak::rank_from_environment() == nullptr);
    // A value that could escape the directory or is no number is no rank; LOCAL_RANK stands in.
    set_ranks("../../etc/x", "2");
    CHECK(std::string(gpuleak::rank_from_environment()) == "2");
    set_ranks("", nullptr);
    CHECK(gpuleak::rank_from_environment() == nullptr);
    set_ranks("1234567890", nullptr);
    CHECK(gpuleak::rank_from_environment() == nullptr);
    set_ranks("-1", nullptr);
    CHECK(gpuleak::rank_from_environment() == nullptr);
    set_ranks(nullptr, nullptr);
}

TEST_CASE(
    "GPULEAK_WHY names its moments in any case, none turns them off, and anything else is the default") {
    using gpuleak::why_moments_setting;
    constexpr int kDefault = GPULEAK_WHY_OUT_OF_MEMORY | GPULEAK_WHY_EXIT;
    CHECK(why_moments_setting(nullptr) == kDefault);
    CHECK(why_moments_setting("") == kDefault);
    CHECK(why_moments_setting("phase") == GPULEAK_WHY_PHASE_END);
    CHECK(why_moments_setting("OOM, Phase") == (GPULEAK_WHY_OUT_OF_MEMORY | GPULEAK_WHY_PHASE_END));
    CHECK(why_moments_setting("exit") == GPULEAK_WHY_EXIT);
    for (const char* none : {"none", "NONE", "off", "0", "none,none"})
        CHECK(why_moments_setting(none) == 0);
    // One warning each, and the default: never more than was asked for by a typo's luck.
    for (const char* malformed : {"sometimes", "oom,,phase", "none,phase", "oom;phase"})
        CHECK(why_moments_setting(malformed) == kDefault);
}
