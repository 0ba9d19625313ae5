#include "timeline_sampler.h"

#include "monotonic_clock.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

namespace gpuleak {

using format::TimelineSample;

namespace {

uint64_t resident_bytes() {
    int fd = ::open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    char text[128];
    ssize_t n = ::read(fd, text, sizeof text - 1);
    ::close(fd);
    if (n <= 0)
        return 0;
    text[n] = '\0';
    // "size resident shared text lib data dt", in pages.
    const char* resident = std::strchr(text, ' ');
    if (resident == nullptr)
        return 0;
    return std::strtoull(resident + 1, nullptr, 10) * static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
}

void copy_sample(TimelineSample& slot, const TimelineSample& sample) {
    // Acquire keeps the field stores below from being ordered before the invalidation.
    __atomic_exchange_n(&slot.commit, 0, __ATOMIC_ACQUIRE);
    std::memcpy(reinterpret_cast<uint8_t*>(&slot) + sizeof slot.commit,
                reinterpret_cast<const uint8_t*>(&sample) + sizeof sample.commit,
                sizeof sample - sizeof sample.commit);
    __atomic_store_n(&slot.commit, sample.commit, __ATOMIC_RELEASE);
}

} // namespace

void TimelineSampler::start(TraceWriter& writer, void (*on_wake)()) {
    writer_ = &writer;
    on_wake_ = on_wake;
    stored_ = 0;
    lock_.reset_after_fork();
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
    if (pthread_create(&thread, &attributes, run, this) == 0)
        pthread_setname_np(thread, "gpuleak-sampler");
    pthread_attr_destroy(&attributes);
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    sample_now();
}

void* TimelineSampler::run(void* self) {
    auto* sampler = static_cast<TimelineSampler*>(self);
    recalibrate_monotonic_clock();
    for (;;) {
        TraceWriter* writer = __atomic_load_n(&sampler->writer_, __ATOMIC_ACQUIRE);
        if (writer == nullptr || !writer->mapped())
            return nullptr;
        uint64_t interval = __atomic_load_n(&writer->header()->timeline_interval_ns, __ATOMIC_RELAXED);
        timespec delay{static_cast<time_t>(interval / 1000000000ull),
                       static_cast<long>(interval % 1000000000ull)};
        while (clock_nanosleep(CLOCK_MONOTONIC, 0, &delay, &delay) == EINTR) {
        }
        recalibrate_monotonic_clock();
        sampler->sample_now();
        writer->prepare_ring_ahead();
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

void TimelineSampler::sample_now() {
    SpinGuard guard(lock_);
    if (writer_ == nullptr || !writer_->mapped())
        return;
    format::FileHeader& header = *writer_->header();
    if (header.timeline_capacity < 2)
        return;
    TimelineSample sample{};
    sample.time_ns = monotonic_ns();
    sample.rss_bytes = resident_bytes();
    for (uint32_t slot = 0; slot < format::kAccountingSlots; ++slot) {
        for (uint32_t kind = 0; kind < format::kKindCount; ++kind) {
            uint64_t bytes = __atomic_load_n(&header.accounting.live_bytes[slot][kind], __ATOMIC_RELAXED);
            sample.kind_bytes[kind] += bytes;
            if (slot < format::kMaxDevices &&
                format::occupies_device_memory(static_cast<format::MemoryKind>(kind)))
                sample.device_bytes[slot] += bytes;
        }
    }
    if (stored_ == header.timeline_capacity)
        thin();
    sample.commit = __atomic_add_fetch(&header.timeline_samples, 1, __ATOMIC_RELAXED);
    copy_sample(writer_->timeline()[stored_++], sample);
}

void TimelineSampler::forget_after_fork() {
    __atomic_store_n(&writer_, nullptr, __ATOMIC_RELEASE);
    stored_ = 0;
    lock_.reset_after_fork();
}

} // namespace gpuleak
