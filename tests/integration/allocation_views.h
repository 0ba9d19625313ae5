// What a test program says it did (the log of tests/programs/allocation_log.h) and what its trace
// holds, in forms that compare: live sets keyed by address, with the size and the allocating thread.
#pragma once

#include <cstdint>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "read/trace_reader.h"

struct Held {
    uint64_t size = 0;
    uint32_t thread = 0;
    bool operator==(const Held&) const = default;
};
using LiveMap = std::map<uint64_t, Held>;
using LogLine = std::vector<std::string>;

inline uint64_t log_number(const std::string& word) {
    return std::stoull(word, nullptr, 0);
}

// The complete lines of the log, split into words. A line without its newline was cut short by a kill
// and is left out.
inline std::vector<LogLine> read_log(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    const std::string text{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    std::vector<LogLine> lines;
    LogLine line;
    size_t word_start = 0;
    for (size_t i = 0; i < text.size(); ++i) {
        if (text[i] != ' ' && text[i] != '\n')
            continue;
        if (i > word_start)
            line.emplace_back(text, word_start, i - word_start);
        word_start = i + 1;
        if (text[i] == '\n')
            lines.push_back(std::exchange(line, {}));
    }
    return lines;
}

// One process by its own account.
struct ProcessView {
    LiveMap live;
    uint64_t calls = 0;         // allocations and frees that succeeded
    uint64_t unknown_frees = 0; // frees of objects it did not allocate (its copies of its parent's)
};

// By pid, from the "alloc <pid> <tid> <address> <size>" and "free <pid> <tid> <address>" lines.
inline std::map<int, ProcessView> process_views(const std::vector<LogLine>& lines) {
    std::map<int, ProcessView> views;
    for (const LogLine& line : lines) {
        if (line.size() < 4 || (line[0] != "alloc" && line[0] != "free"))
            continue;
        ProcessView& view = views[std::stoi(line[1])];
        ++view.calls;
        const uint64_t address = log_number(line[3]);
        if (line[0] == "alloc")
            view.live[address] = Held{log_number(line.at(4)), static_cast<uint32_t>(std::stoul(line[2]))};
        else if (view.live.erase(address) == 0)
            ++view.unknown_frees;
    }
    return views;
}

// The first line whose first word is `word`, empty when there is none.
inline LogLine find_line(const std::vector<LogLine>& lines, const std::string& word) {
    for (const LogLine& line : lines)
        if (!line.empty() && line[0] == word)
            return line;
    return {};
}

inline LiveMap live_of(const gpuleak::analyzer::TraceReader& trace) {
    LiveMap live;
    for (const auto& allocation : trace.live_allocations().allocations)
        live[allocation.address] = Held{allocation.size, allocation.thread_id};
    return live;
}

// Empty when the sets are equal, else one line per difference (what a failing check prints).
inline std::string live_difference(const LiveMap& expected, const LiveMap& actual) {
    std::ostringstream out;
    auto describe = [&](const char* what, uint64_t address, const Held& held) {
        out << what << " 0x" << std::hex << address << std::dec << " size " << held.size << " thread "
            << held.thread << "\n";
    };
    for (const auto& [address, held] : expected) {
        auto found = actual.find(address);
        if (found == actual.end())
            describe("missing", address, held);
        else if (!(found->second == held))
            describe("differs", address, found->second);
    }
    for (const auto& [address, held] : actual)
        if (!expected.contains(address))
            describe("extra", address, held);
    return out.str();
}

// Bytes live by the trace's own accounting, all slots and kinds together.
inline uint64_t accounted_live_bytes(const gpuleak::analyzer::TraceReader& trace) {
    uint64_t total = 0;
    for (const auto& by_kind : trace.header().accounting.live_bytes)
        for (uint64_t bytes : by_kind)
            total += bytes;
    return total;
}

inline uint64_t total_size(const LiveMap& live) {
    uint64_t total = 0;
    for (const auto& [address, held] : live)
        total += held.size;
    return total;
}
