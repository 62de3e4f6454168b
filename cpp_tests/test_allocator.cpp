// C++ allocator plugins (tessera::AllocatorBase): lifetime (deleted after
// the last handle and the last allocation), failures reaching the caller
// with their message, copies, registry installation, load-time
// registration with TESSERA_REGISTER_CPP_ALLOCATOR, statistics, and the
// Allocator class over C plugins and the caching layer.
#include "tessera.hpp"

#include "check.hpp"

#include <atomic>
#include <cstdlib>
#include <new>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using tessera::Allocator;
using tessera::AllocatorBase;
using tessera::DataPtr;
using tessera::Device;
using tessera::Returns;
using tessera::Storage;

namespace {

// Every block starts with a header naming its allocator, so the deleter
// (which only receives the context) can update the allocator's counts.
class Tracking : public AllocatorBase {
  public:
    explicit Tracking(int* destroyed) : destroyed_(destroyed) {}
    ~Tracking() override { ++*destroyed_; }

    Returns<DataPtr> allocate(size_t nbytes, Device device) override {
        Block* block = static_cast<Block*>(std::malloc(sizeof(Block) + nbytes));
        if (block == nullptr) {
            return fail<DataPtr>(TSR_ERR_OUT_OF_MEMORY, "malloc failed");
        }
        block->owner = this;
        live.fetch_add(1);
        last_device = device;
        return DataPtr(block + 1, block, &Tracking::free_block, device);
    }

    Returns<void> copy(void* dst, const void* src, size_t nbytes) override {
        copies.fetch_add(1);
        return AllocatorBase::copy(dst, src, nbytes);
    }

    std::string name() const override { return "tracking"; }

    std::atomic<int> live{0};
    std::atomic<int> copies{0};
    Device last_device;

  private:
    struct alignas(16) Block {
        Tracking* owner;
    };

    static void free_block(void* ctx) {
        Block* block = static_cast<Block*>(ctx);
        block->owner->live.fetch_sub(1);
        std::free(block);
    }

    template <class T>
    static Returns<T> fail(TsrStatus status, const char* message) {
#if TESSERA_EXCEPTIONS
        throw tessera::Error(status, message);
#else
        return tessera::Result<T>::failure(status, message);
#endif
    }

    int* destroyed_;
};

// Refuses every request, the way each error mode reports failures.
class Refusing : public AllocatorBase {
  public:
    Returns<DataPtr> allocate(size_t nbytes, Device) override {
        std::string message = "pool exhausted at " + std::to_string(nbytes) + " bytes";
#if TESSERA_EXCEPTIONS
        throw tessera::Error(TSR_ERR_OUT_OF_MEMORY, message);
#else
        return tessera::Result<DataPtr>::failure(TSR_ERR_OUT_OF_MEMORY, message);
#endif
    }
    Returns<void> copy(void*, const void*, size_t) override {
#if TESSERA_EXCEPTIONS
        throw tessera::Error(TSR_ERR_DEVICE, "no copies here");
#else
        return tessera::Result<void>::failure(TSR_ERR_DEVICE, "no copies here");
#endif
    }
    std::string name() const override { return "refusing"; }
};

// Registered at load time for TSR_XPU with priority 3.
class LoadTime : public AllocatorBase {
  public:
    Returns<DataPtr> allocate(size_t nbytes, Device device) override {
        void* p = nbytes ? std::malloc(nbytes) : nullptr;
        return DataPtr(p, p, &std::free, device);
    }
    std::string name() const override { return "registered-at-load"; }
};

}  // namespace

TESSERA_REGISTER_CPP_ALLOCATOR(LoadTime, TSR_XPU, 3);

TEST(plugin_deleted_after_last_handle_and_last_storage) {
    int destroyed = 0;
    Allocator a = OK(Allocator::make<Tracking>(&destroyed));
    CHECK_EQ(std::string(a.name()), "tracking");
    CHECK_EQ(a.use_count(), 1u);
    {
        Storage s = OK(Storage::create(100, a));
        CHECK(s.allocator() == a);
        size_t with_storage = a.use_count();  // the storage holds references too
        CHECK(with_storage > 1u);
        Allocator copy = a;
        CHECK_EQ(a.use_count(), with_storage + 1);
        tessera::WeakAllocator weak = a.downgrade();
        a.reset();
        copy.reset();
        CHECK_EQ(destroyed, 0);  // the storage still uses it
        CHECK(!weak.expired());
        Allocator back = weak.lock();
        CHECK(back == s.allocator());
        CHECK_EQ(back.use_count(), with_storage);
    }
    CHECK_EQ(destroyed, 1);  // exactly once, after the storage
}

TEST(plugin_outlives_a_bare_allocation) {
    int destroyed = 0;
    DataPtr memory;
    {
        Allocator a = OK(Allocator::make<Tracking>(&destroyed));
        memory = OK(a.allocate(48));
        CHECK(memory.data() != nullptr);
        TsrAllocatorStats stats = OK(a.stats());
        CHECK_EQ(stats.allocated_bytes, 48u);
        CHECK_EQ(stats.num_allocs, 1u);
    }
    CHECK_EQ(destroyed, 0);
    memory.reset();
    CHECK_EQ(destroyed, 1);
}

