// A carried build (GPULEAK_STATIC_DEPS) links the C++ runtime into its programs, and GCC 12's runtime
// refers to arc4random, which glibc has only had since 2.36, for std::random_device, which gpuleak never
// constructs. Defined here from getrandom (glibc 2.25), the programs also start where glibc is 2.34 or
// 2.35 (Ubuntu 22.04), the oldest that a build on Debian 12 can reach anyway (its threads functions).
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/types.h>

uint32_t arc4random(void) {
    uint32_t value;
    size_t filled = 0;
    while (filled < sizeof value) {
        const ssize_t got = getrandom((char*)&value + filled, sizeof value - filled, 0);
        if (got > 0)
            filled += (size_t)got;
        else if (errno != EINTR)
            abort(); // as glibc's own arc4random does when the kernel gives no randomness
    }
    return value;
}
