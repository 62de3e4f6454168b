/**
 * @file tessera/object.hpp
 * @brief Object: a refcounted host object, holding raw bytes or a C++ T
 * (Object::make).
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_OBJECT_HPP
#define TESSERA_OBJECT_HPP

#include "../tessera.h"
#include "error.hpp"
#include "ref.hpp"
#include "handle.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <new>
#include <type_traits>
#include <utility>

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

/** @cond TESSERA_INTERNAL */
namespace detail {

/** A unique address per type. */
template <class T>
struct TypeTag {
    static constexpr char id = 0;
};

/** What Object::make puts at the start of the object's block. */
struct ObjectHeader {
    const void* type;    // &TypeTag<T>::id
    uintptr_t offset;    // where the T starts, from the block
    bool constructed;    // whether T's constructor completed
    bool destroyed;      // whether T's destructor ran
    void (*destruct)(void* object);
    void (*release_resources)(void* object);
};

template <class T, class = void>
struct has_release_resources : std::false_type {};
template <class T>
struct has_release_resources<T, std::void_t<decltype(std::declval<T&>().release_resources())>>
    : std::true_type {};

template <class T>
void destruct_object(void* object) noexcept {
    static_cast<T*>(object)->~T();
}

template <class T>
void release_object_resources(void* object) noexcept {
    static_cast<T*>(object)->release_resources();
}

inline void object_destroy(void* block) noexcept {
    ObjectHeader* header = static_cast<ObjectHeader*>(block);
    if (header->constructed && !header->destroyed) {
        header->destroyed = true;
        header->destruct(static_cast<char*>(block) + header->offset);
    }
}

inline void object_release_resources(void* block) noexcept {
    ObjectHeader* header = static_cast<ObjectHeader*>(block);
    if (!header->constructed || header->destroyed) {
        return;
    }
    if (header->release_resources != nullptr) {
        header->release_resources(static_cast<char*>(block) + header->offset);
    } else {
        header->destroyed = true;
        header->destruct(static_cast<char*>(block) + header->offset);
    }
}

}  // namespace detail
/** @endcond */

/**
 * A refcounted host object (TsrObject) with value semantics: a block of
 * bytes with c10's strong/weak counts.
 *
 * Object::make<T>(args...) places a C++ T in the block. Its destructor runs
 * exactly once:
 * - if T has a member `void release_resources()`, c10's protocol: when the
 *   strong count reaches 0 while weak references remain, release_resources()
 *   runs, and ~T runs when the last weak reference goes (or at once, without
 *   release_resources(), when none remains);
 * - otherwise ~T runs as soon as the strong count reaches 0 (as
 *   std::shared_ptr does), and the weak references keep only the memory.
 *
 * T's destructor and release_resources() must not throw; if T's
 * constructor throws, make() rethrows and ~T never runs.
 */
class Object : public Handle<Object, TsrObject> {
  public:
    /** Empty. */
    Object() noexcept = default;

    /** Holds `ref`. */
    explicit Object(Ref<TsrObject> ref) noexcept : Handle(std::move(ref)) {}

    /** Takes over a reference the caller owns. */
    static Object adopt(TsrObject* handle) noexcept {
        return Object(Ref<TsrObject>::adopt(handle));
    }

    /** An object of `size` zeroed bytes with C callbacks (`vtable` nullptr: none). */
    [[nodiscard]] static Returns<Object> create(size_t size,
                                                const TsrObjectVTable* vtable = nullptr) {
        TsrObject* out = nullptr;
        TsrStatus status = tsr_object_new(size, vtable, &out);
        return detail::finish(status, adopt(out));
    }

    /** An object holding a T constructed from `args`. */
    template <class T, class... Args>
    [[nodiscard]] static Returns<Object> make(Args&&... args) {
        static_assert(std::is_nothrow_destructible<T>::value,
                      "tessera::Object::make<T>: T's destructor must not throw");
        // The block starts with the header; T follows at the first
        // suitably aligned address, at most alignof(T) - 1 bytes later.
        constexpr size_t header = sizeof(detail::ObjectHeader);
        constexpr size_t size = header + alignof(T) - 1 + sizeof(T);
        TsrObjectVTable vtable{static_cast<uint32_t>(sizeof(TsrObjectVTable)),
                               &detail::object_release_resources, &detail::object_destroy};
        TsrObject* out = nullptr;
        TsrStatus status = tsr_object_new(size, &vtable, &out);
        if (status != TSR_OK) {
            return detail::fail<Object>(status, tsr_last_error_message());
        }
        Object object = adopt(out);
        char* block = static_cast<char*>(object.data());
        uintptr_t first = reinterpret_cast<uintptr_t>(block) + header;
        uintptr_t aligned = (first + alignof(T) - 1) / alignof(T) * alignof(T);
        detail::ObjectHeader* h = new (block) detail::ObjectHeader();
        h->type = &detail::TypeTag<T>::id;
        h->offset = aligned - reinterpret_cast<uintptr_t>(block);
        h->constructed = false;
        h->destroyed = false;
        h->destruct = &detail::destruct_object<T>;
        h->release_resources = nullptr;
        if constexpr (detail::has_release_resources<T>::value) {
            h->release_resources = &detail::release_object_resources<T>;
        }
        new (block + h->offset) T(std::forward<Args>(args)...);
        h->constructed = true;
        return object;
    }

    /** The object's data block (for objects from create()). */
    void* data() const noexcept { return tsr_object_data(get()); }

    /**
     * The T placed by make<T>(); nullptr when this is empty, when the
     * object holds another type, or when T was already destroyed. Only for
     * objects made by Object::make (not by create() or the C API).
     */
    template <class T>
    T* as() const noexcept {
        void* block = data();
        if (block == nullptr) {
            return nullptr;
        }
        const detail::ObjectHeader* h = static_cast<const detail::ObjectHeader*>(block);
        if (h->type != &detail::TypeTag<T>::id || !h->constructed || h->destroyed) {
            return nullptr;
        }
        return reinterpret_cast<T*>(static_cast<char*>(block) + h->offset);
    }
};

/** A weak reference to an Object. */
using WeakObject = Weak<Object>;

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

namespace std {

/** Hashes an Object by its handle. */
template <>
struct hash<tessera::Object> {
    /** The hash of `o`'s handle. */
    size_t operator()(const tessera::Object& o) const noexcept {
        return hash<TsrObject*>()(o.get());
    }
};

}  // namespace std

#endif  // TESSERA_OBJECT_HPP