TEST(plugin_stats_copies_and_devices) {
    int destroyed = 0;
    {
        auto owned = std::make_unique<Tracking>(&destroyed);
        Tracking* plugin = owned.get();
        Allocator a = OK(Allocator::from(std::move(owned)));
        CHECK(!owned);
        {
            Storage s1 = OK(Storage::create(64, a, /*resizable=*/true));
            Storage s2 = OK(Storage::create(32, a));
            CHECK_EQ(plugin->live.load(), 2);
            TsrAllocatorStats stats = OK(a.stats());
            CHECK_EQ(stats.allocated_bytes, 96u);
            CHECK_EQ(stats.num_allocs, 2u);
            CHECK_EQ(stats.num_frees, 0u);
            OK(s1.resize(128));  // allocates anew and copies through the plugin
            CHECK_EQ(plugin->copies.load(), 1);
            stats = OK(a.stats());
            CHECK_EQ(stats.allocated_bytes, 160u);
            CHECK_EQ(stats.peak_bytes, 224u);
            a.reset_peak();
            CHECK_EQ(OK(a.stats()).peak_bytes, 160u);
            char src[8] = "abcdefg";
            char dst[8] = {0};
            OK(a.copy_data(dst, src, sizeof src));
            CHECK_EQ(std::string(dst), "abcdefg");
            CHECK_EQ(plugin->copies.load(), 2);
        }
        CHECK_EQ(plugin->live.load(), 0);
        TsrAllocatorStats stats = OK(a.stats());
        CHECK_EQ(stats.allocated_bytes, 0u);
        CHECK_EQ(stats.num_frees, 3u);

        // Installed for a device type, the plugin serves storages of that
        // type and receives their device.
        OK(a.install(TSR_PRIVATE_USE1, 5));
        CHECK(Allocator::registered(TSR_PRIVATE_USE1) == a);
        CHECK_EQ(Allocator::priority(TSR_PRIVATE_USE1), 5u);
        Storage on_device = OK(Storage::create(16, Device(TSR_PRIVATE_USE1, 2)));
        CHECK(plugin->last_device == Device(TSR_PRIVATE_USE1, 2));
        CHECK(on_device.device() == Device(TSR_PRIVATE_USE1, 2));

        // A lower priority does not replace it.
        int other_destroyed = 0;
        Allocator other = OK(Allocator::make<Tracking>(&other_destroyed));
        OK(other.install(TSR_PRIVATE_USE1, 4));
        CHECK(Allocator::registered(TSR_PRIVATE_USE1) == a);
        CHECK_FAILS(a.install(static_cast<TsrDeviceType>(99), 0), TSR_ERR_INVALID_ARGUMENT,
                    "tsr_set_allocator");
    }
    CHECK_EQ(destroyed, 0);  // the registry keeps it
}

TEST(plugin_used_from_several_threads) {
    int destroyed = 0;
    {
        Allocator a = OK(Allocator::make<Tracking>(&destroyed));
        std::vector<std::thread> threads;
        std::atomic<int> failures{0};
        for (int t = 0; t < 4; t++) {
            threads.emplace_back([&a, &failures] {
                for (int i = 0; i < 500; i++) {
#if TESSERA_EXCEPTIONS
                    Storage s = Storage::create(8 + static_cast<size_t>(i), a);
#else
                    auto r = Storage::create(8 + static_cast<size_t>(i), a);
                    if (!r.ok()) {
                        failures++;
                        continue;
                    }
                    Storage s = std::move(r).value();
#endif
                    if (!s.data()) {
                        failures++;
                    }
                }
            });
        }
        for (std::thread& t : threads) {
            t.join();
        }
        CHECK_EQ(failures.load(), 0);
        TsrAllocatorStats stats = OK(a.stats());
        CHECK_EQ(stats.num_allocs, 2000u);
        CHECK_EQ(stats.num_frees, 2000u);
        CHECK_EQ(stats.allocated_bytes, 0u);
    }
    CHECK_EQ(destroyed, 1);
}

TEST(plugin_failures_reach_the_caller) {
    Allocator a = OK(Allocator::make<Refusing>());
    CHECK_FAILS(Storage::create(4096, a), TSR_ERR_OUT_OF_MEMORY,
                "pool exhausted at 4096 bytes");
    CHECK_FAILS(a.allocate(12), TSR_ERR_OUT_OF_MEMORY, "allocator 'refusing' failed to allocate");
    char buffer[4];
    CHECK_FAILS(a.copy_data(buffer, "abc", 4), TSR_ERR_DEVICE, "no copies here");
    TsrAllocatorStats stats = OK(a.stats());
    CHECK_EQ(stats.num_failed, 2u);
    CHECK_EQ(stats.num_allocs, 0u);
    CHECK_FAILS(Allocator::from(nullptr), TSR_ERR_NULL_POINTER, "plugin is NULL");
}

