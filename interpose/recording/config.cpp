#include "recording/config.h"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <string_view>

#include "common/warning.h"
#include "gpuleak/gpuleak.h"

namespace gpuleak {

namespace {

// Parses a whole decimal number in [low, high]; anything else is malformed.
bool parse_number(const char* text, uint64_t low, uint64_t high, uint64_t& out) {
    if (text[0] < '0' || text[0] > '9')
        return false;
    char* end = nullptr;
    errno = 0;
    unsigned long long value = std::strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0' || value < low || value > high)
        return false;
    out = value;
    return true;
}

uint64_t number_setting(const char* name, uint64_t fallback, uint64_t low, uint64_t high) {
    const char* text = std::getenv(name);
    if (text == nullptr || text[0] == '\0')
        return fallback;
    uint64_t value = 0;
    if (parse_number(text, low, high, value))
        return value;
    warn("%s=%s is not a number in [%llu, %llu]; using %llu", name, text,
         static_cast<unsigned long long>(low), static_cast<unsigned long long>(high),
         static_cast<unsigned long long>(fallback));
    return fallback;
}

bool flag_setting(const char* name, bool fallback) {
    const char* text = std::getenv(name);
    if (text == nullptr || text[0] == '\0')
        return fallback;
    if (std::strcmp(text, "0") == 0)
        return false;
    if (std::strcmp(text, "1") == 0)
        return true;
    warn("%s=%s should be 0 or 1; using %d", name, text, fallback ? 1 : 0);
    return fallback;
}

} // namespace

Config read_config() {
    Config config{};
    const char* output = std::getenv("GPULEAK_OUTPUT");
    if (output != nullptr && output[0] != '\0' && std::strlen(output) < sizeof config.output_pattern) {
        std::strcpy(config.output_pattern, output);
    } else {
        if (output != nullptr && output[0] != '\0')
            warn("GPULEAK_OUTPUT is longer than %zu bytes; using the default",
                 sizeof config.output_pattern - 1);
        std::strcpy(config.output_pattern, "gpuleak.%p.trace");
    }
    config.max_bytes = number_setting("GPULEAK_MAX_MB", kDefaultMaxMb, kMinMaxMb, kMaxMaxMb) << 20;
    config.max_bytes_chosen = std::getenv("GPULEAK_MAX_MB") != nullptr;
    config.stack_depth = static_cast<uint32_t>(
        number_setting("GPULEAK_STACK_DEPTH", kDefaultStackDepth, 0, kMaxStackDepthSetting));
    config.sample_interval_ms = static_cast<uint32_t>(
        number_setting("GPULEAK_SAMPLE_MS", kDefaultSampleMs, kMinSampleMs, kMaxSampleMs));
    config.quiet = flag_setting("GPULEAK_QUIET", false);
    config.python_stacks = flag_setting("GPULEAK_PYTHON", true);
    config.all_processes = flag_setting("GPULEAK_ALL_PROCESSES", true);
    config.why_moments = why_moments_setting(std::getenv("GPULEAK_WHY"));
    return config;
}

uint32_t why_moments_setting(const char* value) {
    constexpr uint32_t kDefault = GPULEAK_WHY_OUT_OF_MEMORY | GPULEAK_WHY_EXIT;
    if (value == nullptr || value[0] == '\0')
        return kDefault;
    const auto is = [](std::string_view word, const char* name) {
        return word.size() == std::strlen(name) && strncasecmp(word.data(), name, word.size()) == 0;
    };
    uint32_t moments = 0;
    bool none = false;
    const std::string_view text(value);
    for (size_t start = 0; start <= text.size();) {
        size_t end = text.find(',', start);
        if (end == std::string_view::npos)
            end = text.size();
        std::string_view word = text.substr(start, end - start);
        while (!word.empty() && word.front() == ' ')
            word.remove_prefix(1);
        while (!word.empty() && word.back() == ' ')
            word.remove_suffix(1);
        if (is(word, "oom"))
            moments |= GPULEAK_WHY_OUT_OF_MEMORY;
        else if (is(word, "phase"))
            moments |= GPULEAK_WHY_PHASE_END;
        else if (is(word, "exit"))
            moments |= GPULEAK_WHY_EXIT;
        else if (is(word, "none") || is(word, "off") || is(word, "0"))
            none = true;
        else {
            warn("GPULEAK_WHY=%s: expected a comma-separated list of oom, phase and exit, or none; using "
                 "oom,exit",
                 value);
            return kDefault;
        }
        start = end + 1;
    }
    if (none && moments != 0) {
        warn("GPULEAK_WHY=%s: none with other moments; using oom,exit", value);
        return kDefault;
    }
    return moments;
}

const char* rank_from_environment() {
    // Distributed launchers (torchrun, DeepSpeed, Accelerate) set RANK for the run and LOCAL_RANK per
    // node; a value that is not a plain number could put a '/' or ".." into the file name, so it counts
    // as unset.
    for (const char* name : {"RANK", "LOCAL_RANK"}) {
        if (environment_number(name) >= 0)
            return std::getenv(name);
    }
    return nullptr;
}

int environment_number(const char* name) {
    const char* value = std::getenv(name);
    uint64_t number = 0;
    if (value == nullptr || std::strlen(value) > kMaxRankDigits ||
        !parse_number(value, 0, UINT64_MAX, number))
        return -1;
    return static_cast<int>(number);
}

bool expand_output_pattern(const char* pattern, const TraceName& name, char* out, unsigned long capacity) {
    unsigned long used = 0;
    auto append = [&](const char* text, size_t length) {
        if (used + length >= capacity)
            return false;
        std::memcpy(out + used, text, length);
        used += length;
        return true;
    };
    for (const char* p = pattern; *p != '\0'; ++p) {
        bool ok = true;
        if (p[0] == '%' && p[1] == 'p') {
            char digits[16];
            int n = std::snprintf(digits, sizeof digits, "%d", name.pid);
            ok = append(digits, static_cast<size_t>(n));
            ++p;
        } else if (p[0] == '%' && p[1] == 'r') {
            // With its separator, so that one pattern names the traces of ranked and unranked runs alike:
            // "gpuleak.%r%p.trace" is gpuleak.rank3.4242.trace or gpuleak.4242.trace.
            if (name.rank != nullptr)
                ok = append("rank", 4) && append(name.rank, std::strlen(name.rank)) && append(".", 1);
            ++p;
        } else if (p[0] == '%' && p[1] == 'h') {
            // A name that is only dots would climb out of the directory.
            bool dots_only = true;
            for (const char* c = name.host; *c != '\0' && ok; ++c) {
                const bool kept = std::isalnum(static_cast<unsigned char>(*c)) != 0 || *c == '-' || *c == '_';
                dots_only &= *c == '.';
                ok = append(kept || *c == '.' ? c : "_", 1);
            }
            if (ok && dots_only)
                ok = append("_", 1);
            ++p;
        } else if (p[0] == '%' && p[1] == '%') {
            ok = append("%", 1);
            ++p;
        } else {
            ok = append(p, 1);
        }
        if (!ok)
            return false;
    }
    out[used] = '\0';
    return true;
}

} // namespace gpuleak
