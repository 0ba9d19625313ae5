// The simulated machine's shape, read from the environment: how many devices and how much memory each.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace gpuleak::sim {

// A node of eight GPUs, as the machines of multi-node jobs have.
inline constexpr int kMaxDevices = 8;
inline constexpr int kDefaultDevices = 1;
inline constexpr std::size_t kDefaultCapacity = std::size_t{16} << 30;

struct SimConfig {
    int devices = kDefaultDevices;
    std::size_t capacity = kDefaultCapacity;
    // Device memory a context takes for itself (real ones take hundreds of MiB): used per the driver
    // but obtained by no allocation call.
    std::size_t context_bytes = 0;
    bool quiet = false;
};

// GPULEAK_SIM_DEVICES: 1 to kMaxDevices.
std::optional<int> parse_device_count(std::string_view text);
// GPULEAK_SIM_CAPACITY: a positive byte count, optionally with K, M, G, KiB, MiB or GiB (all powers of 1024).
std::optional<std::size_t> parse_capacity(std::string_view text);

// Reads GPULEAK_SIM_DEVICES, GPULEAK_SIM_CAPACITY, GPULEAK_SIM_CONTEXT_BYTES (same syntax as the capacity,
// 0 allowed) and GPULEAK_SIM_QUIET; a malformed value gets a one-line
// warning on stderr and the default.
SimConfig read_config_from_environment();

// "2 devices x 16.0 GiB"
std::string describe_config(const SimConfig& config);

} // namespace gpuleak::sim
