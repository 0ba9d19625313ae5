// Allocates and frees random sizes on several threads until it is killed. Every call is logged in two
// steps (a "begin" line before it, the result after it), so that the test can tell which calls had
// completed when the SIGKILL came and which were in flight. Each thread keeps a live set whose size
// wanders between empty and `kMaxLive`, so that a kill finds sets of any size.
//
// usage: killable_loop <log> <threads> <seed>
// Logs "started" once its first call is recorded (the trace exists from then on).
#include <cstdint>
#include <thread>
#include <vector>

#include "allocation_log.h"

namespace {

constexpr size_t kMaxLive = 150;
constexpr uint64_t kOpsPerTarget = 200;

// xorshift64: reproducible from the seed, and no lock shared between the threads.
struct Random {
    uint64_t state;
    uint64_t next() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        return state;
    }
};

[[noreturn]] void churn(const AllocationLog& log, uint64_t seed) {
    Random random{seed * 0x9e3779b97f4a7c15ull + 1};
    std::vector<void*> live;
    size_t target = 0;
    for (uint64_t op = 0;; ++op) {
        if (op % kOpsPerTarget == 0)
            target = random.next() % (kMaxLive + 1);
        if (live.size() < target || live.empty()) {
            live.push_back(log.allocate_announced(1 + random.next() % 65536));
        } else {
            size_t victim = random.next() % live.size();
            log.release_announced(live[victim]);
            live[victim] = live.back();
            live.pop_back();
        }
    }
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 4) {
        std::fprintf(stderr, "usage: killable_loop <log> <threads> <seed>\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    const int threads = std::atoi(argv[2]);
    const uint64_t seed = std::strtoull(argv[3], nullptr, 10);
    log.release_announced(log.allocate_announced(1));
    log.line("started");
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t)
        workers.emplace_back([&log, seed, t] { churn(log, seed * 64 + static_cast<uint64_t>(t)); });
    for (std::thread& worker : workers)
        worker.join();
    return 0;
}
