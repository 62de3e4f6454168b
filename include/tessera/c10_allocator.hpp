/**
 * @file tessera/c10_allocator.hpp
 * @brief A c10::Allocator over a tessera allocator, for hosts built against
 * libtorch, and tessera::c10::install_cpu_allocator.
 *
 * Not part of tessera.hpp: include it on its own, in a translation unit
 * that is compiled against libtorch's headers (it includes
 * <c10/core/Allocator.h>), and link libtessera and libc10.
 *
 * @code
 * #include "tessera/c10_allocator.hpp"
 * // Every CPU allocation of libtorch from now on comes from tessera's
 * // registered CPU allocator.
 * c10::Allocator* a = tessera::c10::install_cpu_allocator();
 * @endcode
 *
 * The memory libtorch gets is then counted in tessera's statistics
 * (tsr_allocator_stats), recorded by tsr_memory_record_history, shown in
 * tsr_memory_snapshot, and seen by tsr_set_memory_reporter.
 */
#ifndef TESSERA_C10_ALLOCATOR_HPP
#define TESSERA_C10_ALLOCATOR_HPP

#include "../tessera.h"

#include <c10/core/Allocator.h>
#include <c10/core/Device.h>
#include <c10/util/Exception.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

namespace tessera {
namespace c10 {

/** c10's CPU alignment (c10::gAlignment): every block this allocator hands libtorch starts on it. */
constexpr std::size_t kCpuAlignment = 64;

/**
 * A c10::Allocator whose memory comes from a tessera allocator: a given
 * handle (a C plugin, a caching allocator over one, the built-in CPU
 * allocator), or, without one, the allocator tessera's registry holds for
 * TSR_CPU at the time of each allocation.
 *
 * The c10::DataPtr it returns frees through tessera: its context and
 * deleter are those of the tessera allocation (which keeps its allocator
 * alive until freed), so blocks stay valid and free correctly after
 * libtorch's allocator is switched again. Blocks start on 64 bytes; a
 * block the tessera allocator hands back less aligned is given back and
 * replaced by an over-allocated one whose context remembers the original.
 *
 * A failed tessera allocation raises c10::OutOfMemoryError (a
 * c10::Error: torch.OutOfMemoryError in Python) with tessera's status and
 * message; nothing is allocated then.
 *
 * Raw allocation (c10's raw_allocate / raw_deallocate, which oneDNN uses)
 * works when the allocator hands out blocks whose context is their
 * address (the built-in CPU allocator does): raw_deleter() is then the
 * deleter the first probe allocation carried, and any block with another
 * deleter is wrapped, so a raw free can never reach the wrong allocator.
 *
 * Objects have static lifetime, as c10::SetAllocator requires: make them
 * with install_cpu_allocator or allocator_for, never delete them.
 */
class TesseraAllocator final : public ::c10::Allocator {
  public:
    /**
     * Over `allocator` (a new reference is kept for the object's life), or
     * over the registry's CPU allocator at each allocation when NULL.
     */
    explicit TesseraAllocator(TsrAllocator* allocator) : handle_(allocator) {
        if (handle_ != nullptr) {
            tsr_allocator_incref(handle_);
        }
        probe_raw_deleter();
    }

    TesseraAllocator(const TesseraAllocator&) = delete;
    TesseraAllocator& operator=(const TesseraAllocator&) = delete;

    /** The handle given at creation (NULL: the registry's CPU allocator). */
    TsrAllocator* handle() const noexcept { return handle_; }

    ::c10::DataPtr allocate(std::size_t nbytes) override {
        TsrDataPtr dp{nullptr, nullptr, nullptr, {TSR_CPU, -1}};
        TsrStatus status;
        if (handle_ != nullptr) {
            status = tsr_allocator_allocate(handle_, nbytes, &dp);
        } else {
            TsrAllocator* current = tsr_get_allocator(TSR_CPU);
            status = tsr_allocator_allocate(current, nbytes, &dp);
            tsr_allocator_decref(current);
        }
        if (status != TSR_OK) {
            fail(nbytes, status);
        }
        const ::c10::Device cpu(::c10::DeviceType::CPU);
        if (dp.data == nullptr) {
            // Zero bytes: nothing to align; free whatever context came back.
            tsr_data_ptr_free(&dp);
            return ::c10::DataPtr(nullptr, nullptr, nullptr, cpu);
        }
        const bool aligned = reinterpret_cast<std::uintptr_t>(dp.data) % kCpuAlignment == 0;
        if (aligned && (raw_deleter_ == nullptr || (dp.ctx == dp.data && dp.deleter == raw_deleter_))) {
            // The common case: tessera's own context and deleter, no extra work.
            return ::c10::DataPtr(dp.data, dp.deleter != nullptr ? dp.ctx : nullptr, dp.deleter, cpu);
        }
        if (!aligned) {
            tsr_data_ptr_free(&dp);
            if (nbytes > SIZE_MAX - kCpuAlignment) {
                fail(nbytes, TSR_ERR_OUT_OF_MEMORY);
            }
            if (handle_ != nullptr) {
                status = tsr_allocator_allocate(handle_, nbytes + kCpuAlignment - 1, &dp);
            } else {
                TsrAllocator* current = tsr_get_allocator(TSR_CPU);
                status = tsr_allocator_allocate(current, nbytes + kCpuAlignment - 1, &dp);
                tsr_allocator_decref(current);
            }
            if (status != TSR_OK) {
                fail(nbytes, status);
            }
        }
        return wrap(dp);
    }

