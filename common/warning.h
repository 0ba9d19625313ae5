// What the preloaded library has to say to the user of a program it runs in: the program's stderr is all
// it has, and it may be in any thread, holding any lock, short of memory.
#pragma once

namespace gpuleak {

// One line on stderr, prefixed "gpuleak: ". Never allocates; safe in any thread.
void warn(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Where warn() writes from now on instead of stderr: a program that gpuleak attach recorded has its
// stderr to itself. -1: nowhere. Returns where they went before.
int send_warnings_to(int fd);

} // namespace gpuleak
