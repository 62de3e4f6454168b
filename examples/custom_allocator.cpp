/*
 * A C++ allocator plugin: a size-class pool that keeps freed blocks and
 * hands them out again, written as a class deriving from
 * tessera::AllocatorBase.
 *
 * - TESSERA_REGISTER_CPP_ALLOCATOR installs one instance for TSR_CPU with
 *   priority 1 when the program loads: every CPU tensor below comes from
 *   it, and its counters show the reuse.
 * - A second instance, made with tessera::Allocator::make, shows the
 *   lifetime rule: tessera owns the object and deletes it once the last
 *   handle and the last storage it allocated are gone, not before.
 * - A failing request shows how a plugin's exception reaches the caller:
 *   as a tessera::Error with the plugin's message.
 *
 * Build and run (from the repository root, after ./scripts/quickstart.sh,
 * which builds target/release and its libtessera.so.0.MINOR link):
 *   g++ -std=c++17 -Wall -Wextra -pedantic -Iinclude examples/custom_allocator.cpp \
 *       -Ltarget/release -ltessera -Wl,-rpath,$PWD/target/release -o /tmp/custom_allocator
 *   /tmp/custom_allocator
 */
#include "tessera.hpp"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace {

// Blocks of 2^k bytes (k >= 6) are kept on a free list per k after they
// are freed. Each block starts with a 64-byte header naming its pool and
// size class, so the deleter, which receives only the block, finds both.
class PoolAllocator : public tessera::AllocatorBase {
  public:
    explicit PoolAllocator(std::string name) : name_(std::move(name)) {}

    // tessera deletes the pool after the last handle and the last block;
    // a pool installed in the registry lives until the program exits.
    ~PoolAllocator() override {
        size_t kept = 0;
        for (std::vector<Header*>& list : free_lists_) {
            kept += list.size();
            for (Header* h : list) {
                ::operator delete(h, std::align_val_t{64});
            }
        }
        std::printf("[%s] destroyed: %zu cached blocks returned to the system\n", name_.c_str(),
                    kept);
    }

    tessera::DataPtr allocate(size_t nbytes, tessera::Device device) override {
        size_t k = size_class(nbytes);
        if (k >= kClasses) {
            throw tessera::Error(TSR_ERR_OUT_OF_MEMORY,
                                 name_ + ": " + std::to_string(nbytes) +
                                     " bytes is above the largest size class (" +
                                     std::to_string(size_t(1) << (kClasses - 1)) + " bytes)");
        }
        Header* h = nullptr;
        {
            std::lock_guard<std::mutex> lock(mutex_);
            requests_++;
            if (!free_lists_[k].empty()) {
                h = free_lists_[k].back();
                free_lists_[k].pop_back();
                reused_++;
            }
        }
        if (h == nullptr) {
            void* block = ::operator new(sizeof(Header) + (size_t(1) << k), std::align_val_t{64},
                                         std::nothrow);
            if (block == nullptr) {
                throw std::bad_alloc();
            }
            h = new (block) Header{this, k};
        }
        return tessera::DataPtr(h + 1, h, &PoolAllocator::give_back, device);
    }

    std::string name() const override { return name_; }

    void print_counters() {
        std::lock_guard<std::mutex> lock(mutex_);
        size_t cached = 0;
        for (const std::vector<Header*>& list : free_lists_) {
            cached += list.size();
        }
        std::printf("[%s] %zu requests, %zu served from the pool, %zu blocks cached\n",
                    name_.c_str(), requests_, reused_, cached);
    }

  private:
    static constexpr size_t kClasses = 24;  // up to 8 MiB

    struct alignas(64) Header {
        PoolAllocator* pool;
        size_t size_class;
    };

    static size_t size_class(size_t nbytes) {
        size_t k = 6;
        while (k < kClasses && (size_t(1) << k) < nbytes) {
            k++;
        }
        return k;
    }

    // The deleter: back on its free list (never throws; the free list has
    // room reserved for every block of its class that exists).
    static void give_back(void* ctx) {
        Header* h = static_cast<Header*>(ctx);
        PoolAllocator* pool = h->pool;
        std::lock_guard<std::mutex> lock(pool->mutex_);
        std::vector<Header*>& list = pool->free_lists_[h->size_class];
        if (list.size() < list.capacity() || reserve_one(list)) {
            list.push_back(h);
        } else {
            ::operator delete(h, std::align_val_t{64});
        }
    }

    static bool reserve_one(std::vector<Header*>& list) noexcept {
        try {
            list.reserve(list.size() + 8);
            return true;
        } catch (...) {
            return false;
        }
    }

    std::string name_;
    std::mutex mutex_;
    std::vector<Header*> free_lists_[kClasses];
    size_t requests_ = 0;
    size_t reused_ = 0;
};

// The registered instance: TESSERA_REGISTER_CPP_ALLOCATOR default-constructs
// it (at load time, before main) and tessera owns it; it remembers itself so
// that main can print its counters.
class CpuPool : public PoolAllocator {
  public:
    CpuPool() : PoolAllocator("cpu-pool") { instance = this; }
    static CpuPool* instance;
};
CpuPool* CpuPool::instance = nullptr;

void print_stats(const tessera::Allocator& a) {
    TsrAllocatorStats s = a.stats();
    std::printf("  tessera stats of '%s': %llu allocs, %llu frees, %llu B live, %llu B peak, "
                "%llu failed\n",
                a.name(), static_cast<unsigned long long>(s.num_allocs),
                static_cast<unsigned long long>(s.num_frees),
                static_cast<unsigned long long>(s.allocated_bytes),
                static_cast<unsigned long long>(s.peak_bytes),
                static_cast<unsigned long long>(s.num_failed));
}

}  // namespace

TESSERA_REGISTER_CPP_ALLOCATOR(CpuPool, TSR_CPU, 1);

int main() try {
    tessera::Allocator cpu = tessera::Allocator::registered(TSR_CPU);
    std::printf("CPU allocator: %s (priority %u)\n", cpu.name(),
                static_cast<unsigned>(tessera::Allocator::priority(TSR_CPU)));
    // Three rounds of the same temporaries: the first round allocates, the
    // next ones are served from the free lists.
    for (int round = 1; round <= 3; round++) {
        {
            tessera::Tensor a = tessera::Tensor::full({64, 64}, round);          // 16 KiB
            tessera::Tensor b = tessera::Tensor::full({1000}, 0.5, TSR_DOUBLE);  // 8 KiB class
            tessera::Tensor c = a.transpose(0, 1).contiguous();                  // a 16 KiB copy
            std::printf("round %d: c[0][1] = %g; ", round,
                        static_cast<double>(c.data<float>()[1]));
        }  // a, b and c freed: their blocks go back to the pool
        CpuPool::instance->print_counters();
    }
    print_stats(cpu);

    // A pool of our own: tessera deletes it after the last storage.
    std::printf("a second pool, made with Allocator::make:\n");
    tessera::Storage kept;
    {
        tessera::Allocator own = tessera::Allocator::make<PoolAllocator>("own-pool");
        kept = tessera::Storage::create(1 << 20, own);
        print_stats(own);
        std::printf("  dropping the last handle; a storage still uses the pool\n");
    }
    std::printf("  dropping the storage\n");
    kept = tessera::Storage();

    // A request the plugin refuses: its exception becomes the caller's error.
    try {
        tessera::Tensor huge = tessera::Tensor::empty({64, 1024, 1024});  // 256 MiB
    } catch (const tessera::Error& e) {
        std::printf("a 256 MiB tensor: %s\n  %s\n", e.status_name(), e.what());
    }
    print_stats(cpu);
    return 0;
} catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
}
