// libnext_interposer.so: a second preloaded interposer, as programs meet them in the wild (profilers,
// shims). It wraps puts and forwards to the next definition, found with dlsym(RTLD_NEXT). Were RTLD_NEXT
// resolved relative to the wrong object, it would find itself and recurse until the stack overflows.
#include <dlfcn.h>

#include <cstdio>

extern "C" __attribute__((visibility("default"))) int puts(const char* text) {
    using Puts = int (*)(const char*);
    static const auto next = reinterpret_cast<Puts>(dlsym(RTLD_NEXT, "puts"));
    std::fputs("[next_interposer] ", stdout);
    return next(text);
}
