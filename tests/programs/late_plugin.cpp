// Loads a plugin with dlopen after its first allocation (as frameworks load CUDA kernels and
// backends on demand); the plugin allocates too, and sub-allocates blocks through the public C API.
#include <cstdio>
#include <dlfcn.h>

extern "C" int cudaMalloc(void** pointer, size_t size);

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: late_plugin PLUGIN.so\n");
        return 2;
    }
    void* early = nullptr;
    if (cudaMalloc(&early, 1 << 20) != 0)
        return 3;
    void* plugin = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (plugin == nullptr) {
        std::fprintf(stderr, "late_plugin: %s\n", dlerror());
        return 4;
    }
    auto run = reinterpret_cast<int (*)()>(dlsym(plugin, "plugin_run"));
    return run != nullptr ? run() : 5;
}
