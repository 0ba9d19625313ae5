// What the stand-ins for NVIDIA's libraries that cannot run on the simulated device share. The real ones
// initialise through the driver's private interfaces (cuGetExportTable), which a simulation cannot
// offer, and then fail with errors that do not say why; each stand-in refuses every call with its
// library's "not supported" status instead, and its first refusal says why on stderr. Their version
// queries answer the toolkit's release, as the programs that load them check it.
#pragma once

#include <atomic>
#include <cstddef>
#include <string>

namespace gpuleak::sim {

class RefusedLibrary {
  public:
    // `name` as its users know it ("cuFFT"), `status` the name of what every refused call returns.
    RefusedLibrary(const char* name, const char* status);

    // Says on stderr, the first time a function is refused, that the library does not run on the
    // simulated device, naming the function.
    void explain(const char* function);

    // What the library's error-text functions answer: "cuFFT does not run on the gpuleak simulated CUDA
    // device".
    const char* refusal() const { return refusal_.c_str(); }

  private:
    const char* name_;
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

// Defines `name` (its prototype `ret name params` from the library's header) to refuse with `status`. The
// stand-ins define their refused functions with the full parameter lists, which they never read, and
// whatever the library still exports, deprecated or not.
#pragma GCC diagnostic ignored "-Wunused-parameter"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#define GPULEAK_REFUSED_FUNCTION(library, status, ret, name, params)                                         \
    ret name params {                                                                                        \
        (library).explain(#name);                                                                            \
        return status;                                                                                       \
    }
