#include "host_functions.h"

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

namespace gpuleak::sim {
namespace {

struct Queue {
    std::mutex mutex;
    std::condition_variable work_or_done;
    std::deque<std::function<void()>> pending;
    std::uint64_t enqueued = 0;
    std::uint64_t finished = 0;
    bool worker_started = false;
};

thread_local bool t_on_worker = false;

// Never destroyed: the detached worker may still be waiting on it while the process exits.
Queue& queue() {
    static auto* instance = new Queue;
    return *instance;
}

void run_worker() {
    t_on_worker = true;
    Queue& q = queue();
    std::unique_lock lock(q.mutex);
    for (;;) {
        q.work_or_done.wait(lock, [&] { return !q.pending.empty(); });
        std::function<void()> function = std::move(q.pending.front());
        q.pending.pop_front();
        lock.unlock();
        function();
        lock.lock();
        ++q.finished;
        q.work_or_done.notify_all();
    }
}

} // namespace

void enqueue_host_function(std::function<void()> function) {
    Queue& q = queue();
    const std::lock_guard lock(q.mutex);
    if (!q.worker_started) {
        std::thread(run_worker).detach();
        q.worker_started = true;
    }
    q.pending.push_back(std::move(function));
    ++q.enqueued;
    q.work_or_done.notify_all();
}

void wait_for_host_functions() {
    if (t_on_worker) {
        return;
    }
    Queue& q = queue();
    std::unique_lock lock(q.mutex);
    const std::uint64_t target = q.enqueued;
    q.work_or_done.wait(lock, [&] { return q.finished >= target; });
}

} // namespace gpuleak::sim
