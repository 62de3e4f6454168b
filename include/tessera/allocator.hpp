/**
 * @file tessera/allocator.hpp
 * @brief Allocator (built-in, registered, C and C++ plugins, caching),
 * AllocatorBase and TESSERA_REGISTER_CPP_ALLOCATOR.
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_ALLOCATOR_HPP
#define TESSERA_ALLOCATOR_HPP

#include "../tessera.h"
#include "error.hpp"
#include "types.hpp"
#include "ref.hpp"
#include "handle.hpp"
#include "data_ptr.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <utility>

/** @cond TESSERA_INTERNAL */
#define TESSERA_CPP_CONCAT_INNER_(a, b) a##b
#define TESSERA_CPP_CONCAT_(a, b) TESSERA_CPP_CONCAT_INNER_(a, b)
/** @endcond */

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

class AllocatorBase;

/**
 * A refcounted allocator (TsrAllocator) with value semantics: the built-in
 * CPU one, the one registered for a device type, a C plugin, a C++ plugin
 * deriving from AllocatorBase, or a caching layer over another.
 */
class Allocator : public Handle<Allocator, TsrAllocator> {
  public:
    /** Empty. */
    Allocator() noexcept = default;

    /** Holds `ref`. */
    explicit Allocator(Ref<TsrAllocator> ref) noexcept : Handle(std::move(ref)) {}

    /** Takes over a reference the caller owns. */
    static Allocator adopt(TsrAllocator* handle) noexcept {
        return Allocator(Ref<TsrAllocator>::adopt(handle));
    }

    /** The built-in CPU allocator (whatever is registered for TSR_CPU). */
    static Allocator cpu() noexcept { return adopt(tsr_cpu_allocator()); }

    /** The allocator registered for `device_type`, or an empty Allocator if none. */
    static Allocator registered(TsrDeviceType device_type) noexcept {
        return adopt(tsr_get_allocator(device_type));
    }

    /** The priority of the registry slot of `device_type` (0 when empty). */
    static uint8_t priority(TsrDeviceType device_type) noexcept {
        return tsr_get_allocator_priority(device_type);
    }

    /** An allocator from a C plugin table (copied) and its `self` (tsr_allocator_new). */
    static Returns<Allocator> from_vtable(const TsrAllocatorVTable& vtable, void* self) {
        TsrAllocator* out = nullptr;
        TsrStatus status = tsr_allocator_new(&vtable, self, &out);
        return detail::finish(status, adopt(out));
    }

    /**
     * An allocator over a C++ plugin. tessera owns `plugin` from then on
     * and deletes it after the last handle and the last allocation made
     * by it are gone. A NULL plugin fails with TSR_ERR_NULL_POINTER.
     */
    static Returns<Allocator> from(std::unique_ptr<AllocatorBase> plugin);

    /** An allocator over a new `A` (derived from AllocatorBase) built from `args`. */
    template <class A, class... Args>
    static Returns<Allocator> make(Args&&... args) {
        static_assert(std::is_base_of<AllocatorBase, A>::value,
                      "tessera::Allocator::make<A>: A must derive from tessera::AllocatorBase");
        return from(std::unique_ptr<AllocatorBase>(new A(std::forward<Args>(args)...)));
    }

    /**
     * A caching allocator over `inner` (tsr_caching_allocator_new);
     * `options` nullptr: defaults.
     */
    static Returns<Allocator> caching(const Allocator& inner,
                                      const TsrCachingOptions* options = nullptr) {
        TsrAllocator* out = nullptr;
        TsrStatus status = tsr_caching_allocator_new(inner.get(), options, &out);
        return detail::finish(status, adopt(out));
    }

    /** The CUDA device allocator (cached); fails without CUDA. */
    static Returns<Allocator> cuda() {
        TsrAllocator* out = nullptr;
        TsrStatus status = tsr_cuda_allocator(&out);
        return detail::finish(status, adopt(out));
    }

    /** The CUDA device allocator without caching (one cuMemAlloc per allocation); fails without CUDA. */
    static Returns<Allocator> cuda_raw() {
        TsrAllocator* out = nullptr;
        TsrStatus status = tsr_cuda_raw_allocator(&out);
        return detail::finish(status, adopt(out));
    }

