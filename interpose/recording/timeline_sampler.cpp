#include "recording/timeline_sampler.h"

#include "recording/monotonic_clock.h"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <pthread.h>
#include <sched.h>

namespace gpuleak {

using format::TimelineSample;

namespace {

void copy_sample(TimelineSample& slot, const TimelineSample& sample) {
    // Acquire keeps the field stores below from being ordered before the invalidation.
    __atomic_exchange_n(&slot.commit, 0, __ATOMIC_ACQUIRE);
    std::memcpy(reinterpret_cast<uint8_t*>(&slot) + sizeof slot.commit,
                reinterpret_cast<const uint8_t*>(&sample) + sizeof sample.commit,
                sizeof sample - sizeof sample.commit);
    __atomic_store_n(&slot.commit, sample.commit, __ATOMIC_RELEASE);
}

} // namespace

void TimelineSampler::start(TraceWriter& writer, void (*on_wake)(), uint64_t (*python_modules)(),
                            TraceStart how) {
    writer_ = &writer;
    on_wake_ = on_wake;
    python_modules_ = python_modules;
    first_on_thread_ = how != TraceStart::FirstEvent && how != TraceStart::Attach;
    stored_ = 0;
    lock_.reset_after_fork();
    host_.open();
    if (how == TraceStart::Fork)
        sample_now(SampleMoment::Fork);
    // The thread must never take a signal meant for the program.
    sigset_t all;
    sigset_t previous;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &previous);
    writer.prepare_ring_ahead();
    pthread_t thread;
    pthread_attr_t attributes;
    pthread_attr_init(&attributes);
    pthread_attr_setdetachstate(&attributes, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attributes, 64 << 10);
    __atomic_store_n(&running_, false, __ATOMIC_RELAXED);
    __atomic_add_fetch(&generation_, 1, __ATOMIC_RELEASE);
    if (pthread_create(&thread, &attributes, run, this) == 0) {
        pthread_setname_np(thread, "gpuleak-sampler");
        // A new thread allocates while it sets itself up (its stack bounds, its TLS), and an allocator
        // without fork handlers (AddressSanitizer's) leaves a child forked meanwhile with its lock held:
        // the program may fork the moment recording started.
        while (!__atomic_load_n(&running_, __ATOMIC_ACQUIRE))
            sched_yield();
    }
    pthread_attr_destroy(&attributes);
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    if (!first_on_thread_)
        sample_now();
}

void* TimelineSampler::run(void* self) {
    auto* sampler = static_cast<TimelineSampler*>(self);
    const uint64_t generation = __atomic_load_n(&sampler->generation_, __ATOMIC_ACQUIRE);
    __atomic_store_n(&sampler->running_, true, __ATOMIC_RELEASE);
    recalibrate_monotonic_clock();
    if (sampler->first_on_thread_)
        sampler->sample_now();
    for (;;) {
        uint64_t interval = 0;
        {
            // Under the lock: stop() may forget the trace meanwhile.
            SpinGuard guard(sampler->lock_);
            TraceWriter* writer = sampler->writer_;
            if (writer == nullptr || !writer->mapped() ||
                __atomic_load_n(&sampler->generation_, __ATOMIC_ACQUIRE) != generation)
                return nullptr;
            interval = __atomic_load_n(&writer->header()->timeline_interval_ns, __ATOMIC_RELAXED);
        }
        timespec delay{static_cast<time_t>(interval / 1000000000ull),
                       static_cast<long>(interval % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &delay, &delay) == EINTR) {
        }
        if (__atomic_load_n(&sampler->generation_, __ATOMIC_ACQUIRE) != generation)
            return nullptr;
        recalibrate_monotonic_clock();
        sampler->sample_now();
        {
            SpinGuard guard(sampler->lock_);
            if (sampler->writer_ != nullptr && sampler->writer_->mapped() &&
                __atomic_load_n(&sampler->generation_, __ATOMIC_ACQUIRE) == generation)
                sampler->writer_->prepare_ring_ahead();
        }
        sampler->on_wake_();
    }
}

