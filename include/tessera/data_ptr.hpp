/**
 * @file tessera/data_ptr.hpp
 * @brief DataPtr: owned memory with its deleter (TsrDataPtr), move-only.
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_DATA_PTR_HPP
#define TESSERA_DATA_PTR_HPP

#include "../tessera.h"
#include "error.hpp"
#include "types.hpp"

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

/**
 * Owned memory with its deleter (a TsrDataPtr, c10's DataPtr), move-only:
 * the destructor runs the deleter once (tsr_data_ptr_free). Moving leaves
 * the source empty.
 */
class DataPtr {
  public:
    /** Empty: nothing to free. */
    DataPtr() noexcept : ptr_{nullptr, nullptr, nullptr, {TSR_CPU, -1}} {}

    /** Takes ownership of a C data pointer. */
    explicit DataPtr(TsrDataPtr raw) noexcept : ptr_(raw) {}

    /** `address`, freed by `free_fn(ctx)` (when ctx is non-NULL), on `where`. */
    DataPtr(void* address, void* ctx, TsrDeleterFn free_fn, Device where) noexcept
        : ptr_{address, ctx, free_fn, where} {}

    DataPtr(const DataPtr&) = delete;
    DataPtr& operator=(const DataPtr&) = delete;

    /** Steals `other`'s memory; `other` becomes empty. */
    DataPtr(DataPtr&& other) noexcept : ptr_(other.release()) {}

    /** Frees the current memory and steals `other`'s. */
    DataPtr& operator=(DataPtr&& other) noexcept {
        if (this != &other) {
            reset();
            ptr_ = other.release();
        }
        return *this;
    }

    /** Frees the memory (runs the deleter once). */
    ~DataPtr() { reset(); }

    /** Frees the memory now; this becomes empty. */
    void reset() noexcept { tsr_data_ptr_free(&ptr_); }

    /** The data address. */
    void* data() const noexcept { return ptr_.data; }

    /** The context the deleter receives. */
    void* context() const noexcept { return ptr_.ctx; }

    /** The deleter (NULL: nothing to free). */
    TsrDeleterFn deleter() const noexcept { return ptr_.deleter; }

    /** Where the memory lives. */
    Device device() const noexcept { return ptr_.device; }

    /** Whether the data address is non-NULL. */
    explicit operator bool() const noexcept { return ptr_.data != nullptr; }

    /** Gives up ownership: returns the C struct (the caller frees it); this becomes empty. */
    TsrDataPtr release() noexcept {
        TsrDataPtr raw = ptr_;
        ptr_ = TsrDataPtr{nullptr, nullptr, nullptr, raw.device};
        return raw;
    }

    /**
     * The C struct itself, for C functions that consume it (they zero it on
     * success, leaving this empty).
     */
    TsrDataPtr* raw() noexcept { return &ptr_; }

    /** Takes the context out (c10's release_context): nothing is freed by this object any more. */
    void* release_context() noexcept { return tsr_data_ptr_release_context(&ptr_); }

    /** Replaces the deleter with `replacement` only if it is `expected`; returns whether it did. */
    bool compare_exchange_deleter(TsrDeleterFn expected, TsrDeleterFn replacement) noexcept {
        bool swapped = false;
        detail::require_ok(
            tsr_data_ptr_compare_exchange_deleter(&ptr_, expected, replacement, &swapped),
            "tessera::DataPtr::compare_exchange_deleter");
        return swapped;
    }

    /** The context if the deleter is `expected` (c10's cast_context), else nullptr. */
    void* cast_context(TsrDeleterFn expected) const noexcept {
        return tsr_data_ptr_cast_context(&ptr_, expected);
    }

  private:
    TsrDataPtr ptr_;
};

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

#endif  // TESSERA_DATA_PTR_HPP
