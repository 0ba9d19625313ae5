#include "sim_config.h"

#include <array>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <utility>

namespace gpuleak::sim {
namespace {

std::optional<unsigned long long> parse_unsigned(std::string_view text, std::string_view& rest) {
    unsigned long long value = 0;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (error != std::errc{} || end == text.data()) {
        return std::nullopt;
    }
    rest = text.substr(static_cast<std::size_t>(end - text.data()));
    return value;
}

std::string describe_bytes(std::size_t bytes) {
    static constexpr std::array<std::pair<std::size_t, const char*>, 3> kUnits{{
        {std::size_t{1} << 30, "GiB"},
        {std::size_t{1} << 20, "MiB"},
        {std::size_t{1} << 10, "KiB"},
    }};
    char text[64];
    for (const auto& [unit, name] : kUnits) {
        if (bytes >= unit) {
            std::snprintf(text, sizeof text, "%.1f %s",
                          static_cast<double>(bytes) / static_cast<double>(unit), name);
            return text;
        }
    }
    std::snprintf(text, sizeof text, "%zu bytes", bytes);
    return text;
}

} // namespace

std::optional<int> parse_device_count(std::string_view text) {
    std::string_view rest;
    const auto value = parse_unsigned(text, rest);
    if (!value || !rest.empty() || *value < 1 || *value > static_cast<unsigned long long>(kMaxDevices)) {
        return std::nullopt;
    }
    return static_cast<int>(*value);
}

std::optional<std::size_t> parse_capacity(std::string_view text) {
    static constexpr std::array<std::pair<std::string_view, unsigned>, 7> kSuffixes{{
        {"", 0},
        {"K", 10},
        {"M", 20},
        {"G", 30},
        {"KiB", 10},
        {"MiB", 20},
        {"GiB", 30},
    }};
    std::string_view suffix;
    const auto value = parse_unsigned(text, suffix);
    if (!value || *value == 0) {
        return std::nullopt;
    }
    for (const auto& [name, shift] : kSuffixes) {
        if (suffix == name) {
            if (*value > (std::numeric_limits<std::size_t>::max() >> shift)) {
                return std::nullopt;
            }
            return static_cast<std::size_t>(*value) << shift;
        }
    }
    return std::nullopt;
}

SimConfig read_config_from_environment() {
    SimConfig config;
    if (const char* devices = std::getenv("GPULEAK_SIM_DEVICES")) {
        if (const auto count = parse_device_count(devices)) {
            config.devices = *count;
        } else {
            std::fprintf(stderr,
                         "gpuleak-sim: ignoring GPULEAK_SIM_DEVICES='%s' (expected 1 to %d); using %d\n",
                         devices, kMaxDevices, kDefaultDevices);
        }
    }
    if (const char* capacity = std::getenv("GPULEAK_SIM_CAPACITY")) {
        if (const auto bytes = parse_capacity(capacity)) {
            config.capacity = *bytes;
        } else {
            std::fprintf(stderr,
                         "gpuleak-sim: ignoring GPULEAK_SIM_CAPACITY='%s' (expected bytes, optionally with "
                         "K/M/G/KiB/MiB/GiB); using %s\n",
                         capacity, describe_bytes(kDefaultCapacity).c_str());
        }
    }
    if (const char* context = std::getenv("GPULEAK_SIM_CONTEXT_BYTES")) {
        if (const auto bytes =
                std::string_view(context) == "0" ? std::optional<std::size_t>(0) : parse_capacity(context)) {
            config.context_bytes = *bytes;
        } else {
            std::fprintf(
                stderr,
                "gpuleak-sim: ignoring GPULEAK_SIM_CONTEXT_BYTES='%s' (expected bytes, optionally with "
                "K/M/G/KiB/MiB/GiB); using 0\n",
                context);
        }
    }
    const char* quiet = std::getenv("GPULEAK_SIM_QUIET");
    config.quiet = quiet != nullptr && std::string_view(quiet) == "1";
    return config;
}

std::string describe_config(const SimConfig& config) {
    return std::to_string(config.devices) + (config.devices == 1 ? " device x " : " devices x ") +
           describe_bytes(config.capacity);
}

} // namespace gpuleak::sim