void TimelineSampler::thin() {
    TimelineSample* samples = writer_->timeline();
    const uint64_t capacity = writer_->header()->timeline_capacity;
    for (uint64_t i = 1; i < capacity / 2; ++i)
        copy_sample(samples[i], samples[2 * i]);
    for (uint64_t i = capacity / 2; i < capacity; ++i)
        __atomic_store_n(&samples[i].commit, 0, __ATOMIC_RELEASE);
    stored_ = capacity / 2;
    __atomic_store_n(&writer_->header()->timeline_interval_ns, writer_->header()->timeline_interval_ns * 2,
                     __ATOMIC_RELAXED);
}

void TimelineSampler::sample_now(SampleMoment moment) {
    // What takes the C library's locks (malloc's arenas; the dynamic linker's, the first time the
    // interpreter is looked for) comes before this sampler's lock, which an exec from a signal handler
    // that interrupted malloc waits for.
    uint64_t python_modules = 0;
    if (moment == SampleMoment::Periodic) {
        host_.read_heap(monotonic_ns());
        python_modules = python_modules_();
        if (python_modules > 0)
            python_modules_read_.store(true, std::memory_order_relaxed);
    } else if (python_modules_read_.load(std::memory_order_relaxed)) {
        // Checked reads only, safe where this runs (a signal handler's _exit): what tells an exit that
        // tore the interpreter down (0: finalized) from one that did not (os._exit in a worker).
        python_modules = python_modules_();
    }
    if (moment != SampleMoment::Exit)
        lock_.lock();
    else if (!lock_.try_lock())
        return;
    SpinGuard guard(lock_, std::adopt_lock);
    if (writer_ == nullptr || !writer_->mapped())
        return;
    format::FileHeader& header = *writer_->header();
    if (header.timeline_capacity < 2)
        return;
    TimelineSample sample{};
    sample.time_ns = monotonic_ns();
    host_.read(sample.host, sample.rss_bytes, sample.time_ns, moment);
    sample.events = __atomic_load_n(&header.ring_head, __ATOMIC_RELAXED);
    sample.python_modules = python_modules;
    for (uint32_t slot = 0; slot < format::kAccountingSlots; ++slot)
        for (uint32_t kind = 0; kind < format::kKindCount; ++kind)
            sample.kind_bytes[kind] +=
                __atomic_load_n(&header.accounting.live_bytes[slot][kind], __ATOMIC_RELAXED);
    for (uint32_t device = 0; device < format::kMaxDevices; ++device) {
        sample.device_bytes[device] = format::device_memory_live(header.accounting, device);
        sample.device_block_bytes[device] = __atomic_load_n(
            &header.accounting.live_bytes[device][static_cast<size_t>(format::MemoryKind::Block)],
            __ATOMIC_RELAXED);
        const format::DeviceMemoryView& view = header.device_memory[device];
        const uint64_t total = __atomic_load_n(&view.total_bytes, __ATOMIC_ACQUIRE);
        if (total == 0)
            continue;
        const uint64_t free_bytes = __atomic_load_n(&view.last_free_bytes, __ATOMIC_RELAXED);
        sample.driver_used_bytes[device] = total - std::min(total, free_bytes);
        sample.driver_said_ns[device] = __atomic_load_n(&view.last_time_ns, __ATOMIC_RELAXED);
    }
    if (stored_ == header.timeline_capacity)
        thin();
    sample.commit = __atomic_add_fetch(&header.timeline_samples, 1, __ATOMIC_RELAXED);
    copy_sample(writer_->timeline()[stored_++], sample);
}

void TimelineSampler::stop() {
    SpinGuard guard(lock_);
    __atomic_add_fetch(&generation_, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&writer_, nullptr, __ATOMIC_RELEASE);
}

void TimelineSampler::forget_after_fork() {
    __atomic_store_n(&writer_, nullptr, __ATOMIC_RELEASE);
    stored_ = 0;
    lock_.reset_after_fork();
}

} // namespace gpuleak
