// dlsym_behaviour <log> <scope_probe library>: the dlsym behaviours a preloaded dlsym must keep, each
// logged so that a test can compare them with and without gpuleak:
//   - puts, which a second preloaded interposer (next_interposer.cpp) may wrap and forward with RTLD_NEXT
//   - RTLD_DEFAULT from a library loaded RTLD_LOCAL, which searches that library's own scope too
//   - lookups of missing symbols, which return NULL and leave a message for dlerror()
// It also allocates once, so that gpuleak is recording while all this happens.
#include <dlfcn.h>

#include <cstdio>

#include "allocation_log.h"

namespace {

constexpr const char* kMissing = "gpuleak_test_no_such_symbol";

void log_lookup(const AllocationLog& log, const char* what, const void* found) {
    const char* error = dlerror();
    log.line("call dlsym lookup=%s found=%d error=%s", what, found != nullptr,
             error == nullptr ? "none" : error);
}

} // namespace

int main(int argc, char** argv) {
    if (argc < 3) {
        std::fprintf(stderr, "usage: dlsym_behaviour <log> <scope_probe library>\n");
        return 2;
    }
    const AllocationLog log(argv[1]);
    void* memory = nullptr;
    if (cudaMalloc(&memory, 4096) != 0 || cudaFree(memory) != 0)
        return 1;

    puts("dlsym_behaviour: hello");
    std::fflush(stdout);

    void* probe = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    log.line("call dlopen library=scope_probe found=%d", probe != nullptr);
    if (probe == nullptr)
        return 1;
    using Read = int (*)(const char*);
    const auto read = reinterpret_cast<Read>(dlsym(probe, "scope_probe_read"));
    if (read == nullptr)
        return 1;
    const int value = read("scope_probe_marker");
    log.line("call scope_probe_read lookup=scope_probe_marker found=%d value=%d", value != -1, value);
    log_lookup(log, "program_default_scope_probe_marker", dlsym(RTLD_DEFAULT, "scope_probe_marker"));

    void* runtime = dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD);
    dlerror();
    log_lookup(log, "runtime_cudaMalloc", dlsym(runtime, "cudaMalloc"));
    log_lookup(log, "runtime_missing", dlsym(runtime, kMissing));
    log_lookup(log, "default_missing", dlsym(RTLD_DEFAULT, kMissing));
    log_lookup(log, "next_missing", dlsym(RTLD_NEXT, kMissing));
    log_lookup(log, "next_puts", dlsym(RTLD_NEXT, "puts"));
    return 0;
}
