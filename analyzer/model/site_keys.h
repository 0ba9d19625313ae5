// Which stacks are one site of the report (a leak origin, a growth site, what was held at a failure).
//
// A stack with Python frames belongs to the site of its whole Python stack: the file, qualified name
// and line of every Python frame, innermost first. Stacks that differ only in native frames (the CUDA
// call reached through another library path, another allocator size class) are then one site, while
// the same line reached from different callers stays apart. A stack without Python frames, or with one
// whose code object was not recorded, is a site on its own, as a native program's stacks are.
#pragma once

#include <cstdint>
#include <unordered_map>

#include "read/trace_reader.h"

namespace gpuleak::analyzer {

class SiteKeys {
  public:
    explicit SiteKeys(const TraceReader& trace);
    // Equal for stacks of the same site, and unequal for any two other stacks.
    [[nodiscard]] uint64_t of(uint32_t stack_id) const;

  private:
    std::unordered_map<uint32_t, uint64_t> python_sites_;
};

} // namespace gpuleak::analyzer
