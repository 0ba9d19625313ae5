// Host functions enqueued on streams (cuLaunchHostFunc, cuStreamAddCallback, and so the runtime's). On a GPU
// the driver runs them on a thread of its own once the work before them is done; here that work is always
// done, so they run at once, in order, on one worker thread: never on the caller's, which may hold a lock the
// function takes.
#pragma once

#include <functional>

namespace gpuleak::sim {

void enqueue_host_function(std::function<void()> function);
// Waits until every host function enqueued so far has run, as synchronising a stream or the device
// does. Returns at once on the worker thread itself, where waiting would never end.
void wait_for_host_functions();

} // namespace gpuleak::sim
