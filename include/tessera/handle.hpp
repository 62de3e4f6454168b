/**
 * @file tessera/handle.hpp
 * @brief The common part of the value classes: Handle (one Ref with value
 * semantics) and Weak.
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_HANDLE_HPP
#define TESSERA_HANDLE_HPP

#include "../tessera.h"
#include "ref.hpp"

#include <cstddef>
#include <functional>
#include <utility>

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

template <class S>
class Weak;

/**
 * The common part of Storage, Tensor, Allocator and Object: one Ref to the
 * C handle, with value semantics (copy = new strong reference, move =
 * steal, comparison by identity).
 *
 * @tparam Derived the class (CRTP).
 * @tparam T its C handle type.
 */
template <class Derived, class T>
class Handle {
  public:
    /** The C handle type. */
    using handle_type = T;

    /** The handle (borrowed; NULL when empty). */
    T* get() const noexcept { return ref_.get(); }

    /** Gives up ownership of the handle (the caller now owns its reference); this becomes empty. */
    T* release() noexcept { return ref_.release(); }

    /** The underlying Ref. */
    const Ref<T>& ref() const noexcept { return ref_; }

    /** Drops the reference; this becomes empty. */
    void reset() noexcept { ref_.reset(); }

    /** The strong count (0 when empty). */
    size_t use_count() const noexcept { return ref_.use_count(); }

    /** The raw weak count (0 when empty). */
    size_t weak_use_count() const noexcept { return ref_.weak_use_count(); }

    /** Whether this is the only strong reference. */
    bool unique() const noexcept { return ref_.unique(); }

    /** Whether this refers to an object. */
    bool defined() const noexcept { return static_cast<bool>(ref_); }

    /** Whether this refers to an object. */
    explicit operator bool() const noexcept { return defined(); }

    /** A weak reference to the object (empty when this is empty). */
    Weak<Derived> downgrade() const noexcept;

    /** Same object. */
    friend bool operator==(const Handle& a, const Handle& b) noexcept { return a.ref_ == b.ref_; }
    /** Different objects. */
    friend bool operator!=(const Handle& a, const Handle& b) noexcept { return a.ref_ != b.ref_; }
    /** Handle order (for ordered containers). */
    friend bool operator<(const Handle& a, const Handle& b) noexcept { return a.ref_ < b.ref_; }

  protected:
    /** Empty. */
    Handle() noexcept = default;
    /** Holds `ref`. */
    explicit Handle(Ref<T> ref) noexcept : ref_(std::move(ref)) {}

    /** The reference. */
    Ref<T> ref_;
};

/**
 * A weak reference to a Storage, Tensor, Allocator or Object: keeps the
 * object's memory, not the object; lock() gives the object back while it
 * lives. Aliases: WeakStorage, WeakTensor, WeakAllocator, WeakObject.
 *
 * @tparam S Storage, Tensor, Allocator or Object.
 */
template <class S>
class Weak {
  public:
    /** The strong C handle type. */
    using handle_type = typename S::handle_type;

    /** Empty. */
    Weak() noexcept = default;

    /** A weak reference to `strong`'s object (empty when `strong` is). */
    explicit Weak(const S& strong) noexcept : ref_(strong.ref()) {}

    /** Wraps a WeakRef. */
    explicit Weak(WeakRef<handle_type> ref) noexcept : ref_(std::move(ref)) {}

    /** The object, or an empty S once it expired. */
    S lock() const noexcept { return S(ref_.lock()); }

    /** Whether the object expired (true when empty). */
    bool expired() const noexcept { return ref_.expired(); }

    /** The object's strong count (0 once expired). */
    size_t use_count() const noexcept { return ref_.use_count(); }

    /** The raw weak count. */
    size_t weak_use_count() const noexcept { return ref_.weak_use_count(); }

    /** Drops the weak reference. */
    void reset() noexcept { ref_.reset(); }

    /** The underlying WeakRef. */
    const WeakRef<handle_type>& ref() const noexcept { return ref_; }

    /** Whether this holds a weak reference (expired or not). */
    explicit operator bool() const noexcept { return static_cast<bool>(ref_); }

    /** Same weak handle. */
    friend bool operator==(const Weak& a, const Weak& b) noexcept { return a.ref_ == b.ref_; }
    /** Different weak handles. */
    friend bool operator!=(const Weak& a, const Weak& b) noexcept { return a.ref_ != b.ref_; }
    /** Handle order (for ordered containers). */
    friend bool operator<(const Weak& a, const Weak& b) noexcept { return a.ref_ < b.ref_; }

  private:
    WeakRef<handle_type> ref_;
};

template <class Derived, class T>
Weak<Derived> Handle<Derived, T>::downgrade() const noexcept {
    return Weak<Derived>(WeakRef<T>(ref_));
}

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

namespace std {

/** Hashes a tessera::Weak by its weak handle. */
template <class S>
struct hash<tessera::Weak<S>> {
    /** The hash of `w`'s weak handle. */
    size_t operator()(const tessera::Weak<S>& w) const noexcept {
        return hash<tessera::WeakRef<typename S::handle_type>>()(w.ref());
    }
};

}  // namespace std

#endif  // TESSERA_HANDLE_HPP
