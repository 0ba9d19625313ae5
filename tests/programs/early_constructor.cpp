// Logs the allocation libearly_alloc.so made in its constructor (nothing when it failed), then makes
// one of its own.
//
// usage: early_constructor <log>
#include "allocation_log.h"
#include "early_alloc.h"

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: early_constructor <log>\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    if (early_allocation() != nullptr)
        log.line("alloc %d %d %#llx %zu", ::getpid(), ::gettid(), AllocationLog::address(early_allocation()),
                 early_allocation_size());
    log.allocate(777);
    return 0;
}
