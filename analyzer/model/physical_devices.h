// Which device of which process of a run is which physical device. A device's UUID (from a process's
// context there) names it whatever each process numbers it (CUDA_VISIBLE_DEVICES); a process that made no
// context on a device it used (a forked worker runs in a copy of its parent's) or whose trace predates
// them numbers it as the host's other processes do where they agree on what that number is.
#pragma once

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/process_model.h"

namespace gpuleak::analyzer {

class PhysicalDevices {
  public:
    explicit PhysicalDevices(const std::vector<const ProcessModel*>& models);

    // The same for one physical device, different for two: "<host>/GPU-..." or "<host>/#<ordinal>".
    [[nodiscard]] std::string key(const ProcessModel& model, int device) const;

  private:
    // {host, ordinal} -> the UUIDs the host's processes gave that number.
    std::map<std::pair<std::string, int>, std::set<std::string>> uuids_;
};

} // namespace gpuleak::analyzer
