// What the preloaded library has to say to the user of a program it runs in: the program's stderr is all
// it has, and it may be in any thread, holding any lock, short of memory.
#pragma once

namespace gpuleak {

// One line on stderr, prefixed "gpuleak: ". Never allocates; safe in any thread.
void warn(const char* format, ...) __attribute__((format(printf, 1, 2)));

} // namespace gpuleak
