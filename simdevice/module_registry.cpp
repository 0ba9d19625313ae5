#include "module_registry.h"

#include <cstdlib>
#include <mutex>
#include <unordered_map>

namespace gpuleak::sim {
namespace {

struct Variable {
    void* storage;
    std::size_t size;
};

// Never destroyed: libraries unregister their modules from their own destructors, in any order against ours.
struct Registry {
    std::mutex mutex;
    std::unordered_map<const void*, RegisteredKernel> kernels;
    std::unordered_map<const void*, Variable> variables;
};

Registry& registry() {
    static auto* instance = new Registry;
    return *instance;
}

} // namespace

void register_kernel(const void* host_function, const void* image, const char* device_name) {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    r.kernels.insert_or_assign(host_function, RegisteredKernel{image, device_name});
}

bool registered_kernel(const void* host_function, RegisteredKernel& kernel) {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    const auto found = r.kernels.find(host_function);
    if (found == r.kernels.end()) {
        return false;
    }
    kernel = found->second;
    return true;
}

bool known_kernel(const void* host_function) {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    return r.kernels.contains(host_function);
}

void register_variable(const void* host_variable, std::size_t size) {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    if (!r.variables.contains(host_variable)) {
        r.variables.emplace(host_variable, Variable{std::calloc(1, size == 0 ? 1 : size), size});
    }
}

void* variable_storage(const void* host_variable, std::size_t& size) {
    Registry& r = registry();
    const std::lock_guard lock(r.mutex);
    const auto found = r.variables.find(host_variable);
    if (found == r.variables.end()) {
        return nullptr;
    }
    size = found->second.size;
    return found->second.storage;
}

} // namespace gpuleak::sim
