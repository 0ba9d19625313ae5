// Which loaded object holds an address: glibc's _dl_find_object where it exists, dladdr1 on a glibc
// without it (2.34, where a carried build may run). Both must name the same object.
#include <catch2/catch.hpp>

#include <cstring>
#include <dlfcn.h>
#include <link.h>
#include <unistd.h>

#include "recording/loaded_object.h"

using gpuleak::object_holding;

namespace {

const char* name_of(const link_map* map) {
    return map == nullptr ? "(none)" : map->l_name;
}

} // namespace

TEST_CASE("the object holding an address is the same with _dl_find_object and with dladdr1") {
    // getpid: no sanitizer runtime stands in for it, as one does for malloc.
    const void* in_libc = reinterpret_cast<const void*>(&::getpid);
    const void* in_this_program = reinterpret_cast<const void*>(&name_of);
    for (const void* address : {in_libc, in_this_program}) {
        const link_map* found = object_holding(address, &_dl_find_object);
        const link_map* fallback = object_holding(address, nullptr);
        INFO(name_of(found) << " against " << name_of(fallback));
        REQUIRE(found != nullptr);
        CHECK(found == fallback);
    }
    CHECK(std::strstr(object_holding(in_libc, nullptr)->l_name, "libc.so") != nullptr);
}

TEST_CASE("an address in no loaded object has no object either way") {
    const void* nowhere = reinterpret_cast<const void*>(uintptr_t{16});
    CHECK(object_holding(nowhere, &_dl_find_object) == nullptr);
    CHECK(object_holding(nowhere, nullptr) == nullptr);
}
