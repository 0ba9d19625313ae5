// The calls that loaded objects bound before libgpuleak.so was loaded into a running process (gpuleak
// attach): preloaded, its exported functions come first in every lookup; loaded later, every object's
// references were bound already, to CUDA's libraries, the C library and the loader. Redirecting them
// means rewriting each object's slots for those symbols (their GOT entries: function calls through the
// PLT, function addresses taken) to libgpuleak's own definitions, as the preload would have bound them,
// and writing back what was there when recording stops.
#pragma once

namespace gpuleak {

// Redirects the references of every loaded object not yet redirected (all but libgpuleak.so, the
// loader and the objects gpuleak loaded itself) to libgpuleak's exported functions of the same names:
// the entry points of cuda_entry_points.def, dlsym, fork, pthread_create, exec and _exit. Objects loaded
// since the last call are found by the loader's count of loads; a call that finds none returns at once.
// Thread-safe.
void redirect_bound_calls();

// Writes back each rewritten slot that still holds libgpuleak's function, in objects still loaded; from
// then on their calls go where they went before. Thread-safe.
void restore_bound_calls();

} // namespace gpuleak