    /** The pinned host-memory allocator (cached); fails without CUDA. */
    static Returns<Allocator> cuda_pinned() {
        TsrAllocator* out = nullptr;
        TsrStatus status = tsr_cuda_pinned_allocator(&out);
        return detail::finish(status, adopt(out));
    }

    /**
     * Installs this allocator for `device_type` if `priority` >= the slot's
     * (tsr_set_allocator); succeeds whether or not the slot changed.
     */
    Returns<void> install(TsrDeviceType device_type, uint8_t priority = 0) const {
        return detail::check(tsr_set_allocator(device_type, get(), priority));
    }

    /** The allocator's name (nullptr when empty). */
    const char* name() const noexcept { return tsr_allocator_name(get()); }

    /** Allocates `nbytes` on the allocator's default device. */
    Returns<DataPtr> allocate(size_t nbytes) const {
        TsrDataPtr out{nullptr, nullptr, nullptr, {TSR_CPU, -1}};
        TsrStatus status = tsr_allocator_allocate(get(), nbytes, &out);
        return detail::finish(status, DataPtr(out));
    }

    /** Allocates `nbytes` and returns the bare address (needs a raw deleter); free it with raw_deallocate. */
    Returns<void*> raw_allocate(size_t nbytes) const {
        void* out = nullptr;
        TsrStatus status = tsr_allocator_raw_allocate(get(), nbytes, &out);
        return detail::finish(status, out);
    }

    /** Frees an address from raw_allocate of this allocator. */
    Returns<void> raw_deallocate(void* ptr) const {
        return detail::check(tsr_allocator_raw_deallocate(get(), ptr));
    }

    /** Copies `nbytes` with the allocator's copy function. */
    Returns<void> copy_data(void* dst, const void* src, size_t nbytes) const {
        return detail::check(tsr_allocator_copy_data(get(), dst, src, nbytes));
    }

    /** The allocator's statistics. */
    Returns<TsrAllocatorStats> stats() const {
        TsrAllocatorStats out{};
        TsrStatus status = tsr_allocator_stats(get(), &out);
        return detail::finish(status, out);
    }

    /** Sets the peak to the current allocated bytes. */
    void reset_peak() const noexcept { tsr_allocator_reset_peak(get()); }

    /** Whether this is a caching allocator. */
    bool is_caching() const noexcept { return tsr_allocator_is_caching(get()); }

    /** A caching allocator's statistics (fails for other allocators). */
    Returns<TsrCachingStats> caching_stats() const {
        TsrCachingStats out{};
        out.struct_size = sizeof(TsrCachingStats);
        TsrStatus status = tsr_caching_allocator_stats(get(), &out);
        return detail::finish(status, out);
    }

    /** Returns a caching allocator's unused cached segments to its inner allocator. */
    Returns<void> empty_cache() const {
        return detail::check(tsr_caching_allocator_empty_cache(get()));
    }

    /** Sets every peak of a caching allocator (its caching statistics and stats()) to the current value. */
    Returns<void> reset_caching_peaks() const {
        return detail::check(tsr_caching_allocator_reset_peak(get()));
    }

    /** The allocator a caching allocator caches for. */
    Returns<Allocator> inner() const {
        TsrAllocator* out = nullptr;
        TsrStatus status = tsr_caching_allocator_inner(get(), &out);
        return detail::finish(status, adopt(out));
    }

    /** Zero-fills new memory of the built-in CPU allocator (process-wide). */
    static Returns<void> set_cpu_zero_fill(bool on) {
        return detail::check(tsr_cpu_allocator_set_zero_fill(on));
    }

    /** Fills new memory of the built-in CPU allocator with a junk pattern (process-wide). */
    static Returns<void> set_cpu_junk_fill(bool on) {
        return detail::check(tsr_cpu_allocator_set_junk_fill(on));
    }

    /** Transparent huge pages for built-in CPU allocations of 2 MiB or more (process-wide). */
    static Returns<void> set_cpu_huge_pages(bool on) {
        return detail::check(tsr_cpu_allocator_set_huge_pages(on));
    }
};

