// The map of loaded objects (path, build id, address range) written to the trace, so that the
// analyzer can symbolize return addresses after the process is gone. Objects loaded later (dlopen)
// are added when a new stack mentions an address no recorded object covers.
#pragma once

#include <cstdint>
#include <link.h>

#include "recording/loaded_object.h"
#include "recording/spin_lock.h"
#include "recording/trace_writer.h"

namespace gpuleak {

class ModuleMap {
  public:
    // Records every object loaded now, and flags the trace as simulated when the CUDA libraries are
    // gpuleak's simulated device.
    bool attach(TraceWriter& writer);
    void detach();

    // Records objects loaded since, when any of `frames` lies outside every recorded object.
    void cover(const uint64_t* frames, uint32_t count);

  private:
    static constexpr uint32_t kMaxModules = 8192;

    bool known(uint64_t address) const;
    void refresh(); // appends the objects not recorded yet
    static int visit(dl_phdr_info* info, size_t size, void* data);

    TraceWriter* writer_ = nullptr;
    AddressRange* ranges_ = nullptr;
    uint32_t range_count_ = 0;
    SpinLock lock_;
};

} // namespace gpuleak