    ::c10::DeleterFnPtr raw_deleter() const override { return raw_deleter_; }

    void copy_data(void* dest, const void* src, std::size_t count) const override {
        if (count == 0) {
            return;
        }
        if (handle_ != nullptr) {
            TsrStatus status = tsr_allocator_copy_data(handle_, dest, src, count);
            TORCH_CHECK(status == TSR_OK, "tessera allocator '", tsr_allocator_name(handle_),
                        "': copy of ", count, " bytes failed: ", tsr_status_name(status), ": ",
                        tsr_last_error_message());
            return;
        }
        default_copy_data(dest, src, count);
    }

  private:
    /** What a wrapped block's c10 context points at: the tessera allocation. */
    struct Wrapped {
        TsrDataPtr original;
    };

    static void free_wrapped(void* ctx) {
        Wrapped* w = static_cast<Wrapped*>(ctx);
        tsr_data_ptr_free(&w->original);
        delete w;
    }

    /** A c10::DataPtr over `dp` at its first 64-byte boundary, freeing `dp` through tessera. */
    static ::c10::DataPtr wrap(TsrDataPtr dp) {
        Wrapped* w = new (std::nothrow) Wrapped{dp};
        if (w == nullptr) {
            tsr_data_ptr_free(&dp);
            TORCH_CHECK_WITH(OutOfMemoryError, false,
                             "tessera c10 allocator: out of memory for a block context");
        }
        std::uintptr_t address = reinterpret_cast<std::uintptr_t>(dp.data);
        address = (address + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
        return ::c10::DataPtr(reinterpret_cast<void*>(address), w, &free_wrapped,
                              ::c10::Device(::c10::DeviceType::CPU));
    }

    [[noreturn]] void fail(std::size_t nbytes, TsrStatus status) const {
        const char* message = tsr_last_error_message();
        TsrAllocator* named = handle_ != nullptr ? handle_ : tsr_get_allocator(TSR_CPU);
        const char* name = tsr_allocator_name(named);
        std::string who = name != nullptr ? name : "?";
        if (handle_ == nullptr && named != nullptr) {
            tsr_allocator_decref(named);
        }
        TORCH_CHECK_WITH(OutOfMemoryError, false, "tessera allocator '", who, "' failed to allocate ",
                         nbytes, " bytes (", tsr_status_name(status), "): ",
                         message != nullptr ? message : "");
    }

    /**
     * raw_deleter(): the deleter of a probe allocation whose context is its
     * address, else NULL (raw allocation unsupported, c10's default).
     */
    void probe_raw_deleter() {
        TsrDataPtr dp{nullptr, nullptr, nullptr, {TSR_CPU, -1}};
        TsrAllocator* a = handle_ != nullptr ? handle_ : tsr_get_allocator(TSR_CPU);
        if (a != nullptr && tsr_allocator_allocate(a, kCpuAlignment, &dp) == TSR_OK) {
            if (dp.data != nullptr && dp.ctx == dp.data && dp.deleter != nullptr &&
                reinterpret_cast<std::uintptr_t>(dp.data) % kCpuAlignment == 0) {
                raw_deleter_ = dp.deleter;
            }
            tsr_data_ptr_free(&dp);
        }
        if (handle_ == nullptr && a != nullptr) {
            tsr_allocator_decref(a);
        }
    }

    TsrAllocator* handle_;
    ::c10::DeleterFnPtr raw_deleter_ = nullptr;
};

/**
 * The c10 allocator over `allocator` (NULL: the registry's CPU allocator at
 * each allocation): one object per handle for the life of the process, so
 * asking twice gives the same pointer.
 */
inline TesseraAllocator* allocator_for(TsrAllocator* allocator = nullptr) {
    static std::mutex lock;
    // Never destroyed: c10 keeps raw pointers to its allocators until exit.
    static std::vector<TesseraAllocator*>* made = new std::vector<TesseraAllocator*>();
    std::lock_guard<std::mutex> guard(lock);
    for (TesseraAllocator* a : *made) {
        if (a->handle() == allocator) {
            return a;
        }
    }
    TesseraAllocator* a = new TesseraAllocator(allocator);
    made->push_back(a);
    return a;
}

/**
 * Every CPU allocation of libtorch from now on comes from `allocator` (NULL:
 * the registry's CPU allocator at the time of each allocation); returns the
 * c10 allocator. c10::SetAllocator's rule applies: a c10 allocator already
 * installed with a higher priority stays (c10's default has 0). Installing
 * again is harmless. Like c10::SetAllocator, call it before other threads
 * allocate through libtorch.
 */
inline ::c10::Allocator* install_cpu_allocator(uint8_t priority = 1, TsrAllocator* allocator = nullptr) {
    TesseraAllocator* a = allocator_for(allocator);
    ::c10::SetAllocator(::c10::DeviceType::CPU, a, priority);
    return a;
}

}  // namespace c10
}  // namespace tessera

#endif  // TESSERA_C10_ALLOCATOR_HPP
