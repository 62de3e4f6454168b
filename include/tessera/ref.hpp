/**
 * @file tessera/ref.hpp
 * @brief Ref and WeakRef: RAII over the bare refcounted C handles (RefTraits
 * gives each handle type's functions).
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_REF_HPP
#define TESSERA_REF_HPP

#include "../tessera.h"
#include "error.hpp"

#include <cstddef>
#include <functional>
#include <utility>

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

/**
 * Maps a refcounted C handle type to its functions: specialized for
 * TsrStorage, TsrTensor, TsrAllocator and TsrObject (one macro line each),
 * with weak_type (the weak handle type) and incref, decref, use_count,
 * weak_use_count, downgrade, weak_incref, weak_decref, lock, expired,
 * weak_strong_count and weak_weak_count (the C functions tsr_X_* and
 * tsr_weak_X_*). Ref<T> and WeakRef<T> exist exactly for these four T.
 */
template <class T>
struct RefTraits;

/** @cond TESSERA_INTERNAL */
// RefTraits<Tsr##Type> from the C functions tsr_##name##_* and
// tsr_weak_##name##_* (one line per handle type below; the C side is
// generated from one table too: scripts/refcount_exports.py).
#define TESSERA_REF_TRAITS(Type, name)                                                         \
    template <>                                                                                \
    struct RefTraits<Tsr##Type> {                                                              \
        using weak_type = TsrWeak##Type;                                                       \
        static TsrStatus incref(Tsr##Type* p) noexcept { return tsr_##name##_incref(p); }      \
        static TsrStatus decref(Tsr##Type* p) noexcept { return tsr_##name##_decref(p); }      \
        static size_t use_count(const Tsr##Type* p) noexcept {                                 \
            return tsr_##name##_use_count(p);                                                  \
        }                                                                                      \
        static size_t weak_use_count(const Tsr##Type* p) noexcept {                            \
            return tsr_##name##_weak_use_count(p);                                             \
        }                                                                                      \
        static TsrStatus downgrade(Tsr##Type* p, TsrWeak##Type** out) noexcept {               \
            return tsr_##name##_downgrade(p, out);                                             \
        }                                                                                      \
        static TsrStatus weak_incref(TsrWeak##Type* w) noexcept {                              \
            return tsr_weak_##name##_incref(w);                                                \
        }                                                                                      \
        static TsrStatus weak_decref(TsrWeak##Type* w) noexcept {                              \
            return tsr_weak_##name##_decref(w);                                                \
        }                                                                                      \
        static TsrStatus lock(TsrWeak##Type* w, Tsr##Type** out) noexcept {                    \
            return tsr_weak_##name##_lock(w, out);                                             \
        }                                                                                      \
        static bool expired(const TsrWeak##Type* w) noexcept {                                 \
            return tsr_weak_##name##_expired(w);                                               \
        }                                                                                      \
        static size_t weak_strong_count(const TsrWeak##Type* w) noexcept {                     \
            return tsr_weak_##name##_use_count(w);                                             \
        }                                                                                      \
        static size_t weak_weak_count(const TsrWeak##Type* w) noexcept {                       \
            return tsr_weak_##name##_weak_use_count(w);                                        \
        }                                                                                      \
    };

TESSERA_REF_TRAITS(Storage, storage)
TESSERA_REF_TRAITS(Tensor, tensor)
TESSERA_REF_TRAITS(Allocator, allocator)
TESSERA_REF_TRAITS(Object, object)
#undef TESSERA_REF_TRAITS
/** @endcond */

template <class T>
class WeakRef;

/**
 * An owning strong reference to a C handle (c10's intrusive_ptr): copy =
 * tsr_X_incref, move = steal (the source becomes empty), destructor and
 * reset() = tsr_X_decref. Usable in containers; compares and hashes by
 * handle identity.
 *
 * @tparam T TsrStorage, TsrTensor, TsrAllocator or TsrObject.
 */
template <class T>
class Ref {
  public:
    /** The C handle type. */
    using element_type = T;
    /** The traits giving T's refcount functions. */
    using traits = RefTraits<T>;

    /** An empty reference. */
    constexpr Ref() noexcept = default;

    /** An empty reference. */
    constexpr Ref(std::nullptr_t) noexcept {}

    /**
     * Takes over a reference the caller owns (as returned by a C function
     * that returns a new reference); NULL gives an empty Ref.
     */
    static Ref adopt(T* handle) noexcept {
        Ref r;
        r.handle_ = handle;
        return r;
    }

    /**
     * Adds a reference to a borrowed handle and holds it; NULL gives an
     * empty Ref. Fails with TSR_ERR_DEAD_OBJECT when the object's strong
     * count already reached 0 (detectable while weak references remain).
     */
    static Returns<Ref> retain(T* handle) {
        if (handle == nullptr) {
            return Ref();
        }
        TsrStatus status = traits::incref(handle);
        return detail::finish(status, adopt(status == TSR_OK ? handle : nullptr));
    }

    /** Another strong reference to the same object (tsr_X_incref). */
    Ref(const Ref& other) noexcept : handle_(other.handle_) {
        if (handle_ != nullptr) {
            detail::require_ok(traits::incref(handle_), "tessera::Ref copy: incref");
        }
    }

    /** Steals `other`'s reference; `other` becomes empty. */
    Ref(Ref&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }

    /** Drops the current reference and shares `other`'s object. */
    Ref& operator=(const Ref& other) noexcept {
        Ref(other).swap(*this);
        return *this;
    }

    /** Drops the current reference and steals `other`'s; `other` becomes empty. */
    Ref& operator=(Ref&& other) noexcept {
        Ref(std::move(other)).swap(*this);
        return *this;
    }

    /** Drops the reference (tsr_X_decref). */
    ~Ref() { reset(); }

    /** Drops the reference; the Ref becomes empty. */
    void reset() noexcept {
        T* handle = handle_;
        handle_ = nullptr;
        if (handle != nullptr) {
            detail::require_ok(traits::decref(handle), "tessera::Ref: decref");
        }
    }

    /** The handle (borrowed; NULL when empty). */
    T* get() const noexcept { return handle_; }

    /** Gives up ownership: returns the handle (the caller now owns its reference); the Ref becomes empty. */
    T* release() noexcept {
        T* handle = handle_;
        handle_ = nullptr;
        return handle;
    }

    /** The strong count (0 when empty). */
    size_t use_count() const noexcept { return traits::use_count(handle_); }

    /** The raw weak count: weak references + 1 while strong > 0 (0 when empty). */
    size_t weak_use_count() const noexcept { return traits::weak_use_count(handle_); }

    /** Whether this is the only strong reference. */
    bool unique() const noexcept { return use_count() == 1; }

    /** Whether the Ref holds a handle. */
    explicit operator bool() const noexcept { return handle_ != nullptr; }

    /** Exchanges the handles of two Refs. */
    void swap(Ref& other) noexcept { std::swap(handle_, other.handle_); }

    /** A new weak reference to the object (empty when this Ref is empty). */
    WeakRef<T> downgrade() const noexcept;

    /** Same handle. */
    friend bool operator==(const Ref& a, const Ref& b) noexcept { return a.handle_ == b.handle_; }
    /** Different handles. */
    friend bool operator!=(const Ref& a, const Ref& b) noexcept { return a.handle_ != b.handle_; }
    /** Handle order (for ordered containers). */
    friend bool operator<(const Ref& a, const Ref& b) noexcept {
        return std::less<T*>()(a.handle_, b.handle_);
    }
    /** Whether `a` is empty. */
    friend bool operator==(const Ref& a, std::nullptr_t) noexcept { return a.handle_ == nullptr; }
    /** Whether `a` holds a handle. */
    friend bool operator!=(const Ref& a, std::nullptr_t) noexcept { return a.handle_ != nullptr; }

  private:
    T* handle_ = nullptr;
};

/**
 * An owning weak reference (c10's weak_intrusive_ptr): copy =
 * tsr_weak_X_incref, move = steal, destructor = tsr_weak_X_decref. It keeps
 * the object's memory, not the object alive: lock() gives a strong Ref, or
 * an empty one once the object expired.
 *
 * @tparam T the strong handle type (TsrStorage, TsrTensor, TsrAllocator or
 * TsrObject); the Ref holds RefTraits<T>::weak_type*.
 */
template <class T>
class WeakRef {
  public:
    /** The strong C handle type. */
    using element_type = T;
    /** The weak C handle type. */
    using weak_type = typename RefTraits<T>::weak_type;
    /** The traits giving T's refcount functions. */
    using traits = RefTraits<T>;

    /** An empty weak reference. */
    constexpr WeakRef() noexcept = default;

    /** An empty weak reference. */
    constexpr WeakRef(std::nullptr_t) noexcept {}

    /** A weak reference to `strong`'s object (empty when `strong` is). */
    explicit WeakRef(const Ref<T>& strong) noexcept {
        if (strong.get() != nullptr) {
            detail::require_ok(traits::downgrade(strong.get(), &handle_),
                               "tessera::WeakRef: downgrade");
        }
    }

    /** Takes over a weak reference the caller owns; NULL gives an empty WeakRef. */
    static WeakRef adopt(weak_type* handle) noexcept {
        WeakRef w;
        w.handle_ = handle;
        return w;
    }

    /** Adds a weak reference to a borrowed weak handle and holds it; NULL gives an empty WeakRef. */
    static Returns<WeakRef> retain(weak_type* handle) {
        if (handle == nullptr) {
            return WeakRef();
        }
        TsrStatus status = traits::weak_incref(handle);
        return detail::finish(status, adopt(status == TSR_OK ? handle : nullptr));
    }

    /** Another weak reference to the same object. */
    WeakRef(const WeakRef& other) noexcept : handle_(other.handle_) {
        if (handle_ != nullptr) {
            detail::require_ok(traits::weak_incref(handle_), "tessera::WeakRef copy: incref");
        }
    }

    /** Steals `other`'s weak reference; `other` becomes empty. */
    WeakRef(WeakRef&& other) noexcept : handle_(other.handle_) { other.handle_ = nullptr; }

    /** Drops the current weak reference and shares `other`'s. */
    WeakRef& operator=(const WeakRef& other) noexcept {
        WeakRef(other).swap(*this);
        return *this;
    }

    /** Drops the current weak reference and steals `other`'s. */
    WeakRef& operator=(WeakRef&& other) noexcept {
        WeakRef(std::move(other)).swap(*this);
        return *this;
    }

    /** Drops the weak reference. */
    ~WeakRef() { reset(); }

    /** Drops the weak reference; the WeakRef becomes empty. */
    void reset() noexcept {
        weak_type* handle = handle_;
        handle_ = nullptr;
        if (handle != nullptr) {
            detail::require_ok(traits::weak_decref(handle), "tessera::WeakRef: decref");
        }
    }

    /** A strong reference, or an empty Ref once the object expired (or when this is empty). */
    Ref<T> lock() const noexcept {
        if (handle_ == nullptr) {
            return Ref<T>();
        }
        T* strong = nullptr;
        detail::require_ok(traits::lock(handle_, &strong), "tessera::WeakRef: lock");
        return Ref<T>::adopt(strong);
    }

    /** The weak handle (borrowed; NULL when empty). */
    weak_type* get() const noexcept { return handle_; }

    /** Gives up ownership of the weak handle; the WeakRef becomes empty. */
    weak_type* release() noexcept {
        weak_type* handle = handle_;
        handle_ = nullptr;
        return handle;
    }

    /** The object's strong count (0 once expired or when empty). */
    size_t use_count() const noexcept { return traits::weak_strong_count(handle_); }

    /** The raw weak count (0 when empty). */
    size_t weak_use_count() const noexcept { return traits::weak_weak_count(handle_); }

    /** Whether the object's strong count reached 0 (true when empty). */
    bool expired() const noexcept { return traits::expired(handle_); }

    /** Whether the WeakRef holds a weak handle (expired or not). */
    explicit operator bool() const noexcept { return handle_ != nullptr; }

    /** Exchanges the handles of two WeakRefs. */
    void swap(WeakRef& other) noexcept { std::swap(handle_, other.handle_); }

    /** Same weak handle. */
    friend bool operator==(const WeakRef& a, const WeakRef& b) noexcept {
        return a.handle_ == b.handle_;
    }
    /** Different weak handles. */
    friend bool operator!=(const WeakRef& a, const WeakRef& b) noexcept {
        return a.handle_ != b.handle_;
    }
    /** Handle order (for ordered containers). */
    friend bool operator<(const WeakRef& a, const WeakRef& b) noexcept {
        return std::less<weak_type*>()(a.handle_, b.handle_);
    }

  private:
    weak_type* handle_ = nullptr;
};

template <class T>
WeakRef<T> Ref<T>::downgrade() const noexcept {
    return WeakRef<T>(*this);
}

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

/** Hashes of tessera's handles (by identity), for unordered containers. */
namespace std {

/** Hashes a Ref by its handle. */
template <class T>
struct hash<tessera::Ref<T>> {
    /** The hash of `r`'s handle. */
    size_t operator()(const tessera::Ref<T>& r) const noexcept { return hash<T*>()(r.get()); }
};

/** Hashes a WeakRef by its weak handle. */
template <class T>
struct hash<tessera::WeakRef<T>> {
    /** The hash of `w`'s handle. */
    size_t operator()(const tessera::WeakRef<T>& w) const noexcept {
        return hash<typename tessera::WeakRef<T>::weak_type*>()(w.get());
    }
};

}  // namespace std

#endif  // TESSERA_REF_HPP
