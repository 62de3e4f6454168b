// libtessera_torch.so: loading it into a process that has libtorch (a
// Python torch process: ctypes.CDLL after `import torch`) makes every CPU
// allocation of libtorch from then on come from tessera's registered CPU
// allocator (tessera::c10::install_cpu_allocator, include/tessera/c10_allocator.hpp).
// See docs/HOSTS.md.
//
// TESSERA_TORCH_PRIORITY (0..255, default 1) is the c10::SetAllocator
// priority of the install at load time: c10's own CPU allocator has 0, so
// any value replaces it, and a host allocator installed with a higher
// priority stays. Anything else than a number in 0..255 means 1.
#include "tessera/c10_allocator.hpp"

#include <cstdlib>

extern "C" {

/**
 * Installs tessera's CPU allocator for libtorch again with `priority` (the
 * load-time install used TESSERA_TORCH_PRIORITY); returns the c10 allocator.
 */
__attribute__((visibility("default"))) void* tessera_torch_install(uint8_t priority) {
    return tessera::c10::install_cpu_allocator(priority);
}

/** Whether libtorch's CPU allocator is tessera's now (1) or not (0). */
__attribute__((visibility("default"))) int tessera_torch_is_installed(void) {
    return ::c10::GetAllocator(::c10::DeviceType::CPU) == tessera::c10::allocator_for(nullptr);
}
}

namespace {

uint8_t load_priority() {
    const char* env = std::getenv("TESSERA_TORCH_PRIORITY");
    if (env == nullptr || *env == '\0') {
        return 1;
    }
    char* end = nullptr;
    long v = std::strtol(env, &end, 10);
    return (*end == '\0' && v >= 0 && v <= 255) ? uint8_t(v) : 1;
}

// The static initialiser: runs when the library is loaded.
struct InstallAtLoad {
    InstallAtLoad() { tessera::c10::install_cpu_allocator(load_priority()); }
} install_at_load;

}  // namespace
