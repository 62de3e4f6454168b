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

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>
#include <vector>

namespace tessera {
namespace c10 {

/** c10's CPU alignment (c10::gAlignment): every block this allocator hands libtorch starts on it. */
constexpr std::size_t kCpuAlignment = 64;

/** @cond TESSERA_INTERNAL */
namespace detail {

// c10's raw_deallocate calls raw_deleter() with whatever raw_allocate
// returned, NULL for zero bytes included, and a tessera deleter must not
// see NULL (the built-in CPU allocator's reads the block's header). So
// raw_deleter() is a trampoline that skips NULL, frees a mapped block
// (below) through the map, and calls the tessera deleter in its slot for
// the others: c10's DeleterFnPtr carries no state, hence one function per
// slot. Allocators with the same deleter share a slot.
constexpr int kRawSlots = 8;

inline std::atomic<TsrDeleterFn>* raw_slots() {
    static std::atomic<TsrDeleterFn> slots[kRawSlots] = {};
    return slots;
}

// Blocks whose tessera context is not their address (a caching
// allocator's, most plugins', realigned ones) are handed to libtorch with
// context == address, as c10's own CPU blocks are: raw allocation (oneDNN)
// and copy-on-write clones need that. Their tessera DataPtr waits here,
// keyed by the address libtorch sees, until free_mapped gives it back.
struct MappedBlocks {
    static constexpr std::size_t kShards = 64;
    struct Shard {
        std::mutex lock;
        std::unordered_map<void*, TsrDataPtr> blocks;
    };
    Shard shards[kShards];
    std::atomic<std::size_t> count{0};

    Shard& shard(void* address) {
        return shards[(reinterpret_cast<std::uintptr_t>(address) >> 6) % kShards];
    }
};

inline MappedBlocks& mapped_blocks() {
    // Never destroyed: libtorch frees blocks during exit, after static destructors.
    static MappedBlocks* blocks = new MappedBlocks();
    return *blocks;
}

/** Records `dp` under `address`; false (nothing recorded) when out of memory. */
inline bool map_block(void* address, const TsrDataPtr& dp) noexcept {
    MappedBlocks& m = mapped_blocks();
    MappedBlocks::Shard& shard = m.shard(address);
    try {
        std::lock_guard<std::mutex> guard(shard.lock);
        shard.blocks.emplace(address, dp);
    } catch (...) {
        return false;
    }
    m.count.fetch_add(1, std::memory_order_release);
    return true;
}

/** Frees the block recorded under `address`; false when there is none. */
inline bool free_if_mapped(void* address) noexcept {
    MappedBlocks& m = mapped_blocks();
    if (m.count.load(std::memory_order_acquire) == 0) {
        return false;
    }
    MappedBlocks::Shard& shard = m.shard(address);
    TsrDataPtr dp;
    {
        std::lock_guard<std::mutex> guard(shard.lock);
        auto it = shard.blocks.find(address);
        if (it == shard.blocks.end()) {
            return false;
        }
        dp = it->second;
        shard.blocks.erase(it);
    }
    m.count.fetch_sub(1, std::memory_order_relaxed);
    tsr_data_ptr_free(&dp);
    return true;
}

/** The deleter of mapped blocks, and the raw deleter of allocators that only make those. */
inline void free_mapped(void* address) {
    if (address != nullptr) {
        free_if_mapped(address);
    }
}

template <int N>
void raw_free(void* ptr) {
    if (ptr != nullptr && !free_if_mapped(ptr)) {
        raw_slots()[N].load(std::memory_order_acquire)(ptr);
    }
}

/** The trampoline of a slot holding `deleter` (claimed if need be), or NULL when all are taken. */
inline ::c10::DeleterFnPtr raw_trampoline(TsrDeleterFn deleter) {
    static const ::c10::DeleterFnPtr trampolines[kRawSlots] = {
        &raw_free<0>, &raw_free<1>, &raw_free<2>, &raw_free<3>,
        &raw_free<4>, &raw_free<5>, &raw_free<6>, &raw_free<7>};
    static std::mutex lock;
    std::lock_guard<std::mutex> guard(lock);
    std::atomic<TsrDeleterFn>* slots = raw_slots();
    for (int i = 0; i < kRawSlots; ++i) {
        TsrDeleterFn held = slots[i].load(std::memory_order_relaxed);
        if (held == deleter) {
            return trampolines[i];
        }
        if (held == nullptr) {
            slots[i].store(deleter, std::memory_order_release);
            return trampolines[i];
        }
    }
    return nullptr;
}

}  // namespace detail
/** @endcond */

/**
 * A c10::Allocator whose memory comes from a tessera allocator: a given
 * handle (a C plugin, a caching allocator over one, the built-in CPU
 * allocator), or, without one, the allocator tessera's registry holds for
 * TSR_CPU at the time of each allocation.
 *
 * The c10::DataPtr it returns frees through tessera, so blocks stay valid
 * and free correctly after libtorch's allocator is switched again, and
 * each tessera allocation keeps its allocator alive until freed. Its
 * context is always its address, as c10's own CPU blocks have it, which
 * raw allocation (c10's raw_allocate / raw_deallocate, what oneDNN uses)
 * and c10's copy-on-write clones need:
 *
 * - a block whose tessera context is its address (the built-in CPU
 *   allocator's) goes to libtorch as it is, with tessera's deleter;
 * - any other block (a caching allocator's, most plugins') is recorded in
 *   a sharded address map and handed out with a deleter that takes it out
 *   of the map and frees it through tessera: a lock and a hash lookup more
 *   per allocation and per free.
 *
 * Blocks start on 64 bytes; a block the tessera allocator hands back less
 * aligned is given back and replaced by one 63 bytes larger, mapped.
 *
 * A failed tessera allocation raises c10::OutOfMemoryError (a
 * c10::Error: torch.OutOfMemoryError in Python) with tessera's status and
 * message; nothing is allocated then.
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

    /**
     * A block of `nbytes` from the tessera allocator, 64-byte aligned, as
     * a c10::DataPtr that frees through tessera; a failure is c10's
     * OutOfMemoryError naming the size and tessera's message.
     */
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
        if (aligned && raw_target_ != nullptr && dp.ctx == dp.data && dp.deleter == raw_target_) {
            // The built-in CPU allocator: tessera's own context and deleter,
            // the context its address, no extra work.
            return ::c10::DataPtr(dp.data, dp.ctx, dp.deleter, cpu);
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
        std::uintptr_t address = reinterpret_cast<std::uintptr_t>(dp.data);
        address = (address + kCpuAlignment - 1) / kCpuAlignment * kCpuAlignment;
        void* data = reinterpret_cast<void*>(address);
        if (!detail::map_block(data, dp)) {
            tsr_data_ptr_free(&dp);
            TORCH_CHECK_WITH(OutOfMemoryError, false,
                             "tessera c10 allocator: out of memory recording a block of ", nbytes,
                             " bytes");
        }
        return ::c10::DataPtr(data, data, &detail::free_mapped, cpu);
    }

