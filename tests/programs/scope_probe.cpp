// libscope_probe.so, loaded RTLD_LOCAL by dlsym_behaviour: dlsym(RTLD_DEFAULT) from here searches this
// library's own scope, where its symbols are, though the program's global scope does not hold them.
#include <dlfcn.h>

extern "C" {
__attribute__((visibility("default"))) int scope_probe_marker = 42;

// The value of the int `name`, -1 when RTLD_DEFAULT does not find it. Reading it after the lookup keeps
// the call from being a tail call: glibc takes the scope from its caller's return address, which would
// then be in the program.
__attribute__((visibility("default"))) int scope_probe_read(const char* name) {
    const auto* value = static_cast<const int*>(dlsym(RTLD_DEFAULT, name));
    return value == nullptr ? -1 : *value;
}
}
