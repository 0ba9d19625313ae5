// A lock for the recorder's short critical sections: usable before libc is fully up, after fork in
// the child (reset by re-constructing), and without any heap allocation.
#pragma once

#include <atomic>
#include <mutex>
#include <sched.h>

namespace gpuleak {

class SpinLock {
  public:
    void lock() noexcept {
        for (int spins = 0;; ++spins) {
            if (!locked_.load(std::memory_order_relaxed) &&
                !locked_.exchange(true, std::memory_order_acquire))
                return;
            if (spins > 64)
                sched_yield();
        }
    }
    [[nodiscard]] bool try_lock() noexcept {
        return !locked_.load(std::memory_order_relaxed) && !locked_.exchange(true, std::memory_order_acquire);
    }
    void unlock() noexcept { locked_.store(false, std::memory_order_release); }
    // After fork the child has one thread: a lock held by another parent thread would never be released.
    void reset_after_fork() noexcept { locked_.store(false, std::memory_order_relaxed); }

  private:
    std::atomic<bool> locked_{false};
};

class SpinGuard {
  public:
    explicit SpinGuard(SpinLock& lock) noexcept : lock_(lock) { lock_.lock(); }
    // Of a lock the caller took already (try_lock).
    SpinGuard(SpinLock& lock, std::adopt_lock_t /*unused*/) noexcept : lock_(lock) {}
    ~SpinGuard() { lock_.unlock(); }
    SpinGuard(const SpinGuard&) = delete;
    SpinGuard& operator=(const SpinGuard&) = delete;

  private:
    SpinLock& lock_;
};

} // namespace gpuleak