/** A weak reference to an Allocator. */
using WeakAllocator = Weak<Allocator>;

/**
 * The base class of allocators written in C++. Derive from it, implement
 * allocate(), and hand an instance to Allocator::from / Allocator::make or
 * register a type with TESSERA_REGISTER_CPP_ALLOCATOR. tessera then owns
 * the object: it is deleted (through the virtual destructor) once the last
 * Allocator handle and the last allocation it made are gone, so deleters
 * may use it until then.
 *
 * Every member may be called from any thread at once. Failures: throw
 * tessera::Error (or any exception: std::bad_alloc becomes
 * TSR_ERR_OUT_OF_MEMORY, others TSR_ERR_INTERNAL) when TESSERA_EXCEPTIONS
 * is 1; return a failed Result when it is 0. The exception never crosses
 * into the library: it becomes the status and message the caller sees.
 */
class AllocatorBase {
  public:
    virtual ~AllocatorBase() = default;

    AllocatorBase(const AllocatorBase&) = delete;
    AllocatorBase& operator=(const AllocatorBase&) = delete;

    /**
     * Allocates `nbytes` on `device` (the device the storage asks for; for
     * Allocator::allocate, the CPU). Returns the memory with the deleter
     * that frees it; nbytes may be 0.
     */
    virtual Returns<DataPtr> allocate(size_t nbytes, Device device) = 0;

    /** Copies `nbytes` from `src` to `dst` (both this allocator's memory or host memory). Default: memcpy. */
    virtual Returns<void> copy(void* dst, const void* src, size_t nbytes) {
        if (nbytes > 0) {
            std::memcpy(dst, src, nbytes);
        }
#if !TESSERA_EXCEPTIONS
        return Result<void>();
#endif
    }

    /** The allocator's name (tessera copies it when the allocator is created). */
    virtual std::string name() const { return "c++ plugin"; }

  protected:
    /** Only derived classes are constructed. */
    AllocatorBase() = default;
};

/** @cond TESSERA_INTERNAL */
namespace detail {

#if TESSERA_EXCEPTIONS
/** Records "<what> threw <kind>: <message>" as the last error; returns `status`. */
inline TsrStatus record_exception(TsrStatus status, const char* what, const char* kind,
                                  const char* message) noexcept {
    char text[512];
    std::snprintf(text, sizeof text, "C++ allocator %s threw %s: %s", what, kind, message);
    return tsr_set_last_error(status, text);
}

/** Turns the exception being handled into a status and last-error message. */
inline TsrStatus status_from_exception(const char* what) noexcept {
    try {
        throw;
    } catch (const Error& e) {
        return tsr_set_last_error(e.status(), e.what());
    } catch (const std::bad_alloc& e) {
        return record_exception(TSR_ERR_OUT_OF_MEMORY, what, "std::bad_alloc", e.what());
    } catch (const std::exception& e) {
        return record_exception(TSR_ERR_INTERNAL, what, "an exception", e.what());
    } catch (...) {
        return record_exception(TSR_ERR_INTERNAL, what, "an exception", "not a std::exception");
    }
}
#endif

inline TsrStatus plugin_allocate(void* self, size_t nbytes, TsrDevice device,
                                 TsrDataPtr* out) noexcept {
    AllocatorBase* plugin = static_cast<AllocatorBase*>(self);
#if TESSERA_EXCEPTIONS
    try {
        DataPtr memory = plugin->allocate(nbytes, Device(device));
        *out = memory.release();
        return TSR_OK;
    } catch (...) {
        return status_from_exception("allocate");
    }
#else
    Result<DataPtr> memory = plugin->allocate(nbytes, Device(device));
    if (!memory.ok()) {
        return tsr_set_last_error(memory.status(), memory.message().c_str());
    }
    *out = memory.value().release();
    return TSR_OK;
#endif
}

inline TsrStatus plugin_copy(void* self, void* dst, const void* src, size_t nbytes) noexcept {
    AllocatorBase* plugin = static_cast<AllocatorBase*>(self);
#if TESSERA_EXCEPTIONS
    try {
        plugin->copy(dst, src, nbytes);
        return TSR_OK;
    } catch (...) {
        return status_from_exception("copy");
    }
#else
    Result<void> done = plugin->copy(dst, src, nbytes);
    if (!done.ok()) {
        return tsr_set_last_error(done.status(), done.message().c_str());
    }
    return TSR_OK;
#endif
}

inline void plugin_release(void* self) noexcept { delete static_cast<AllocatorBase*>(self); }

/** The C table of a C++ plugin; `name` must live until tessera copied it. */
inline TsrAllocatorVTable plugin_vtable(const char* name) noexcept {
    TsrAllocatorVTable table;
    std::memset(&table, 0, sizeof table);
    table.struct_size = static_cast<uint32_t>(sizeof(TsrAllocatorVTable));
    table.name = name;
    table.allocate = &plugin_allocate;
    table.raw_deleter = nullptr;
    table.copy_data = &plugin_copy;
    table.release = &plugin_release;
    return table;
}

/** Registers a new A at load time (TESSERA_REGISTER_CPP_ALLOCATOR). */
template <class A>
class CppAllocatorRegistrar {
  public:
    CppAllocatorRegistrar(const char* type_name, TsrDeviceType device_type,
                          uint8_t priority) noexcept {
#if TESSERA_EXCEPTIONS
        try {
            install(device_type, priority);
        } catch (const std::exception& e) {
            std::fprintf(stderr, "tessera: TESSERA_REGISTER_CPP_ALLOCATOR(%s) failed: %s\n",
                         type_name, e.what());
        } catch (...) {
            std::fprintf(stderr,
                         "tessera: TESSERA_REGISTER_CPP_ALLOCATOR(%s) failed: unknown exception\n",
                         type_name);
        }
#else
        (void)type_name;
        install(device_type, priority);
#endif
    }