#if TESSERA_EXCEPTIONS
namespace {
class Throwing : public AllocatorBase {
  public:
    explicit Throwing(int kind) : kind_(kind) {}
    Returns<DataPtr> allocate(size_t, Device) override {
        if (kind_ == 0) {
            throw std::bad_alloc();
        }
        if (kind_ == 1) {
            throw std::runtime_error("disk on fire");
        }
        throw 42;
    }

  private:
    int kind_;
};
}  // namespace

TEST(plugin_exceptions_become_statuses) {
    Allocator bad_alloc = Allocator::make<Throwing>(0);
    CHECK_FAILS(bad_alloc.allocate(8), TSR_ERR_OUT_OF_MEMORY, "std::bad_alloc");
    Allocator runtime = Allocator::make<Throwing>(1);
    CHECK_FAILS(runtime.allocate(8), TSR_ERR_INTERNAL, "disk on fire");
    Allocator other = Allocator::make<Throwing>(2);
    CHECK_FAILS(other.allocate(8), TSR_ERR_INTERNAL, "not a std::exception");
    CHECK_EQ(std::string(other.name()), "c++ plugin");  // the default name
}
#endif

TEST(load_time_registration) {
    Allocator registered = Allocator::registered(TSR_XPU);
    CHECK(registered.defined());
    CHECK_EQ(std::string(registered.name()), "registered-at-load");
    CHECK_EQ(Allocator::priority(TSR_XPU), 3u);
    Storage s = OK(Storage::create(24, Device(TSR_XPU, 0)));
    CHECK(s.allocator() == registered);
    CHECK_EQ(OK(registered.stats()).allocated_bytes, 24u);
}

namespace {
TsrStatus c_allocate(void* self, size_t nbytes, TsrDevice device, TsrDataPtr* out) {
    ++*static_cast<int*>(self);
    void* p = std::malloc(nbytes ? nbytes : 1);
    *out = TsrDataPtr{p, p, &std::free, device};
    return TSR_OK;
}
void c_release(void* self) { *static_cast<int*>(self) = -1; }
}  // namespace

TEST(c_plugin_and_builtin_allocators) {
    int calls = 0;
    TsrAllocatorVTable vtable{};
    vtable.struct_size = sizeof vtable;
    vtable.name = "c-plugin";
    vtable.allocate = &c_allocate;
    vtable.release = &c_release;
    {
        Allocator c = OK(Allocator::from_vtable(vtable, &calls));
        CHECK_EQ(std::string(c.name()), "c-plugin");
        DataPtr p = OK(c.allocate(10));
        CHECK_EQ(calls, 1);
        CHECK_FAILS(c.raw_allocate(8), TSR_ERR_UNSUPPORTED, "tsr_allocator_raw_allocate");
    }
    CHECK_EQ(calls, -1);  // released
    TsrAllocatorVTable no_allocate{};
    no_allocate.struct_size = sizeof no_allocate;
    CHECK_FAILS(Allocator::from_vtable(no_allocate, nullptr), TSR_ERR_INVALID_ARGUMENT,
                "allocate is NULL");

    Allocator cpu = Allocator::cpu();
    CHECK(cpu.defined());
    CHECK(!cpu.is_caching());
    CHECK(cpu == Allocator::cpu());  // always the same object
    CHECK(!Allocator::registered(TSR_HIP).defined());

    Allocator caching = OK(Allocator::caching(cpu));
    CHECK(caching.is_caching());
    CHECK(OK(caching.inner()) == cpu);
    {
        Storage s = OK(Storage::create(1000, caching));
        TsrCachingStats stats = OK(caching.caching_stats());
        CHECK_EQ(stats.all.active_blocks.current, 1u);
        CHECK_EQ(stats.all.segments.current, 1u);
    }
    TsrCachingStats cached = OK(caching.caching_stats());
    CHECK_EQ(cached.all.active_blocks.current, 0u);
    CHECK_EQ(cached.all.segments.current, 1u);  // kept in the cache
    {
        Storage s = OK(Storage::create(3000, caching));
        CHECK_EQ(OK(caching.caching_stats()).all.active_bytes.peak, 3072u);
    }
    OK(caching.reset_caching_peaks());
    CHECK_EQ(OK(caching.caching_stats()).all.active_bytes.peak, 0u);
    OK(caching.empty_cache());
    CHECK_EQ(OK(caching.caching_stats()).all.segments.current, 0u);
    CHECK_FAILS(cpu.empty_cache(), TSR_ERR_INVALID_ARGUMENT, "not a caching allocator");
    CHECK_FAILS(cpu.caching_stats(), TSR_ERR_INVALID_ARGUMENT, "");
}

TEST(cpu_allocator_options) {
    OK(Allocator::set_cpu_zero_fill(true));
    CHECK_FAILS(Allocator::set_cpu_junk_fill(true), TSR_ERR_INVALID_ARGUMENT,
                "tsr_cpu_allocator_set_junk_fill");
    Storage s = OK(Storage::create(256));
    bool zero = true;
    for (size_t i = 0; i < 256; i++) {
        zero = zero && static_cast<unsigned char*>(s.data())[i] == 0;
    }
    CHECK(zero);
    OK(Allocator::set_cpu_zero_fill(false));
}
