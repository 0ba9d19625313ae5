#include "report/shared_devices.h"

#include <algorithm>
#include <map>
#include <tuple>

namespace gpuleak::analyzer {

namespace {

// The most the users held at one time: their timelines as steps on the host's wall clock (the one a merge
// of machines' reports has too), each process's memory gone at its end (the driver frees what a process
// held when it ends).
uint64_t peak_together(const SharedDevice& shared, const std::vector<const ProcessModel*>& models,
                       const DeviceTimelineOf& timeline_of) {
    struct Step {
        uint64_t time_ns;
        size_t user;
        uint64_t reserved;
    };
    std::vector<Step> steps;
    for (size_t user = 0; user < shared.users.size(); ++user) {
        const ProcessModel& model = *models[shared.users[user].process];
        const uint64_t start = model.header.start_realtime_ns;
        for (const DevicePoint& point : timeline_of(shared.users[user].process, shared.users[user].device))
            steps.push_back({start + point.time_ns, user, point.reserved});
        steps.push_back({start + model.duration_ns + 1, user, 0});
    }
    std::stable_sort(steps.begin(), steps.end(),
                     [](const Step& a, const Step& b) { return a.time_ns < b.time_ns; });
    std::vector<uint64_t> now(shared.users.size(), 0);
    uint64_t total = 0;
    uint64_t most = 0;
    for (const Step& step : steps) {
        total = total - now[step.user] + step.reserved;
        now[step.user] = step.reserved;
        most = std::max(most, total);
    }
    return most;
}

} // namespace

std::vector<DevicePoint> device_timeline(const ProcessModel& model, int device) {
    const DeviceSummary* summary = device_summary(model, device);
    return summary != nullptr ? summary->timeline : std::vector<DevicePoint>();
}

std::shared_ptr<const std::vector<SharedDevice>>
shared_devices(const std::vector<const ProcessModel*>& models, const PhysicalDevices& physical,
               const SiteOfContext& context_site, const DeviceTimelineOf& timeline_of) {
    std::map<std::string, SharedDevice> by_key;
    std::vector<std::string> order;
    for (size_t process = 0; process < models.size(); ++process) {
        const ProcessModel& model = *models[process];
        for (const int device : devices_used(model)) {
            const std::string key = physical.key(model, device);
            auto [entry, added] = by_key.try_emplace(key);
            SharedDevice& shared = entry->second;
            if (added) {
                order.push_back(key);
                shared.host = model.header.hostname;
                shared.device = device;
            }
            DeviceUser user;
            user.process = process;
            user.pid = model.header.pid;
            user.dataloader_worker = model.role.kind == RoleKind::DataLoaderWorker;
            user.device = device;
            if (const DeviceSummary* summary = device_summary(model, device)) {
                user.peak_reserved = summary->peak_reserved;
                user.final_reserved = summary->final_reserved;
                if (!shared.capacity)
                    shared.capacity = summary->capacity;
            }
            if (const DeviceContext* context = context_on(model, device)) {
                user.context = true;
                if (shared.uuid.empty())
                    shared.uuid = context->uuid;
                user.context_site = context_site(process, *context);
            }
            shared.users.push_back(std::move(user));
        }
    }
    auto devices = std::make_shared<std::vector<SharedDevice>>();
    for (const std::string& key : order) {
        SharedDevice& shared = by_key[key];
        if (shared.users.size() < 2)
            continue;
        std::stable_sort(
            shared.users.begin(), shared.users.end(),
            [](const DeviceUser& a, const DeviceUser& b) { return a.peak_reserved > b.peak_reserved; });
        for (const DeviceUser& user : shared.users)
            shared.contexts += user.context ? 1 : 0;
        shared.peak_reserved = peak_together(shared, models, timeline_of);
        devices->push_back(std::move(shared));
    }
    if (devices->empty())
        return nullptr;
    std::stable_sort(devices->begin(), devices->end(), [](const SharedDevice& a, const SharedDevice& b) {
        return std::tie(a.host, a.device) < std::tie(b.host, b.device);
    });
    return devices;
}

} // namespace gpuleak::analyzer