    /** The deleter c10's raw_allocate / raw_deallocate use (never NULL; it skips NULL). */
    ::c10::DeleterFnPtr raw_deleter() const override { return raw_deleter_; }

    /** Copies `count` bytes between two blocks of this allocator (through the handle's copy_data, or memcpy). */
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
     * raw_deleter(): when a probe allocation's context is its address, a
     * trampoline to its deleter (blocks with that context and deleter are
     * handed out as they are); else free_mapped (every block is mapped).
     * Both ignore NULL, which c10 frees for a zero-byte raw allocation.
     */
    void probe_raw_deleter() {
        TsrDataPtr dp{nullptr, nullptr, nullptr, {TSR_CPU, -1}};
        TsrAllocator* a = handle_ != nullptr ? handle_ : tsr_get_allocator(TSR_CPU);
        if (a != nullptr && tsr_allocator_allocate(a, kCpuAlignment, &dp) == TSR_OK) {
            if (dp.data != nullptr && dp.ctx == dp.data && dp.deleter != nullptr &&
                reinterpret_cast<std::uintptr_t>(dp.data) % kCpuAlignment == 0) {
                ::c10::DeleterFnPtr trampoline = detail::raw_trampoline(dp.deleter);
                if (trampoline != nullptr) {
                    raw_deleter_ = trampoline;
                    raw_target_ = dp.deleter;
                }
            }
            tsr_data_ptr_free(&dp);
        }
        if (handle_ == nullptr && a != nullptr) {
            tsr_allocator_decref(a);
        }
    }

    TsrAllocator* handle_;
    /** What raw_deleter() returns: a trampoline to raw_target_, or free_mapped. */
    ::c10::DeleterFnPtr raw_deleter_ = &detail::free_mapped;
    /** The tessera deleter of blocks whose context is their address. */
    TsrDeleterFn raw_target_ = nullptr;
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
