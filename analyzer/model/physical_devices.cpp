#include "model/physical_devices.h"

#include <fmt/format.h>

namespace gpuleak::analyzer {

PhysicalDevices::PhysicalDevices(const std::vector<const ProcessModel*>& models) {
    for (const ProcessModel* model : models)
        for (const DeviceContext& context : model->contexts)
            if (!context.uuid.empty())
                uuids_[{model->header.hostname, context.device}].insert(context.uuid);
}

std::string PhysicalDevices::key(const ProcessModel& model, int device) const {
    const std::string& host = model.header.hostname;
    if (const DeviceContext* context = context_on(model, device);
        context != nullptr && !context->uuid.empty())
        return host + '/' + context->uuid;
    const auto seen = uuids_.find({host, device});
    if (seen != uuids_.end() && seen->second.size() == 1)
        return host + '/' + *seen->second.begin();
    return fmt::format("{}/#{}", host, device);
}

} // namespace gpuleak::analyzer
