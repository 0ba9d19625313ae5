// A thread's own object, mapped at its first use and unmapped when the thread ends. The recorder's
// per-thread caches live so rather than in thread-local storage: a library with initial-exec TLS (ours,
// for signal handlers) gets its whole TLS block from the static block the loader set aside at the
// program's start, and loaded into a running process (gpuleak attach) finds a few hundred bytes left
// there, not kilobytes.
#pragma once

#include <cstdint>
#include <new>
#include <pthread.h>
#include <sys/mman.h>
#include <type_traits>

namespace gpuleak {

template <class T> class ThreadOwned {
    static_assert(std::is_trivially_destructible_v<T>, "unmapped without running a destructor");

  public:
    // This thread's object, value-initialised at its first use; nullptr where it cannot be mapped, or
    // the thread is ending (a later thread-local destructor that records).
    static T* get() {
        if (t_state_ == State::Unset) {
            t_object_ = create();
            t_state_ = t_object_ != nullptr ? State::Ready : State::Gone;
        }
        return t_object_;
    }

  private:
    enum class State : uint8_t { Unset, Ready, Gone };

    static void release(void* object) {
        ::munmap(object, sizeof(T));
        t_object_ = nullptr;
        t_state_ = State::Gone;
    }

    static void create_key() { key_ready_ = pthread_key_create(&key_, release) == 0; }

    static T* create() {
        pthread_once(&key_once_, create_key);
        if (!key_ready_)
            return nullptr;
        void* memory = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (memory == MAP_FAILED)
            return nullptr;
        T* object = new (memory) T();
        if (pthread_setspecific(key_, object) != 0) {
            ::munmap(memory, sizeof(T));
            return nullptr;
        }
        return object;
    }

    __attribute__((tls_model("initial-exec"))) static inline constinit thread_local T* t_object_ = nullptr;
    __attribute__((tls_model("initial-exec"))) static inline constinit thread_local State t_state_ =
        State::Unset;
    static inline pthread_key_t key_{};
    static inline pthread_once_t key_once_ = PTHREAD_ONCE_INIT;
    static inline bool key_ready_ = false;
};

} // namespace gpuleak