  private:
    static void install(TsrDeviceType device_type, uint8_t priority) {
        std::unique_ptr<AllocatorBase> plugin(new A());
        std::string name = plugin->name();
        TsrAllocatorVTable table = plugin_vtable(name.c_str());
        // tessera owns the plugin once the call succeeds (even when a
        // higher-priority allocator keeps the slot: it then releases it
        // at once); on failure it never saw it, and it is deleted here.
        // tsr_register_allocator prints failures to stderr itself.
        if (tsr_register_allocator(device_type, &table, plugin.get(), priority) == TSR_OK) {
            (void)plugin.release();
        }
    }
};

}  // namespace detail
/** @endcond */

inline Returns<Allocator> Allocator::from(std::unique_ptr<AllocatorBase> plugin) {
    if (!plugin) {
        return detail::fail<Allocator>(TSR_ERR_NULL_POINTER,
                                       "tessera::Allocator::from: plugin is NULL");
    }
    std::string name = plugin->name();
    TsrAllocatorVTable table = detail::plugin_vtable(name.c_str());
    TsrAllocator* out = nullptr;
    TsrStatus status = tsr_allocator_new(&table, plugin.get(), &out);
    if (status == TSR_OK) {
        (void)plugin.release();  // tessera deletes it through plugin_release
    }
    return detail::finish(status, adopt(out));
}

/**
 * Registers a new `Type` (default-constructed, derived from
 * tessera::AllocatorBase) for `device_type` with `priority` when the program
 * or shared object is loaded (tsr_set_allocator's priority rule), through a
 * static object. Use it once, at namespace scope in one .cpp file, followed
 * by a semicolon. A failure (a throwing constructor, an invalid device type)
 * is printed to stderr; the registry then keeps its previous allocator.
 */
#define TESSERA_REGISTER_CPP_ALLOCATOR(Type, device_type, priority)                 \
    static const ::tessera::detail::CppAllocatorRegistrar<Type> TESSERA_CPP_CONCAT_( \
        tessera_cpp_allocator_registrar_, __LINE__)(#Type, (device_type), (priority))

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

namespace std {

/** Hashes an Allocator by its handle. */
template <>
struct hash<tessera::Allocator> {
    /** The hash of `a`'s handle. */
    size_t operator()(const tessera::Allocator& a) const noexcept {
        return hash<TsrAllocator*>()(a.get());
    }
};

}  // namespace std

#endif  // TESSERA_ALLOCATOR_HPP
