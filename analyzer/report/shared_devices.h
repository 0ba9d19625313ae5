// The devices that several processes of a run used: one device's memory is shared by all of them (ranks,
// DataLoader workers that touched CUDA, anything else of the run), while torch.cuda.memory_allocated() in
// each counts only its own. What each held there, and what they held together.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/physical_devices.h"

namespace gpuleak::analyzer {

struct DeviceUser {
    size_t process = 0; // among the run's reports
    int pid = 0;
    bool dataloader_worker = false;
    int device = 0; // its number of the device
    uint64_t peak_reserved = 0;
    uint64_t final_reserved = 0;
    bool context = false;
    std::string context_site; // where it made its context (StackFrames::describe); empty where unknown
};

struct SharedDevice {
    std::string host;
    std::string uuid;              // empty where the traces do not say
    int device = 0;                // its first user's number of it
    std::vector<DeviceUser> users; // most reserved at their peaks first
    // The most its users reserved there at one time: their timelines summed on the host's clock.
    uint64_t peak_reserved = 0;
    size_t contexts = 0;
    std::optional<uint64_t> capacity; // as a user's driver said
};

// Where process `process` (of those the facts are of) made `context`, in StackFrames::describe's words;
// empty where unknown.
using SiteOfContext = std::function<std::string(size_t process, const DeviceContext& context)>;

// Process `process`'s timeline on its device `device` (DeviceSummary::timeline): asked of the devices
// that several processes shared only, as a model kept as a summary has none (ReportSet).
using DeviceTimelineOf = std::function<std::vector<DevicePoint>(size_t process, int device)>;
// What `model` has of its device `device`'s timeline; empty where it held nothing there.
std::vector<DevicePoint> device_timeline(const ProcessModel& model, int device);

// The devices that two processes or more of `models` used (held memory or made a context on), by host and
// device; none where there are none. DeviceUser::process indexes `models`.
std::shared_ptr<const std::vector<SharedDevice>>
shared_devices(const std::vector<const ProcessModel*>& models, const PhysicalDevices& devices,
               const SiteOfContext& context_site, const DeviceTimelineOf& timeline_of);

} // namespace gpuleak::analyzer
