// What the stand-ins for NVIDIA's libraries share: refusing what cannot run on the simulated device,
// and answering their version. Libraries that cannot run here initialise, on a GPU, through the
// driver's private interfaces (cuGetExportTable), which a simulation cannot offer, and then fail with
// errors that do not say why; their stand-ins (refused/) refuse every call with the library's own
// status instead, and the first refusal says why on stderr. The simulated cuBLAS refuses its batched
// solvers the same way.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace gpuleak::sim {

class RefusedLibrary {
  public:
    // `what` as its users know it ("cuFFT"), `status` the name of what a refused call returns.
    RefusedLibrary(const char* what, const char* status);

    // Says on stderr, the first time a call is refused, that `what` cannot run on the simulated device,
    // naming the call.
    void explain(const char* function);

    // Whether a call was refused yet.
    bool refused() const { return explained_.load(std::memory_order_relaxed); }

    // What the library's error texts answer for the refusal: "cuFFT cannot run on the gpuleak simulated
    // CUDA device".
    const char* refusal() const { return refusal_.c_str(); }

  private:
    const char* what_;
    const char* status_;
    std::string refusal_;
    std::atomic<bool> explained_{false};
};

// Copies `text` into `buffer` of `size` bytes, cut to fit and terminated.
void copy_text(const char* text, char* buffer, std::size_t size);

struct Version {
    int major, minor, patch;
};

// What a library's GetProperty answers for libraryPropertyType `type` (MAJOR_VERSION, MINOR_VERSION,
// PATCH_LEVEL): false for another type or no `value`.
bool read_version_property(int type, Version version, int* value);

} // namespace gpuleak::sim

// Defines `name` to succeed with `status`, releasing nothing: the stand-in never made anything.
#define GPULEAK_RELEASED_FUNCTION(status, ret, name, params)                                                 \
    ret name params {                                                                                        \
        return status;                                                                                       \
    }

// Defines `name` (its prototype `ret name params`) to refuse with `status`.
#define GPULEAK_REFUSED_FUNCTION(library, status, ret, name, params)                                         \
    ret name params {                                                                                        \
        (library).explain(#name);                                                                            \
        return status;                                                                                       \
    }
