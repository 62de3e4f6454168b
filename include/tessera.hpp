/**
 * @file tessera.hpp
 * @brief tessera's C++17 API: RAII handles and value classes over the C API
 * of tessera.h (header-only).
 *
 * Everything lives in namespace tessera. The classes own references to
 * tessera's refcounted objects the way std::shared_ptr owns its object:
 * copying a tessera::Tensor adds a strong reference (it does not copy the
 * elements), moving steals it and leaves the source empty, and the
 * destructor drops it. tessera::Ref and tessera::WeakRef do the same for the
 * bare C handles.
 *
 * @par Errors: two modes, one header
 * Every function that can fail returns tessera::Returns<T>:
 * - With C++ exceptions (the default), Returns<T> is T itself and a failure
 *   throws tessera::Error, whose what() is the library's message
 *   (tsr_last_error_message()) and whose status() is the TsrStatus code.
 * - Without exceptions (compiled with -fno-exceptions, or with
 *   TESSERA_NO_EXCEPTIONS defined), Returns<T> is tessera::Result<T>, an
 *   expected-style value: ok(), status(), message(), value(). Result is
 *   [[nodiscard]], so an unchecked error is a compiler warning.
 *
 * The same source spelling (`auto v = t.view({3, 2});`) compiles in both
 * modes; only the way the result is checked differs. The mode is fixed per
 * translation unit by TESSERA_EXCEPTIONS. The two modes declare their
 * entities in different inline namespaces, so translation units compiled in
 * different modes can be linked into one program without breaking the
 * one-definition rule (their objects are distinct types, not to be passed
 * between the two).
 *
 * Operations that cannot fail on a live object (copying a handle, counts,
 * metadata getters) are noexcept. A failure there means the program broke
 * tessera's refcount invariants (for example a handle decref'd through the
 * C API behind a Ref's back); it is reported on stderr and the program
 * aborts.
 *
 * Empty objects (default-constructed or moved-from) may be destroyed,
 * assigned to, compared and queried; getters then return what the C API
 * documents for NULL (0, -1, nullptr) and fallible functions report
 * TSR_ERR_NULL_POINTER.
 *
 * Threads: the counts are atomic, so copies of one handle may be made,
 * used and destroyed on different threads at once; one C++ object (one
 * Tensor variable) is not synchronized, like std::shared_ptr. IterConfig is
 * not thread-safe; an Iter's queries and loops are.
 */
#ifndef TESSERA_HPP
#define TESSERA_HPP

#include "tessera.h"

#include <array>
#include <atomic>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

/**
 * @def TESSERA_EXCEPTIONS
 * 1 when fallible functions throw tessera::Error, 0 when they return
 * tessera::Result. Computed by tessera.hpp (do not define it): 0 when the
 * compiler has exceptions turned off (-fno-exceptions) or when
 * TESSERA_NO_EXCEPTIONS is defined before the header is included, else 1.
 */
#if defined(TESSERA_NO_EXCEPTIONS) || \
    !(defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND))
#define TESSERA_EXCEPTIONS 0
#else
#define TESSERA_EXCEPTIONS 1
#endif

/** @cond TESSERA_INTERNAL */
#if TESSERA_EXCEPTIONS
#define TESSERA_ABI_NAMESPACE v0_exceptions
#else
#define TESSERA_ABI_NAMESPACE v0_results
#endif
#define TESSERA_CPP_CONCAT_INNER_(a, b) a##b
#define TESSERA_CPP_CONCAT_(a, b) TESSERA_CPP_CONCAT_INNER_(a, b)
/** @endcond */

/** tessera's C++ API. */
namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

// ---------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------

/**
 * A failed tessera call: what() is the library's message (as
 * tsr_last_error_message() returned it right after the failure), status()
 * the TsrStatus code. Thrown by every fallible function when
 * TESSERA_EXCEPTIONS is 1; also what Result::value() throws in that mode.
 * Defined in both modes.
 */
class Error : public std::runtime_error {
  public:
    /** An error with `status` (a TSR_ERR_* code) and `message`. */
    Error(TsrStatus status, const std::string& message)
        : std::runtime_error(message), status_(status) {}

    /** The TsrStatus code of the failure. */
    TsrStatus status() const noexcept { return status_; }

    /** The name of status(), as "TSR_ERR_SHAPE" (tsr_status_name). */
    const char* status_name() const noexcept { return tsr_status_name(status_); }

  private:
    TsrStatus status_;
};

/** @cond TESSERA_INTERNAL */
namespace detail {

/** Reports a broken invariant on stderr and aborts. */
[[noreturn]] inline void fatal(const char* what, TsrStatus status, const char* message) noexcept {
    std::fprintf(stderr, "tessera: fatal: %s (%s): %s\n", what, tsr_status_name(status),
                 message ? message : "");
    std::abort();
}

/** Aborts when a call that cannot fail on a live object failed. */
inline void require_ok(TsrStatus status, const char* what) noexcept {
    if (status != TSR_OK) {
        fatal(what, status, tsr_last_error_message());
    }
}

}  // namespace detail
/** @endcond */

/**
 * An expected-style result: either a value or a failure (a TsrStatus and a
 * message). What fallible functions return when TESSERA_EXCEPTIONS is 0;
 * usable in both modes.
 *
 * @tparam T the value type (Result<void> holds no value).
 */
template <class T>
class [[nodiscard]] Result {
  public:
    /** A success holding a copy of `value` (implicit, so functions can `return value;`). */
    Result(const T& value) : status_(TSR_OK), value_(value) {}

    /** A success holding `value`, moved in. */
    Result(T&& value) : status_(TSR_OK), value_(std::move(value)) {}

    /**
     * A failure with `status` and `message`. A status of TSR_OK is turned
     * into TSR_ERR_INTERNAL: a failure always has an error status.
     */
    static Result failure(TsrStatus status, std::string message) {
        return Result(status == TSR_OK ? TSR_ERR_INTERNAL : status, std::move(message));
    }

    /** Whether the result holds a value. */
    bool ok() const noexcept { return status_ == TSR_OK; }

    /** Same as ok(). */
    explicit operator bool() const noexcept { return ok(); }

    /** TSR_OK, or the failure's status. */
    TsrStatus status() const noexcept { return status_; }

    /** The failure's message; "" on success. */
    const std::string& message() const noexcept { return message_; }

    /**
     * The value. On a failure: throws tessera::Error with the status and
     * message when TESSERA_EXCEPTIONS is 1, else prints them to stderr and
     * aborts.
     */
    T& value() & {
        check();
        return *value_;
    }

    /** As value(), for a const result. */
    const T& value() const& {
        check();
        return *value_;
    }

    /** As value(), moving the value out of a temporary result. */
    T value() && {
        check();
        return std::move(*value_);
    }

    /** The value, or `fallback` on a failure. */
    T value_or(T fallback) const& { return ok() ? *value_ : std::move(fallback); }

    /** The value moved out, or `fallback` on a failure. */
    T value_or(T fallback) && { return ok() ? std::move(*value_) : std::move(fallback); }

    /** The value (must be ok()). */
    T& operator*() & { return value(); }

    /** The value (must be ok()). */
    const T& operator*() const& { return value(); }

    /** Member access to the value (must be ok()). */
    T* operator->() { return &value(); }

    /** Member access to the value (must be ok()). */
    const T* operator->() const { return &value(); }

  private:
    Result(TsrStatus status, std::string message)
        : status_(status), message_(std::move(message)) {}

    void check() const {
        if (!ok()) {
#if TESSERA_EXCEPTIONS
            throw Error(status_, message_);
#else
            detail::fatal("tessera::Result::value() on a failure", status_, message_.c_str());
#endif
        }
    }

    TsrStatus status_;
    std::string message_;
    std::optional<T> value_;
};

/** The result of a fallible function that has no value: a status and a message. */
template <>
class [[nodiscard]] Result<void> {
  public:
    /** A success. */
    Result() noexcept : status_(TSR_OK) {}

    /** A failure (TSR_OK is turned into TSR_ERR_INTERNAL). */
    static Result failure(TsrStatus status, std::string message) {
        Result r;
        r.status_ = status == TSR_OK ? TSR_ERR_INTERNAL : status;
        r.message_ = std::move(message);
        return r;
    }

    /** Whether the call succeeded. */
    bool ok() const noexcept { return status_ == TSR_OK; }

    /** Same as ok(). */
    explicit operator bool() const noexcept { return ok(); }

    /** TSR_OK, or the failure's status. */
    TsrStatus status() const noexcept { return status_; }

    /** The failure's message; "" on success. */
    const std::string& message() const noexcept { return message_; }

    /**
     * Checks for success: on a failure throws tessera::Error (exceptions
     * mode) or prints the message and aborts (no-exceptions mode).
     */
    void value() const {
        if (!ok()) {
#if TESSERA_EXCEPTIONS
            throw Error(status_, message_);
#else
            detail::fatal("tessera::Result<void>::value() on a failure", status_,
                          message_.c_str());
#endif
        }
    }

  private:
    TsrStatus status_;
    std::string message_;
};

#if TESSERA_EXCEPTIONS
/**
 * What a fallible function returns: T itself when TESSERA_EXCEPTIONS is 1
 * (failures throw tessera::Error), tessera::Result<T> when it is 0.
 */
template <class T>
using Returns = T;
#else
template <class T>
using Returns = Result<T>;
#endif

/** @cond TESSERA_INTERNAL */
namespace detail {

/** Reports a failure the way the mode wants: throws, or returns a Result. */
template <class T>
Returns<T> fail(TsrStatus status, const char* message) {
#if TESSERA_EXCEPTIONS
    throw Error(status, message);
#else
    return Result<T>::failure(status, message);
#endif
}

/** `value` on TSR_OK, else the failure with the thread's last message. */
template <class T>
Returns<std::decay_t<T>> finish(TsrStatus status, T&& value) {
    if (status != TSR_OK) {
        return fail<std::decay_t<T>>(status, tsr_last_error_message());
    }
    return std::forward<T>(value);
}

/** Success on TSR_OK, else the failure with the thread's last message. */
inline Returns<void> check(TsrStatus status) {
    if (status != TSR_OK) {
        return fail<void>(status, tsr_last_error_message());
    }
#if !TESSERA_EXCEPTIONS
    return Result<void>();
#endif
}

}  // namespace detail
/** @endcond */

// ---------------------------------------------------------------------------
// Small value types
// ---------------------------------------------------------------------------

/**
 * A read-only view of int64_t values (sizes, strides, dims): what
 * std::span<const int64_t> is in C++20. Functions take it by value and
 * accept a braced list (`{2, 3}`), a std::vector, a std::array, a C array
 * or a pointer and a length; sizes() and strides() return one over
 * tessera's own arrays.
 *
 * It does not own the values: a span made from a braced list is valid only
 * until the end of the full expression, one from Tensor::sizes() while the
 * tensor lives and is not changed by Tensor::set_().
 */
class IntSpan {
  public:
    /** The element type. */
    using value_type = int64_t;
    /** Iterator (a pointer). */
    using iterator = const int64_t*;
    /** Iterator (a pointer). */
    using const_iterator = const int64_t*;

    /** An empty span. */
    constexpr IntSpan() noexcept = default;

    /** The `size` values at `data` (`data` may be NULL when size is 0). */
    constexpr IntSpan(const int64_t* data, size_t size) noexcept : data_(data), size_(size) {}

    /** The values of a braced list (valid until the end of the full expression). */
    constexpr IntSpan(std::initializer_list<int64_t> list) noexcept
        : data_(first(list)), size_(list.size()) {}

    /** The values of a vector. */
    IntSpan(const std::vector<int64_t>& values) noexcept
        : data_(values.data()), size_(values.size()) {}

    /** The values of an array. */
    template <size_t N>
    constexpr IntSpan(const std::array<int64_t, N>& values) noexcept
        : data_(values.data()), size_(N) {}

    /** The values of a C array. */
    template <size_t N>
    constexpr IntSpan(const int64_t (&values)[N]) noexcept : data_(values), size_(N) {}

    /** The first value's address. */
    constexpr const int64_t* data() const noexcept { return data_; }

    /** The number of values. */
    constexpr size_t size() const noexcept { return size_; }

    /** The number of values, signed (what the C API takes as ndim). */
    constexpr int64_t ssize() const noexcept { return static_cast<int64_t>(size_); }

    /** Whether there are no values. */
    constexpr bool empty() const noexcept { return size_ == 0; }

    /** Iterator to the first value. */
    constexpr const int64_t* begin() const noexcept { return data_; }

    /** Iterator past the last value. */
    constexpr const int64_t* end() const noexcept { return data_ + size_; }

    /** Value `i` (unchecked; i < size()). */
    constexpr const int64_t& operator[](size_t i) const noexcept { return data_[i]; }

    /** The first value (the span must not be empty). */
    constexpr const int64_t& front() const noexcept { return data_[0]; }

    /** The last value (the span must not be empty). */
    constexpr const int64_t& back() const noexcept { return data_[size_ - 1]; }

    /** A copy of the values. */
    std::vector<int64_t> vec() const { return std::vector<int64_t>(begin(), end()); }

    /** Element-wise equality. */
    friend bool operator==(IntSpan a, IntSpan b) noexcept {
        if (a.size_ != b.size_) {
            return false;
        }
        for (size_t i = 0; i < a.size_; i++) {
            if (a.data_[i] != b.data_[i]) {
                return false;
            }
        }
        return true;
    }

    /** Element-wise inequality. */
    friend bool operator!=(IntSpan a, IntSpan b) noexcept { return !(a == b); }

  private:
    // A span over a braced list is meant to live no longer than the list
    // (a function argument): the helper keeps GCC's -Winit-list-lifetime,
    // which cannot know that, quiet.
    static constexpr const int64_t* first(std::initializer_list<int64_t> list) noexcept {
        return list.begin();
    }

    const int64_t* data_ = nullptr;
    size_t size_ = 0;
};

/**
 * A device: a TsrDeviceType (TSR_CPU, TSR_CUDA, ...) and an index (-1 =
 * the current device of that type). Converts to and from TsrDevice.
 */
class Device {
  public:
    /** The CPU. */
    constexpr Device() noexcept : device_{TSR_CPU, -1} {}

    /** A device of `type` (TSR_CPU, TSR_CUDA, ...) with `index`. */
    constexpr explicit Device(TsrDeviceType type, int8_t index = -1) noexcept
        : device_{type, index} {}

    /** The same device as a C TsrDevice. */
    constexpr Device(TsrDevice device) noexcept : device_(device) {}

    /** The C TsrDevice. */
    constexpr operator TsrDevice() const noexcept { return device_; }

    /** The device type. */
    constexpr TsrDeviceType type() const noexcept { return device_.type; }

    /** The index (-1: current device). */
    constexpr int8_t index() const noexcept { return device_.index; }

    /** Whether this is a CPU device. */
    constexpr bool is_cpu() const noexcept { return device_.type == TSR_CPU; }

    /** The CPU device. */
    static constexpr Device cpu() noexcept { return Device(TSR_CPU, -1); }

    /** CUDA device `index` (-1: the current one). */
    static constexpr Device cuda(int8_t index = -1) noexcept { return Device(TSR_CUDA, index); }

    /** Same type and index. */
    friend constexpr bool operator==(Device a, Device b) noexcept {
        return a.device_.type == b.device_.type && a.device_.index == b.device_.index;
    }

    /** Different type or index. */
    friend constexpr bool operator!=(Device a, Device b) noexcept { return !(a == b); }

  private:
    TsrDevice device_;
};

/**
 * The TsrDType of a C++ element type, for Tensor::data<T>():
 * `dtype_of<float>::value == TSR_FLOAT`. Defined for bool, the fixed-width
 * integers, float, double and std::complex of float and double (other
 * dtypes, such as Half, have no C++ type here: use Tensor::data()).
 */
template <class T>
struct dtype_of;

/** @cond TESSERA_INTERNAL */
#define TESSERA_DTYPE_OF_(type, code)                      \
    template <>                                            \
    struct dtype_of<type> {                                \
        static constexpr TsrDType value = static_cast<TsrDType>(code); \
    }
TESSERA_DTYPE_OF_(bool, TSR_BOOL);
TESSERA_DTYPE_OF_(uint8_t, TSR_UINT8);
TESSERA_DTYPE_OF_(int8_t, TSR_INT8);
TESSERA_DTYPE_OF_(int16_t, TSR_INT16);
TESSERA_DTYPE_OF_(int32_t, TSR_INT32);
TESSERA_DTYPE_OF_(int64_t, TSR_INT64);
TESSERA_DTYPE_OF_(uint16_t, TSR_UINT16);
TESSERA_DTYPE_OF_(uint32_t, TSR_UINT32);
TESSERA_DTYPE_OF_(uint64_t, TSR_UINT64);
TESSERA_DTYPE_OF_(float, TSR_FLOAT);
TESSERA_DTYPE_OF_(double, TSR_DOUBLE);
TESSERA_DTYPE_OF_(std::complex<float>, TSR_COMPLEX_FLOAT);
TESSERA_DTYPE_OF_(std::complex<double>, TSR_COMPLEX_DOUBLE);
#undef TESSERA_DTYPE_OF_
/** @endcond */

/**
 * A tagged number for fills (a TsrScalar): built implicitly from bool, any
 * integer, any floating-point value or std::complex, tagged as
 * tsr_scalar_bool/int/uint/float/complex tag them (Bool, Long, UInt64 for
 * unsigned values above INT64_MAX, Double, ComplexDouble).
 */
class Scalar {
  public:
    /** A scalar from a bool, integer or floating-point value. */
    template <class T, std::enable_if_t<std::is_arithmetic<T>::value, int> = 0>
    Scalar(T value) noexcept : scalar_(make(value)) {}

    /** A complex scalar. */
    template <class T>
    Scalar(std::complex<T> value) noexcept
        : scalar_(tsr_scalar_complex(static_cast<double>(value.real()),
                                     static_cast<double>(value.imag()))) {}

    /** The same scalar as a C TsrScalar. */
    Scalar(TsrScalar raw) noexcept : scalar_(raw) {}

    /** The C TsrScalar. */
    const TsrScalar& raw() const noexcept { return scalar_; }

    /** The tag (TSR_BOOL, TSR_LONG, TSR_UINT64, TSR_DOUBLE or TSR_COMPLEX_DOUBLE). */
    TsrDType dtype() const noexcept { return scalar_.dtype; }

  private:
    template <class T>
    static TsrScalar make(T value) noexcept {
        if constexpr (std::is_same<T, bool>::value) {
            return tsr_scalar_bool(value);
        } else if constexpr (std::is_floating_point<T>::value) {
            return tsr_scalar_float(static_cast<double>(value));
        } else if constexpr (std::is_unsigned<T>::value) {
            if (static_cast<uint64_t>(value) > static_cast<uint64_t>(INT64_MAX)) {
                return tsr_scalar_uint(static_cast<uint64_t>(value));
            }
            return tsr_scalar_int(static_cast<int64_t>(value));
        } else {
            return tsr_scalar_int(static_cast<int64_t>(value));
        }
    }

    TsrScalar scalar_;
};

/** The library version, "MAJOR.MINOR.PATCH" (tsr_version). */
inline const char* version() noexcept { return tsr_version(); }

/** Sets the number of threads parallel loops use (values below 1 mean 1). */
inline void set_num_threads(int32_t n) noexcept { tsr_set_num_threads(n); }

/** The number of threads parallel loops use. */
inline int32_t num_threads() noexcept { return tsr_get_num_threads(); }

/** c10's name of `dtype` ("Float", ...), "Undefined" for an unknown number. */
inline const char* dtype_name(TsrDType dtype) noexcept { return tsr_dtype_name(dtype); }

/** Bytes per element of `dtype`; 0 for an unknown number. */
inline size_t itemsize(TsrDType dtype) noexcept { return tsr_dtype_itemsize(dtype); }

/** The name of a status code ("TSR_ERR_SHAPE", ...). */
inline const char* status_name(TsrStatus status) noexcept { return tsr_status_name(status); }

/** The dtype `a` and `b` promote to (c10's table); fails with TSR_ERR_DTYPE for pairs c10 refuses. */
inline Returns<TsrDType> promote_types(TsrDType a, TsrDType b) {
    TsrDType out = -1;
    TsrStatus status = tsr_promote_types(a, b, &out);
    return detail::finish(status, out);
}

/** Whether an output of dtype `to` may safely receive a `from` value (c10's canCast). */
inline bool can_cast(TsrDType from, TsrDType to) noexcept { return tsr_can_cast(from, to); }

/**
 * Installs the process-wide memory reporter (tsr_set_memory_reporter);
 * `fn` nullptr removes it. `fn` must stay callable with `user` until
 * replaced, from any thread, and must not throw.
 */
inline Returns<void> set_memory_reporter(TsrMemoryReportFn fn, void* user) {
    return detail::check(tsr_set_memory_reporter(fn, user));
}

/** Whether CUDA can be used (false in builds without the cuda feature). */
inline bool cuda_is_available() noexcept { return tsr_cuda_is_available(); }

/** The number of CUDA devices (0 without a driver or the cuda feature). */
inline int32_t cuda_device_count() noexcept { return tsr_cuda_device_count(); }

/**
 * Loads the CUDA driver now and says why CUDA cannot be used, if it
 * cannot (TSR_ERR_DEVICE; TSR_ERR_UNSUPPORTED without the cuda feature).
 */
inline Returns<void> cuda_init() { return detail::check(tsr_cuda_init()); }

// ---------------------------------------------------------------------------
// Ref and WeakRef: RAII over the bare C handles
// ---------------------------------------------------------------------------

/**
 * Maps a refcounted C handle type to its functions: specialized for
 * TsrStorage, TsrTensor, TsrAllocator and TsrObject. Ref<T> and WeakRef<T>
 * exist exactly for these four T.
 */
template <class T>
struct RefTraits;

/** The refcount functions of TsrStorage and TsrWeakStorage. */
template <>
struct RefTraits<TsrStorage> {
    /** The weak handle type. */
    using weak_type = TsrWeakStorage;
    /** tsr_storage_incref. */
    static TsrStatus incref(TsrStorage* p) noexcept { return tsr_storage_incref(p); }
    /** tsr_storage_decref. */
    static TsrStatus decref(TsrStorage* p) noexcept { return tsr_storage_decref(p); }
    /** tsr_storage_use_count. */
    static size_t use_count(const TsrStorage* p) noexcept { return tsr_storage_use_count(p); }
    /** tsr_storage_weak_use_count. */
    static size_t weak_use_count(const TsrStorage* p) noexcept {
        return tsr_storage_weak_use_count(p);
    }
    /** tsr_storage_downgrade. */
    static TsrStatus downgrade(TsrStorage* p, TsrWeakStorage** out) noexcept {
        return tsr_storage_downgrade(p, out);
    }
    /** tsr_weak_storage_incref. */
    static TsrStatus weak_incref(TsrWeakStorage* w) noexcept { return tsr_weak_storage_incref(w); }
    /** tsr_weak_storage_decref. */
    static TsrStatus weak_decref(TsrWeakStorage* w) noexcept { return tsr_weak_storage_decref(w); }
    /** tsr_weak_storage_lock. */
    static TsrStatus lock(TsrWeakStorage* w, TsrStorage** out) noexcept {
        return tsr_weak_storage_lock(w, out);
    }
    /** tsr_weak_storage_expired. */
    static bool expired(const TsrWeakStorage* w) noexcept { return tsr_weak_storage_expired(w); }
    /** tsr_weak_storage_use_count. */
    static size_t weak_strong_count(const TsrWeakStorage* w) noexcept {
        return tsr_weak_storage_use_count(w);
    }
    /** tsr_weak_storage_weak_use_count. */
    static size_t weak_weak_count(const TsrWeakStorage* w) noexcept {
        return tsr_weak_storage_weak_use_count(w);
    }
};

/** The refcount functions of TsrTensor and TsrWeakTensor. */
template <>
struct RefTraits<TsrTensor> {
    /** The weak handle type. */
    using weak_type = TsrWeakTensor;
    /** tsr_tensor_incref. */
    static TsrStatus incref(TsrTensor* p) noexcept { return tsr_tensor_incref(p); }
    /** tsr_tensor_decref. */
    static TsrStatus decref(TsrTensor* p) noexcept { return tsr_tensor_decref(p); }
    /** tsr_tensor_use_count. */
    static size_t use_count(const TsrTensor* p) noexcept { return tsr_tensor_use_count(p); }
    /** tsr_tensor_weak_use_count. */
    static size_t weak_use_count(const TsrTensor* p) noexcept {
        return tsr_tensor_weak_use_count(p);
    }
    /** tsr_tensor_downgrade. */
    static TsrStatus downgrade(TsrTensor* p, TsrWeakTensor** out) noexcept {
        return tsr_tensor_downgrade(p, out);
    }
    /** tsr_weak_tensor_incref. */
    static TsrStatus weak_incref(TsrWeakTensor* w) noexcept { return tsr_weak_tensor_incref(w); }
    /** tsr_weak_tensor_decref. */
    static TsrStatus weak_decref(TsrWeakTensor* w) noexcept { return tsr_weak_tensor_decref(w); }
    /** tsr_weak_tensor_lock. */
    static TsrStatus lock(TsrWeakTensor* w, TsrTensor** out) noexcept {
        return tsr_weak_tensor_lock(w, out);
    }
    /** tsr_weak_tensor_expired. */
    static bool expired(const TsrWeakTensor* w) noexcept { return tsr_weak_tensor_expired(w); }
    /** tsr_weak_tensor_use_count. */
    static size_t weak_strong_count(const TsrWeakTensor* w) noexcept {
        return tsr_weak_tensor_use_count(w);
    }
    /** tsr_weak_tensor_weak_use_count. */
    static size_t weak_weak_count(const TsrWeakTensor* w) noexcept {
        return tsr_weak_tensor_weak_use_count(w);
    }
};

/** The refcount functions of TsrAllocator and TsrWeakAllocator. */
template <>
struct RefTraits<TsrAllocator> {
    /** The weak handle type. */
    using weak_type = TsrWeakAllocator;
    /** tsr_allocator_incref. */
    static TsrStatus incref(TsrAllocator* p) noexcept { return tsr_allocator_incref(p); }
    /** tsr_allocator_decref. */
    static TsrStatus decref(TsrAllocator* p) noexcept { return tsr_allocator_decref(p); }
    /** tsr_allocator_use_count. */
    static size_t use_count(const TsrAllocator* p) noexcept { return tsr_allocator_use_count(p); }
    /** tsr_allocator_weak_use_count. */
    static size_t weak_use_count(const TsrAllocator* p) noexcept {
        return tsr_allocator_weak_use_count(p);
    }
    /** tsr_allocator_downgrade. */
    static TsrStatus downgrade(TsrAllocator* p, TsrWeakAllocator** out) noexcept {
        return tsr_allocator_downgrade(p, out);
    }
    /** tsr_weak_allocator_incref. */
    static TsrStatus weak_incref(TsrWeakAllocator* w) noexcept {
        return tsr_weak_allocator_incref(w);
    }
    /** tsr_weak_allocator_decref. */
    static TsrStatus weak_decref(TsrWeakAllocator* w) noexcept {
        return tsr_weak_allocator_decref(w);
    }
    /** tsr_weak_allocator_lock. */
    static TsrStatus lock(TsrWeakAllocator* w, TsrAllocator** out) noexcept {
        return tsr_weak_allocator_lock(w, out);
    }
    /** tsr_weak_allocator_expired. */
    static bool expired(const TsrWeakAllocator* w) noexcept { return tsr_weak_allocator_expired(w); }
    /** tsr_weak_allocator_use_count. */
    static size_t weak_strong_count(const TsrWeakAllocator* w) noexcept {
        return tsr_weak_allocator_use_count(w);
    }
    /** tsr_weak_allocator_weak_use_count. */
    static size_t weak_weak_count(const TsrWeakAllocator* w) noexcept {
        return tsr_weak_allocator_weak_use_count(w);
    }
};

/** The refcount functions of TsrObject and TsrWeakObject. */
template <>
struct RefTraits<TsrObject> {
    /** The weak handle type. */
    using weak_type = TsrWeakObject;
    /** tsr_object_incref. */
    static TsrStatus incref(TsrObject* p) noexcept { return tsr_object_incref(p); }
    /** tsr_object_decref. */
    static TsrStatus decref(TsrObject* p) noexcept { return tsr_object_decref(p); }
    /** tsr_object_use_count. */
    static size_t use_count(const TsrObject* p) noexcept { return tsr_object_use_count(p); }
    /** tsr_object_weak_use_count. */
    static size_t weak_use_count(const TsrObject* p) noexcept {
        return tsr_object_weak_use_count(p);
    }
    /** tsr_object_downgrade. */
    static TsrStatus downgrade(TsrObject* p, TsrWeakObject** out) noexcept {
        return tsr_object_downgrade(p, out);
    }
    /** tsr_weak_object_incref. */
    static TsrStatus weak_incref(TsrWeakObject* w) noexcept { return tsr_weak_object_incref(w); }
    /** tsr_weak_object_decref. */
    static TsrStatus weak_decref(TsrWeakObject* w) noexcept { return tsr_weak_object_decref(w); }
    /** tsr_weak_object_lock. */
    static TsrStatus lock(TsrWeakObject* w, TsrObject** out) noexcept {
        return tsr_weak_object_lock(w, out);
    }
    /** tsr_weak_object_expired. */
    static bool expired(const TsrWeakObject* w) noexcept { return tsr_weak_object_expired(w); }
    /** tsr_weak_object_use_count. */
    static size_t weak_strong_count(const TsrWeakObject* w) noexcept {
        return tsr_weak_object_use_count(w);
    }
    /** tsr_weak_object_weak_use_count. */
    static size_t weak_weak_count(const TsrWeakObject* w) noexcept {
        return tsr_weak_object_weak_use_count(w);
    }
};

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

// ---------------------------------------------------------------------------
// Value classes: common parts
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// DataPtr
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Allocator
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Storage
// ---------------------------------------------------------------------------

/**
 * A refcounted block of bytes with the allocator that made it (TsrStorage),
 * with value semantics: copies share the bytes.
 */
class Storage : public Handle<Storage, TsrStorage> {
  public:
    /** Empty. */
    Storage() noexcept = default;

    /** Holds `ref`. */
    explicit Storage(Ref<TsrStorage> ref) noexcept : Handle(std::move(ref)) {}

    /** Takes over a reference the caller owns. */
    static Storage adopt(TsrStorage* handle) noexcept {
        return Storage(Ref<TsrStorage>::adopt(handle));
    }

    /** `nbytes` on `device` from the allocator registered for its type (uninitialized). */
    [[nodiscard]] static Returns<Storage> create(size_t nbytes, Device device = Device::cpu(),
                                                 bool resizable = false) {
        TsrStorage* out = nullptr;
        TsrStatus status = tsr_storage_new(nbytes, device, resizable, &out);
        return detail::finish(status, adopt(out));
    }

    /** `nbytes` from `allocator` (which the storage keeps alive). */
    [[nodiscard]] static Returns<Storage> create(size_t nbytes, const Allocator& allocator,
                                                 bool resizable = false) {
        TsrStorage* out = nullptr;
        TsrStatus status = tsr_storage_new_with_allocator(nbytes, allocator.get(), resizable, &out);
        return detail::finish(status, adopt(out));
    }

    /**
     * A storage over external memory (c10's from_blob): `memory` is
     * consumed on success (left empty; its deleter runs when the storage's
     * data is released) and left untouched on failure.
     */
    [[nodiscard]] static Returns<Storage> from_data_ptr(DataPtr&& memory, size_t nbytes) {
        TsrStorage* out = nullptr;
        TsrStatus status = tsr_storage_from_data_ptr(memory.raw(), nbytes, &out);
        return detail::finish(status, adopt(out));
    }

    /** The size in bytes. */
    size_t nbytes() const noexcept { return tsr_storage_nbytes(get()); }

    /** The data address (nullptr for empty storages). */
    void* data() const noexcept { return tsr_storage_data(get()); }

    /** The device. */
    Device device() const noexcept { return tsr_storage_device(get()); }

    /** Whether resize() is allowed. */
    bool resizable() const noexcept { return tsr_storage_resizable(get()); }

    /** The allocator that made the data (empty for external memory). */
    Allocator allocator() const noexcept { return Allocator::adopt(tsr_storage_allocator(get())); }

    /** Resizes to `nbytes` (keeps the first min(old, new) bytes); resizable storages only. */
    Returns<void> resize(size_t nbytes) { return detail::check(tsr_storage_resize(get(), nbytes)); }

    /** Sets every byte to `byte` (CPU storages). */
    Returns<void> fill(uint8_t byte) { return detail::check(tsr_storage_fill(get(), byte)); }

    /** Copies every byte of `src` (of the same size) into this storage. */
    Returns<void> copy_(const Storage& src) {
        return detail::check(tsr_storage_copy(get(), src.get()));
    }

    /** A new storage holding a copy of the bytes, from the same allocator. */
    [[nodiscard]] Returns<Storage> clone() const {
        TsrStorage* out = nullptr;
        TsrStatus status = tsr_storage_clone(get(), &out);
        return detail::finish(status, adopt(out));
    }

    /**
     * Replaces the data with external memory (only while this is the only
     * strong reference); `memory` is consumed on success, untouched on failure.
     */
    Returns<void> share_external(DataPtr&& memory, size_t nbytes) {
        return detail::check(tsr_storage_share_external(get(), memory.raw(), nbytes));
    }
};

/** A weak reference to a Storage. */
using WeakStorage = Weak<Storage>;

// ---------------------------------------------------------------------------
// Tensor
// ---------------------------------------------------------------------------

/**
 * A refcounted tensor (TsrTensor): sizes, strides and an offset over a
 * Storage, with value semantics: a copy is another reference to the same
 * tensor (not a copy of its elements; see clone()). Views share the
 * storage.
 */
class Tensor : public Handle<Tensor, TsrTensor> {
  public:
    /** Empty. */
    Tensor() noexcept = default;

    /** Holds `ref`. */
    explicit Tensor(Ref<TsrTensor> ref) noexcept : Handle(std::move(ref)) {}

    /** Takes over a reference the caller owns. */
    static Tensor adopt(TsrTensor* handle) noexcept {
        return Tensor(Ref<TsrTensor>::adopt(handle));
    }

    /** An uninitialized tensor of `sizes`, laid out in `format` (TSR_CONTIGUOUS, TSR_CHANNELS_LAST, ...). */
    [[nodiscard]] static Returns<Tensor> empty(IntSpan sizes, TsrDType dtype = TSR_FLOAT,
                                               Device device = Device::cpu(),
                                               TsrMemoryFormat format = TSR_CONTIGUOUS) {
        TsrTensor* out = nullptr;
        TsrStatus status =
            format == TSR_CONTIGUOUS
                ? tsr_tensor_empty(sizes.ssize(), sizes.data(), dtype, device, &out)
                : tsr_tensor_empty_format(sizes.ssize(), sizes.data(), dtype, device, format, &out);
        return detail::finish(status, adopt(out));
    }

    /** An uninitialized tensor with explicit strides (in elements). */
    [[nodiscard]] static Returns<Tensor> empty_strided(IntSpan sizes, IntSpan strides,
                                                       TsrDType dtype = TSR_FLOAT,
                                                       Device device = Device::cpu()) {
        if (sizes.size() != strides.size()) {
            return detail::fail<Tensor>(
                TSR_ERR_SHAPE,
                ("tessera::Tensor::empty_strided: " + std::to_string(sizes.size()) +
                 " sizes but " + std::to_string(strides.size()) + " strides")
                    .c_str());
        }
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_empty_strided(sizes.ssize(), sizes.data(), strides.data(),
                                                    dtype, device, &out);
        return detail::finish(status, adopt(out));
    }

    /** A tensor of `sizes` with every element set to `value`. */
    [[nodiscard]] static Returns<Tensor> full(IntSpan sizes, Scalar value,
                                              TsrDType dtype = TSR_FLOAT,
                                              Device device = Device::cpu()) {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_empty(sizes.ssize(), sizes.data(), dtype, device, &out);
        if (status == TSR_OK) {
            Tensor t = adopt(out);
            status = tsr_tensor_fill(t.get(), value.raw());
            return detail::finish(status, std::move(t));
        }
        return detail::finish(status, Tensor());
    }

    /** A contiguous tensor of `sizes` viewing `storage` from element `storage_offset`. */
    [[nodiscard]] static Returns<Tensor> from_storage(const Storage& storage, IntSpan sizes,
                                                      TsrDType dtype,
                                                      int64_t storage_offset = 0) {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_from_storage(storage.get(), storage_offset, sizes.ssize(),
                                                   sizes.data(), nullptr, dtype, &out);
        return detail::finish(status, adopt(out));
    }

    /** A tensor of `sizes` and `strides` (elements) viewing `storage` from `storage_offset`. */
    [[nodiscard]] static Returns<Tensor> from_storage(const Storage& storage, IntSpan sizes,
                                                      IntSpan strides, TsrDType dtype,
                                                      int64_t storage_offset = 0) {
        if (sizes.size() != strides.size()) {
            return detail::fail<Tensor>(
                TSR_ERR_SHAPE,
                ("tessera::Tensor::from_storage: " + std::to_string(sizes.size()) +
                 " sizes but " + std::to_string(strides.size()) + " strides")
                    .c_str());
        }
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_from_storage(storage.get(), storage_offset, sizes.ssize(),
                                                   sizes.data(), strides.data(), dtype, &out);
        return detail::finish(status, adopt(out));
    }

    /**
     * Imports a DLPack managed tensor (tsr_tensor_from_dlpack): `consumed`
     * is always consumed, on success and on failure alike.
     */
    [[nodiscard]] static Returns<Tensor> from_dlpack(DLManagedTensorVersioned* consumed) {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_from_dlpack(consumed, &out);
        return detail::finish(status, adopt(out));
    }

    /** As from_dlpack, for a legacy (unversioned) DLManagedTensor; always consumed. */
    [[nodiscard]] static Returns<Tensor> from_dlpack_legacy(DLManagedTensor* consumed) {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_from_dlpack_legacy(consumed, &out);
        return detail::finish(status, adopt(out));
    }

    /** Exports as a DLPack managed tensor sharing the memory; the caller calls its deleter once. */
    [[nodiscard]] Returns<DLManagedTensorVersioned*> to_dlpack() const {
        DLManagedTensorVersioned* out = nullptr;
        TsrStatus status = tsr_tensor_to_dlpack(get(), &out);
        return detail::finish(status, out);
    }

    /** As to_dlpack, as a legacy (unversioned) DLManagedTensor. */
    [[nodiscard]] Returns<DLManagedTensor*> to_dlpack_legacy() const {
        DLManagedTensor* out = nullptr;
        TsrStatus status = tsr_tensor_to_dlpack_legacy(get(), &out);
        return detail::finish(status, out);
    }

    // ---- metadata ----

    /** The number of dims (-1 when empty). */
    int64_t ndim() const noexcept { return tsr_tensor_ndim(get()); }

    /** The sizes; valid while the tensor lives and set_() is not called. */
    IntSpan sizes() const noexcept { return span(tsr_tensor_sizes(get())); }

    /** The strides in elements; valid as sizes(). */
    IntSpan strides() const noexcept { return span(tsr_tensor_strides(get())); }

    /** The size of `dim` (negative dims wrap); fails with TSR_ERR_SHAPE for a dim out of range. */
    Returns<int64_t> size(int64_t dim) const {
        int64_t n = tsr_tensor_size(get(), dim);
        return detail::finish(n >= 0 ? TSR_OK : missing_status(), n);
    }

    /** The stride of `dim` in elements; fails as size(). */
    Returns<int64_t> stride(int64_t dim) const {
        int64_t n = tsr_tensor_stride(get(), dim);
        return detail::finish(n >= 0 ? TSR_OK : missing_status(), n);
    }

    /** The storage offset in elements. */
    int64_t storage_offset() const noexcept { return tsr_tensor_storage_offset(get()); }

    /** The number of elements (1 for 0-dim tensors, -1 when empty). */
    int64_t numel() const noexcept { return tsr_tensor_numel(get()); }

    /** The dtype (TSR_FLOAT, ...). */
    TsrDType dtype() const noexcept { return tsr_tensor_dtype(get()); }

    /** Bytes per element. */
    size_t itemsize() const noexcept { return tsr_tensor_itemsize(get()); }

    /** The device. */
    Device device() const noexcept { return tsr_tensor_device(get()); }

    /** The first element's address (nullptr when the tensor has no elements). */
    void* data() const noexcept { return tsr_tensor_data(get()); }

    /**
     * The first element's address as a T*; fails with TSR_ERR_DTYPE unless
     * the tensor's dtype is dtype_of<T> (const T allowed).
     */
    template <class T>
    Returns<T*> data() const {
        using Element = std::remove_cv_t<T>;
        TsrDType expected = dtype_of<Element>::value;
        if (dtype() != expected) {
            std::string message = std::string("tessera::Tensor::data<T>: T is ") +
                                  dtype_name(expected) + " but the tensor holds " +
                                  dtype_name(dtype());
            return detail::fail<T*>(get() ? TSR_ERR_DTYPE : TSR_ERR_NULL_POINTER,
                                    message.c_str());
        }
        return static_cast<T*>(data());
    }

    /** The storage (shared). */
    Storage storage() const noexcept { return Storage::adopt(tsr_tensor_storage(get())); }

    /** Whether the tensor is contiguous in `format`. */
    bool is_contiguous(TsrMemoryFormat format = TSR_CONTIGUOUS) const noexcept {
        return tsr_tensor_is_contiguous(get(), format);
    }

    /** Whether some permutation of the dims is contiguous. */
    bool is_non_overlapping_and_dense() const noexcept {
        return tsr_tensor_is_non_overlapping_and_dense(get());
    }

    /** The version counter shared with views, bumped by in-place writes. */
    uint64_t version() const noexcept { return tsr_tensor_version(get()); }

    // ---- views and copies ----

    /** A view with explicit sizes, strides (elements) and storage offset. */
    [[nodiscard]] Returns<Tensor> as_strided(IntSpan sizes, IntSpan strides,
                                             int64_t storage_offset) const {
        if (sizes.size() != strides.size()) {
            return detail::fail<Tensor>(
                TSR_ERR_SHAPE,
                ("tessera::Tensor::as_strided: " + std::to_string(sizes.size()) +
                 " sizes but " + std::to_string(strides.size()) + " strides")
                    .c_str());
        }
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_as_strided(get(), sizes.ssize(), sizes.data(),
                                                 strides.data(), storage_offset, &out);
        return detail::finish(status, adopt(out));
    }

    /** The same elements with a new shape, without copying (one size may be -1). */
    [[nodiscard]] Returns<Tensor> view(IntSpan sizes) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_view(get(), sizes.ssize(), sizes.data(), &out);
        return detail::finish(status, adopt(out));
    }

    /** A view with the new shape when possible, else a contiguous copy. */
    [[nodiscard]] Returns<Tensor> reshape(IntSpan sizes) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_reshape(get(), sizes.ssize(), sizes.data(), &out);
        return detail::finish(status, adopt(out));
    }

    /** Dims reordered: dim i of the result is dim dims[i] of this tensor. */
    [[nodiscard]] Returns<Tensor> permute(IntSpan dims) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_permute(get(), dims.ssize(), dims.data(), &out);
        return detail::finish(status, adopt(out));
    }

    /** Dims `dim0` and `dim1` swapped. */
    [[nodiscard]] Returns<Tensor> transpose(int64_t dim0, int64_t dim1) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_transpose(get(), dim0, dim1, &out);
        return detail::finish(status, adopt(out));
    }

    /** Broadcast to `sizes` without copying (-1 keeps a size). */
    [[nodiscard]] Returns<Tensor> expand(IntSpan sizes) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_expand(get(), sizes.ssize(), sizes.data(), &out);
        return detail::finish(status, adopt(out));
    }

    /** Elements start..start+length of `dim`. */
    [[nodiscard]] Returns<Tensor> narrow(int64_t dim, int64_t start, int64_t length) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_narrow(get(), dim, start, length, &out);
        return detail::finish(status, adopt(out));
    }

    /** Index `index` of `dim`, removing the dim. */
    [[nodiscard]] Returns<Tensor> select(int64_t dim, int64_t index) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_select(get(), dim, index, &out);
        return detail::finish(status, adopt(out));
    }

    /** `dim` removed if its size is 1 (else an unchanged view). */
    [[nodiscard]] Returns<Tensor> squeeze(int64_t dim) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_squeeze(get(), dim, &out);
        return detail::finish(status, adopt(out));
    }

    /** Every size-1 dim removed. */
    [[nodiscard]] Returns<Tensor> squeeze() const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_squeeze_all(get(), &out);
        return detail::finish(status, adopt(out));
    }

    /** A size-1 dim inserted at `dim`. */
    [[nodiscard]] Returns<Tensor> unsqueeze(int64_t dim) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_unsqueeze(get(), dim, &out);
        return detail::finish(status, adopt(out));
    }

    /** Dims start_dim..=end_dim merged into one (a view when possible, else a copy). */
    [[nodiscard]] Returns<Tensor> flatten(int64_t start_dim = 0, int64_t end_dim = -1) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_flatten(get(), start_dim, end_dim, &out);
        return detail::finish(status, adopt(out));
    }

    /** This tensor if contiguous in `format`, else a copy laid out in `format`. */
    [[nodiscard]] Returns<Tensor> contiguous(TsrMemoryFormat format = TSR_CONTIGUOUS) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_contiguous(get(), format, &out);
        return detail::finish(status, adopt(out));
    }

    /** A copy with its own storage (keeping dense strides). */
    [[nodiscard]] Returns<Tensor> clone() const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_clone(get(), &out);
        return detail::finish(status, adopt(out));
    }

    /** An uninitialized tensor with this one's sizes, dtype and device, laid out in `format`. */
    [[nodiscard]] Returns<Tensor> empty_like(TsrMemoryFormat format = TSR_PRESERVE) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_tensor_empty_like(get(), format, &out);
        return detail::finish(status, adopt(out));
    }

    // ---- in-place ----

    /** Sets every element to `value` (converted to the dtype). */
    Returns<void> fill(Scalar value) { return detail::check(tsr_tensor_fill(get(), value.raw())); }

    /** Copies `src` into this tensor, broadcasting and converting. */
    Returns<void> copy_(const Tensor& src) {
        return detail::check(tsr_tensor_copy(get(), src.get()));
    }

    /** Points this tensor at `storage` with contiguous `sizes` from `storage_offset` (c10's set_). */
    Returns<void> set_(const Storage& storage, int64_t storage_offset, IntSpan sizes) {
        return detail::check(tsr_tensor_set(get(), storage.get(), storage_offset, sizes.ssize(),
                                            sizes.data(), nullptr));
    }

    /** Points this tensor at `storage` with `sizes` and `strides` from `storage_offset`. */
    Returns<void> set_(const Storage& storage, int64_t storage_offset, IntSpan sizes,
                       IntSpan strides) {
        if (sizes.size() != strides.size()) {
            return detail::fail<void>(
                TSR_ERR_SHAPE, ("tessera::Tensor::set_: " + std::to_string(sizes.size()) +
                                " sizes but " + std::to_string(strides.size()) + " strides")
                                   .c_str());
        }
        return detail::check(tsr_tensor_set(get(), storage.get(), storage_offset, sizes.ssize(),
                                            sizes.data(), strides.data()));
    }

  private:
    IntSpan span(const int64_t* values) const noexcept {
        int64_t n = ndim();
        return n > 0 ? IntSpan(values, static_cast<size_t>(n)) : IntSpan();
    }

    TsrStatus missing_status() const noexcept {
        return get() == nullptr ? TSR_ERR_NULL_POINTER : TSR_ERR_SHAPE;
    }
};

/** A weak reference to a Tensor. */
using WeakTensor = Weak<Tensor>;

// ---------------------------------------------------------------------------
// Object
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// Iterator
// ---------------------------------------------------------------------------

class Iter;
class IterView;

/** @cond TESSERA_INTERNAL */
namespace detail {

/** Carries a callable and the first exception it threw across the C loop. */
template <class F>
struct CallbackContext {
    F* fn;
#if TESSERA_EXCEPTIONS
    std::atomic<bool> failed{false};
    std::mutex mutex;
    std::exception_ptr error;

    void capture() noexcept {
        std::lock_guard<std::mutex> lock(mutex);
        if (!error) {
            error = std::current_exception();
        }
        failed.store(true, std::memory_order_relaxed);
    }
#endif
    explicit CallbackContext(F* f) noexcept : fn(f) {}
};

/** After the C call: its failure, else the callable's exception, else success. */
template <class F>
Returns<void> finish_callback(TsrStatus status, CallbackContext<F>& context) {
    if (status != TSR_OK) {
        return fail<void>(status, tsr_last_error_message());
    }
#if TESSERA_EXCEPTIONS
    if (context.error) {
        std::rethrow_exception(context.error);
    }
#else
    (void)context;
    return Result<void>();
#endif
}

template <class F>
void loop_trampoline(void* user, char** data, const int64_t* strides, int64_t size0,
                     int64_t size1) noexcept {
    auto* context = static_cast<CallbackContext<F>*>(user);
#if TESSERA_EXCEPTIONS
    if (context->failed.load(std::memory_order_relaxed)) {
        return;  // an earlier chunk threw: skip the rest
    }
    try {
        (*context->fn)(data, strides, size0, size1);
    } catch (...) {
        context->capture();
    }
#else
    (*context->fn)(data, strides, size0, size1);
#endif
}

template <class Acc, class Loop, class Combine>
struct ReduceContext {
    Loop* loop;
    Combine* combine;
};

template <class Acc, class Loop, class Combine>
void reduce_loop_trampoline(void* user, void* acc, char** data, const int64_t* strides,
                            int64_t size0, int64_t size1) noexcept {
    auto* context = static_cast<CallbackContext<ReduceContext<Acc, Loop, Combine>>*>(user);
#if TESSERA_EXCEPTIONS
    if (context->failed.load(std::memory_order_relaxed)) {
        return;
    }
    try {
#endif
        // tessera's accumulator buffers are plain bytes: go through an
        // aligned local copy.
        Acc local;
        std::memcpy(&local, acc, sizeof(Acc));
        (*context->fn->loop)(local, data, strides, size0, size1);
        std::memcpy(acc, &local, sizeof(Acc));
#if TESSERA_EXCEPTIONS
    } catch (...) {
        context->capture();
    }
#endif
}

template <class Acc, class Loop, class Combine>
void reduce_combine_trampoline(void* user, void* acc, const void* other) noexcept {
    auto* context = static_cast<CallbackContext<ReduceContext<Acc, Loop, Combine>>*>(user);
#if TESSERA_EXCEPTIONS
    if (context->failed.load(std::memory_order_relaxed)) {
        return;
    }
    try {
#endif
        Acc mine;
        Acc theirs;
        std::memcpy(&mine, acc, sizeof(Acc));
        std::memcpy(&theirs, other, sizeof(Acc));
        (*context->fn->combine)(mine, static_cast<const Acc&>(theirs));
        std::memcpy(acc, &mine, sizeof(Acc));
#if TESSERA_EXCEPTIONS
    } catch (...) {
        context->capture();
    }
#endif
}

template <class F>
void sub_iter_trampoline(void* user, TsrIter* sub) noexcept;

}  // namespace detail
/** @endcond */

/**
 * The queries and loops of an iterator, shared by Iter (which owns its
 * TsrIter) and IterView (which borrows one).
 *
 * @tparam Derived Iter or IterView (CRTP); provides get().
 */
template <class Derived>
class IterOps {
  public:
    /** The number of loop dims (-1 when empty). */
    int64_t ndim() const noexcept { return tsr_iter_ndim(it()); }

    /** The loop shape, innermost dim first (valid while the iterator lives). */
    IntSpan shape() const noexcept {
        int64_t n = ndim();
        return n > 0 ? IntSpan(tsr_iter_shape(it()), static_cast<size_t>(n)) : IntSpan();
    }

    /** The number of elements visited. */
    int64_t numel() const noexcept { return tsr_iter_numel(it()); }

    /** The number of operands (outputs first). */
    int64_t ntensors() const noexcept { return tsr_iter_ntensors(it()); }

    /** The number of outputs. */
    int64_t noutputs() const noexcept { return tsr_iter_noutputs(it()); }

    /** The number of inputs. */
    int64_t ninputs() const noexcept { return tsr_iter_ninputs(it()); }

    /** Operand `arg`'s byte strides per loop dim (empty when out of range). */
    IntSpan strides(int64_t arg) const noexcept {
        const int64_t* s = tsr_iter_strides(it(), arg);
        int64_t n = ndim();
        return s != nullptr && n > 0 ? IntSpan(s, static_cast<size_t>(n)) : IntSpan();
    }

    /** The dtype operand `arg` is iterated in (-1 when out of range). */
    TsrDType dtype(int64_t arg) const noexcept { return tsr_iter_dtype(it(), arg); }

    /** The common dtype of the build (-1 when there is none). */
    TsrDType common_dtype() const noexcept { return tsr_iter_common_dtype(it()); }

    /** The address of operand `arg`'s first visited element. */
    void* data_ptr(int64_t arg) const noexcept { return tsr_iter_data_ptr(it(), arg); }

    /** Output `i` as the caller sees it (given or allocated); empty when out of range. */
    Tensor output(int64_t i = 0) const noexcept { return Tensor::adopt(tsr_iter_output(it(), i)); }

    /** Whether one loop dim is contiguous for every operand. */
    bool is_contiguous() const noexcept { return tsr_iter_is_contiguous(it()); }

    /** Whether the loop has a single dim. */
    bool is_trivial_1d() const noexcept { return tsr_iter_is_trivial_1d(it()); }

    /** The number of output elements a reduction writes. */
    int64_t num_output_elements() const noexcept { return tsr_iter_num_output_elements(it()); }

    /** The number of leading loop dims along which output 0 does not move. */
    int64_t num_reduce_dims() const noexcept { return tsr_iter_num_reduce_dims(it()); }

    /** Whether every offset fits in 32 bits. */
    bool can_use_32bit_indexing() const noexcept { return tsr_iter_can_use_32bit_indexing(it()); }

    /**
     * Runs `loop(char** data, const int64_t* strides, int64_t size0,
     * int64_t size1)` over every element, in parallel chunks of at least
     * `grain_size` elements (<= 0: 32768), then writes cast outputs back
     * (tsr_iter_for_each). `data[arg]` is operand arg's first element,
     * `strides` the dim-0 byte strides of every operand then the dim-1
     * ones. The callable runs on several threads at once; it may capture
     * anything. If it throws, the remaining chunks are skipped and the
     * first exception is rethrown here.
     */
    template <class F>
    Returns<void> for_each(F&& loop, int64_t grain_size = 0) const {
        using Fn = std::remove_reference_t<F>;
        static_assert(std::is_invocable<Fn&, char**, const int64_t*, int64_t, int64_t>::value,
                      "tessera::for_each: the loop must be callable as (char** data, const "
                      "int64_t* strides, int64_t size0, int64_t size1)");
        detail::CallbackContext<Fn> context(&loop);
        TsrStatus status =
            tsr_iter_for_each(it(), &detail::loop_trampoline<Fn>, &context, grain_size);
        return detail::finish_callback(status, context);
    }

    /**
     * Runs `loop` (as for_each) over the flattened elements [begin, end) on
     * the calling thread; does not write cast outputs back (cast_outputs()).
     */
    template <class F>
    Returns<void> serial_for_each(F&& loop, int64_t begin, int64_t end) const {
        using Fn = std::remove_reference_t<F>;
        static_assert(std::is_invocable<Fn&, char**, const int64_t*, int64_t, int64_t>::value,
                      "tessera::serial_for_each: the loop must be callable as (char** data, "
                      "const int64_t* strides, int64_t size0, int64_t size1)");
        detail::CallbackContext<Fn> context(&loop);
        TsrStatus status =
            tsr_iter_serial_for_each(it(), &detail::loop_trampoline<Fn>, &context, begin, end);
        return detail::finish_callback(status, context);
    }

    /** Copies outputs computed in temporaries of the common dtype into the caller's tensors. */
    Returns<void> cast_outputs() const { return detail::check(tsr_iter_cast_outputs(it())); }

    /**
     * A parallel reduction: every chunk starts from a copy of `identity`,
     * runs `loop(Acc& acc, char** data, const int64_t* strides, int64_t
     * size0, int64_t size1)` over its elements, and the chunk
     * accumulators are merged in chunk order with `combine(Acc& acc, const
     * Acc& other)`. Acc must be trivially copyable and at most 4096 bytes.
     * Returns the combined accumulator.
     */
    template <class Acc, class Loop, class Combine>
    Returns<Acc> parallel_reduce(Acc identity, Loop&& loop, Combine&& combine,
                                 int64_t grain_size = 0) const {
        static_assert(std::is_trivially_copyable<Acc>::value,
                      "tessera::parallel_reduce: Acc must be trivially copyable");
        static_assert(std::is_default_constructible<Acc>::value,
                      "tessera::parallel_reduce: Acc must be default constructible");
        static_assert(sizeof(Acc) <= 4096, "tessera::parallel_reduce: Acc is over 4096 bytes");
        using L = std::remove_reference_t<Loop>;
        using C = std::remove_reference_t<Combine>;
        detail::ReduceContext<Acc, L, C> fns{&loop, &combine};
        detail::CallbackContext<detail::ReduceContext<Acc, L, C>> context(&fns);
        alignas(Acc) unsigned char acc[sizeof(Acc)];
        std::memcpy(acc, &identity, sizeof(Acc));
        TsrStatus status = tsr_iter_parallel_reduce(
            it(), &detail::reduce_loop_trampoline<Acc, L, C>,
            &detail::reduce_combine_trampoline<Acc, L, C>, &context, acc, sizeof(Acc),
            grain_size);
#if TESSERA_EXCEPTIONS
        detail::finish_callback(status, context);
        std::memcpy(&identity, acc, sizeof(Acc));
        return identity;
#else
        Result<void> done = detail::finish_callback(status, context);
        if (!done.ok()) {
            return Result<Acc>::failure(done.status(), done.message());
        }
        std::memcpy(&identity, acc, sizeof(Acc));
        return identity;
#endif
    }

    /**
     * Calls `fn(IterView sub)` once per group of elements that reduce into
     * the same outputs, `sub` being a borrowed sub-iterator valid during
     * the call (run serial_for_each on it). With `parallelize`, calls may
     * run on several threads at once. Exceptions as for_each.
     */
    template <class F>
    Returns<void> foreach_reduced_elt(F&& fn, bool parallelize = true) const {
        using Fn = std::remove_reference_t<F>;
        detail::CallbackContext<Fn> context(&fn);
        TsrStatus status = tsr_iter_foreach_reduced_elt(it(), &detail::sub_iter_trampoline<Fn>,
                                                        &context, parallelize);
        return detail::finish_callback(status, context);
    }

    /**
     * Calls `fn(IterView piece)` for each piece of the iteration
     * addressable with 32-bit offsets, in order (borrowed pieces).
     */
    template <class F>
    Returns<void> for_each_32bit_piece(F&& fn) const {
        using Fn = std::remove_reference_t<F>;
        detail::CallbackContext<Fn> context(&fn);
        TsrStatus status =
            tsr_iter_for_each_32bit_piece(it(), &detail::sub_iter_trampoline<Fn>, &context);
        return detail::finish_callback(status, context);
    }

  private:
    TsrIter* it() const noexcept { return static_cast<const Derived*>(this)->get(); }
};

/**
 * A borrowed iterator (non-owning): what foreach_reduced_elt and
 * for_each_32bit_piece pass to their callables, or a view of an Iter. Valid
 * only while the iterator it views lives.
 */
class IterView : public IterOps<IterView> {
  public:
    /** Views `it` (not owned; may be NULL). */
    explicit IterView(TsrIter* it) noexcept : it_(it) {}

    /** The viewed handle. */
    TsrIter* get() const noexcept { return it_; }

  private:
    TsrIter* it_;
};

/** @cond TESSERA_INTERNAL */
namespace detail {
template <class F>
void sub_iter_trampoline(void* user, TsrIter* sub) noexcept {
    auto* context = static_cast<CallbackContext<F>*>(user);
#if TESSERA_EXCEPTIONS
    if (context->failed.load(std::memory_order_relaxed)) {
        return;
    }
    try {
        (*context->fn)(IterView(sub));
    } catch (...) {
        context->capture();
    }
#else
    (*context->fn)(IterView(sub));
#endif
}
}  // namespace detail
/** @endcond */

/**
 * A built iterator (TsrIter), single-owner and movable: the destructor
 * frees it (tsr_iter_free); moving leaves the source empty. Built by
 * IterConfig::build or one of the c10-style factories below.
 */
class Iter : public IterOps<Iter> {
  public:
    /** Empty. */
    Iter() noexcept = default;

    /** Takes ownership of `it`. */
    explicit Iter(TsrIter* it) noexcept : it_(it) {}

    Iter(const Iter&) = delete;
    Iter& operator=(const Iter&) = delete;

    /** Steals `other`'s iterator; `other` becomes empty. */
    Iter(Iter&& other) noexcept : it_(other.release()) {}

    /** Frees the current iterator and steals `other`'s. */
    Iter& operator=(Iter&& other) noexcept {
        if (this != &other) {
            reset();
            it_ = other.release();
        }
        return *this;
    }

    /** Frees the iterator. */
    ~Iter() { reset(); }

    /** Frees the iterator now; this becomes empty. */
    void reset() noexcept {
        tsr_iter_free(it_);
        it_ = nullptr;
    }

    /** The handle (borrowed). */
    TsrIter* get() const noexcept { return it_; }

    /** Gives up ownership (free it with tsr_iter_free); this becomes empty. */
    TsrIter* release() noexcept {
        TsrIter* it = it_;
        it_ = nullptr;
        return it;
    }

    /** A borrowed view of this iterator. */
    IterView view() const noexcept { return IterView(it_); }

    /** Whether this holds an iterator. */
    explicit operator bool() const noexcept { return it_ != nullptr; }

    /** c10's binary-op iterator writing into `out` (empty `out`: allocated). */
    [[nodiscard]] static Returns<Iter> binary_op(const Tensor& out, const Tensor& a,
                                                 const Tensor& b) {
        TsrIter* it = nullptr;
        TsrStatus status = tsr_iter_binary_op(out.get(), a.get(), b.get(), &it);
        return detail::finish(status, Iter(it));
    }

    /** c10's binary-op iterator with an allocated output. */
    [[nodiscard]] static Returns<Iter> binary_op(const Tensor& a, const Tensor& b) {
        return binary_op(Tensor(), a, b);
    }

    /** As binary_op, with integer inputs computed in Float. */
    [[nodiscard]] static Returns<Iter> binary_float_op(const Tensor& out, const Tensor& a,
                                                       const Tensor& b) {
        TsrIter* it = nullptr;
        TsrStatus status = tsr_iter_binary_float_op(out.get(), a.get(), b.get(), &it);
        return detail::finish(status, Iter(it));
    }

    /** c10's comparison iterator (an allocated output is Bool). */
    [[nodiscard]] static Returns<Iter> comparison_op(const Tensor& out, const Tensor& a,
                                                     const Tensor& b) {
        TsrIter* it = nullptr;
        TsrStatus status = tsr_iter_comparison_op(out.get(), a.get(), b.get(), &it);
        return detail::finish(status, Iter(it));
    }

    /** c10's unary-op iterator (empty `out`: allocated). */
    [[nodiscard]] static Returns<Iter> unary_op(const Tensor& out, const Tensor& a) {
        TsrIter* it = nullptr;
        TsrStatus status = tsr_iter_unary_op(out.get(), a.get(), &it);
        return detail::finish(status, Iter(it));
    }

    /** c10's unary-float-op iterator (integers computed in Float). */
    [[nodiscard]] static Returns<Iter> unary_float_op(const Tensor& out, const Tensor& a) {
        TsrIter* it = nullptr;
        TsrStatus status = tsr_iter_unary_float_op(out.get(), a.get(), &it);
        return detail::finish(status, Iter(it));
    }

    /** An iterator over one output and no input (fills). */
    [[nodiscard]] static Returns<Iter> nullary_op(const Tensor& out) {
        TsrIter* it = nullptr;
        TsrStatus status = tsr_iter_nullary_op(out.get(), &it);
        return detail::finish(status, Iter(it));
    }

    /** A reduction of `a` into `out` (size 1 along every reduced dim). */
    [[nodiscard]] static Returns<Iter> reduce_op(const Tensor& out, const Tensor& a) {
        TsrIter* it = nullptr;
        TsrStatus status = tsr_iter_reduce_op(out.get(), a.get(), &it);
        return detail::finish(status, Iter(it));
    }

  private:
    TsrIter* it_ = nullptr;
};

/**
 * An iterator configuration (TsrIterConfig, c10's TensorIteratorConfig),
 * single-owner and movable. Setters return *this for chaining and never
 * fail on the spot: the first failure (with its message) is kept and
 * reported by build(), so chains work in both error modes:
 *
 * @code
 * auto it = tessera::IterConfig::create().value()  // .value(): Result in no-exceptions mode
 *               .add_output()
 *               .add_input(a)
 *               .add_input(b)
 *               .build();
 * @endcode
 *
 * (With exceptions, IterConfig::create() returns the config itself and
 * `.value()` is not needed.)
 */
class IterConfig {
  public:
    /** Empty (setters on it record TSR_ERR_NULL_POINTER). */
    IterConfig() noexcept = default;

    /** Takes ownership of `config`. */
    explicit IterConfig(TsrIterConfig* config) noexcept : config_(config) {}

    IterConfig(const IterConfig&) = delete;
    IterConfig& operator=(const IterConfig&) = delete;

    /** Steals `other`'s config and recorded failure; `other` becomes empty. */
    IterConfig(IterConfig&& other) noexcept
        : config_(other.release()),
          status_(std::exchange(other.status_, TSR_OK)),
          message_(std::move(other.message_)) {
        other.message_.clear();
    }

    /** Frees the current config and steals `other`'s. */
    IterConfig& operator=(IterConfig&& other) noexcept {
        if (this != &other) {
            reset();
            config_ = other.release();
            status_ = std::exchange(other.status_, TSR_OK);
            message_ = std::move(other.message_);
            other.message_.clear();
        }
        return *this;
    }

    /** Frees the config. */
    ~IterConfig() { reset(); }

    /** A new config with c10's defaults. */
    [[nodiscard]] static Returns<IterConfig> create() {
        TsrIterConfig* out = nullptr;
        TsrStatus status = tsr_iter_config_new(&out);
        return detail::finish(status, IterConfig(out));
    }

    /** Frees the config now; this becomes empty and its recorded failure is cleared. */
    void reset() noexcept {
        tsr_iter_config_free(config_);
        config_ = nullptr;
        status_ = TSR_OK;
        message_.clear();
    }

    /** The handle (borrowed). */
    TsrIterConfig* get() const noexcept { return config_; }

    /** Gives up ownership (free it with tsr_iter_config_free); this becomes empty. */
    TsrIterConfig* release() noexcept {
        TsrIterConfig* config = config_;
        config_ = nullptr;
        return config;
    }

    /** The first failure a setter recorded (TSR_OK if none). */
    TsrStatus status() const noexcept { return status_; }

    /** The message of that failure ("" if none). */
    const std::string& message() const noexcept { return message_; }

    /** Adds an output the build allocates. Outputs come before inputs. */
    IterConfig& add_output() noexcept {
        return record(tsr_iter_config_add_output(config_, nullptr));
    }

    /** Adds `out` as an output (an empty Tensor: allocated). */
    IterConfig& add_output(const Tensor& out) noexcept {
        return record(tsr_iter_config_add_output(config_, out.get()));
    }

    /** Adds `in` as an input. */
    IterConfig& add_input(const Tensor& in) noexcept {
        return record(tsr_iter_config_add_input(config_, in.get()));
    }

    /** Adds a number as an input (a wrapped scalar for promotion). */
    IterConfig& add_input(Scalar value) noexcept {
        return record(tsr_iter_config_add_input_scalar(config_, value.raw()));
    }

    /** Refuse overlapping outputs and partially overlapping inputs (default on). */
    IterConfig& check_mem_overlap(bool on = true) noexcept {
        return record(tsr_iter_config_check_mem_overlap(config_, on));
    }

    /** Accept 0-dim CPU inputs with operands on a device (default off). */
    IterConfig& allow_cpu_scalars(bool on = true) noexcept {
        return record(tsr_iter_config_allow_cpu_scalars(config_, on));
    }

    /** Build a reduction (default off). */
    IterConfig& is_reduction(bool on = true) noexcept {
        return record(tsr_iter_config_is_reduction(config_, on));
    }

    /** Resize defined outputs to the broadcast shape (default on). */
    IterConfig& resize_outputs(bool on = true) noexcept {
        return record(tsr_iter_config_resize_outputs(config_, on));
    }

    /** Require one dtype for all operands (default on). */
    IterConfig& check_all_same_dtype(bool on = true) noexcept {
        return record(tsr_iter_config_check_all_same_dtype(config_, on));
    }

    /** Require one device for all operands (default on). */
    IterConfig& check_all_same_device(bool on = true) noexcept {
        return record(tsr_iter_config_check_all_same_device(config_, on));
    }

    /** Refuse outputs the common dtype cannot safely be cast to (default off). */
    IterConfig& enforce_safe_casting_to_output(bool on = true) noexcept {
        return record(tsr_iter_config_enforce_safe_casting_to_output(config_, on));
    }

    /** Keep the tensors' dim order (default off). */
    IterConfig& enforce_linear_iteration(bool on = true) noexcept {
        return record(tsr_iter_config_enforce_linear_iteration(config_, on));
    }

    /** Compute in the inputs' common dtype (default off). */
    IterConfig& promote_inputs_to_common_dtype(bool on = true) noexcept {
        return record(tsr_iter_config_promote_inputs_to_common_dtype(config_, on));
    }

    /** Compute integer common dtypes in Float (default off). */
    IterConfig& promote_integer_inputs_to_float(bool on = true) noexcept {
        return record(tsr_iter_config_promote_integer_inputs_to_float(config_, on));
    }

    /** Write the common dtype into outputs of other dtypes (default off). */
    IterConfig& cast_common_dtype_to_outputs(bool on = true) noexcept {
        return record(tsr_iter_config_cast_common_dtype_to_outputs(config_, on));
    }

    /** Copy inputs that partially overlap an output instead of refusing them (default off). */
    IterConfig& resolve_overlap_by_copy(bool on = true) noexcept {
        return record(tsr_iter_config_resolve_overlap_by_copy(config_, on));
    }

    /** Fixes the dtype of allocated outputs. */
    IterConfig& declare_static_dtype(TsrDType dtype) noexcept {
        return record(tsr_iter_config_declare_static_dtype(config_, dtype));
    }

    /** Fixes the device of allocated outputs. */
    IterConfig& declare_static_device(Device device) noexcept {
        return record(tsr_iter_config_declare_static_device(config_, device));
    }

    /** Fixes the loop shape instead of broadcasting. */
    IterConfig& declare_static_shape(IntSpan shape) noexcept {
        return record(tsr_iter_config_declare_static_shape(config_, shape.ssize(), shape.data()));
    }

    /**
     * Builds the iterator (the config stays usable). Reports the first
     * failure a setter recorded, if any, else the build's own.
     */
    [[nodiscard]] Returns<Iter> build() {
        if (status_ != TSR_OK) {
            return detail::fail<Iter>(status_, message_.c_str());
        }
        TsrIter* it = nullptr;
        TsrStatus status = tsr_iter_build(config_, &it);
        return detail::finish(status, Iter(it));
    }

  private:
    IterConfig& record(TsrStatus status) noexcept {
        if (status != TSR_OK && status_ == TSR_OK) {
            status_ = status;
#if TESSERA_EXCEPTIONS
            try {
                message_ = tsr_last_error_message();
            } catch (...) {
                message_.clear();  // out of memory for the message: keep the status
            }
#else
            message_ = tsr_last_error_message();
#endif
        }
        return *this;
    }

    TsrIterConfig* config_ = nullptr;
    TsrStatus status_ = TSR_OK;
    std::string message_;
};

// ---------------------------------------------------------------------------
// Built-in kernels (when tessera.h declares them)
// ---------------------------------------------------------------------------

#if defined(TSR_ROUNDING_TRUNC)
/**
 * 1 when tessera.h declares the built-in CPU kernels (tsr_add ... tsr_amax)
 * and tessera.hpp wraps them (tessera::add, ...); undefined otherwise.
 */
#define TESSERA_HAS_KERNELS 1

/** @cond TESSERA_INTERNAL */
namespace detail {
/** A kernel's result: a new reference to the output (`result` read after the call). */
inline Returns<Tensor> kernel_result(TsrStatus status, TsrTensor* result) {
    return finish(status, Tensor::adopt(result));
}
}  // namespace detail
/** @endcond */

/**
 * `a + alpha * b`, broadcast, in the promoted dtype (c10's add; bool adds
 * as logical or), in a new tensor.
 */
[[nodiscard]] inline Returns<Tensor> add(const Tensor& a, const Tensor& b, Scalar alpha = 1) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_add(nullptr, a.get(), b.get(), alpha.raw(), &r);
    return detail::kernel_result(status, r);
}

/** `out = a + alpha * b` into `out` (which may be `a` or `b`; resized when it is not an input). */
inline Returns<void> add_out(const Tensor& out, const Tensor& a, const Tensor& b,
                             Scalar alpha = 1) {
    return detail::check(tsr_add(out.get(), a.get(), b.get(), alpha.raw(), nullptr));
}

/** `a - alpha * b` in a new tensor. */
[[nodiscard]] inline Returns<Tensor> sub(const Tensor& a, const Tensor& b, Scalar alpha = 1) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_sub(nullptr, a.get(), b.get(), alpha.raw(), &r);
    return detail::kernel_result(status, r);
}

/** `out = a - alpha * b` into `out`. */
inline Returns<void> sub_out(const Tensor& out, const Tensor& a, const Tensor& b,
                             Scalar alpha = 1) {
    return detail::check(tsr_sub(out.get(), a.get(), b.get(), alpha.raw(), nullptr));
}

/** `a * b` in a new tensor. */
[[nodiscard]] inline Returns<Tensor> mul(const Tensor& a, const Tensor& b) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_mul(nullptr, a.get(), b.get(), &r);
    return detail::kernel_result(status, r);
}

/** `out = a * b` into `out`. */
inline Returns<void> mul_out(const Tensor& out, const Tensor& a, const Tensor& b) {
    return detail::check(tsr_mul(out.get(), a.get(), b.get(), nullptr));
}

/** True division `a / b` (integers compute in Float) in a new tensor. */
[[nodiscard]] inline Returns<Tensor> div(const Tensor& a, const Tensor& b) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_div(nullptr, a.get(), b.get(), &r);
    return detail::kernel_result(status, r);
}

/**
 * `a / b` rounded by `mode` (TSR_ROUNDING_NONE, TSR_ROUNDING_TRUNC,
 * TSR_ROUNDING_FLOOR; the last two stay in the common dtype and fail with
 * TSR_ERR_ZERO_DIVISION on an integer division by zero), in a new tensor.
 */
[[nodiscard]] inline Returns<Tensor> div(const Tensor& a, const Tensor& b, TsrRoundingMode mode) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_div_rounding(nullptr, a.get(), b.get(), mode, &r);
    return detail::kernel_result(status, r);
}

/** `out = a / b` into `out`. */
inline Returns<void> div_out(const Tensor& out, const Tensor& a, const Tensor& b) {
    return detail::check(tsr_div(out.get(), a.get(), b.get(), nullptr));
}

/** `-a` in a's dtype (bool refused) in a new tensor. */
[[nodiscard]] inline Returns<Tensor> neg(const Tensor& a) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_neg(nullptr, a.get(), &r);
    return detail::kernel_result(status, r);
}

/** `out = -a` into `out` (which may be `a`). */
inline Returns<void> neg_out(const Tensor& out, const Tensor& a) {
    return detail::check(tsr_neg(out.get(), a.get(), nullptr));
}

/**
 * The sum over `dims` (empty: every dim; negative dims count from the
 * end), keeping reduced dims with size 1 when `keepdim`. Integer and bool
 * inputs sum in Long.
 */
[[nodiscard]] inline Returns<Tensor> sum(const Tensor& a, IntSpan dims = {},
                                         bool keepdim = false) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_sum(a.get(), dims.ssize(), dims.data(), keepdim, &r);
    return detail::kernel_result(status, r);
}

/** The maximum over `dims`, as sum(), in a's dtype (NaN if any reduced element is NaN). */
[[nodiscard]] inline Returns<Tensor> amax(const Tensor& a, IntSpan dims = {},
                                          bool keepdim = false) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_amax(a.get(), dims.ssize(), dims.data(), keepdim, &r);
    return detail::kernel_result(status, r);
}

/** A 0-dim tensor holding `value` that promotes as a wrapped number (a Python number in PyTorch). */
[[nodiscard]] inline Returns<Tensor> scalar_tensor(Scalar value) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_scalar_tensor(value.raw(), &r);
    return detail::kernel_result(status, r);
}
#endif  // TSR_ROUNDING_TRUNC

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

/** Hashes a tessera::Weak by its weak handle. */
template <class S>
struct hash<tessera::Weak<S>> {
    /** The hash of `w`'s weak handle. */
    size_t operator()(const tessera::Weak<S>& w) const noexcept {
        return hash<tessera::WeakRef<typename S::handle_type>>()(w.ref());
    }
};

/** Hashes a Storage by its handle. */
template <>
struct hash<tessera::Storage> {
    /** The hash of `s`'s handle. */
    size_t operator()(const tessera::Storage& s) const noexcept {
        return hash<TsrStorage*>()(s.get());
    }
};

/** Hashes a Tensor by its handle. */
template <>
struct hash<tessera::Tensor> {
    /** The hash of `t`'s handle. */
    size_t operator()(const tessera::Tensor& t) const noexcept {
        return hash<TsrTensor*>()(t.get());
    }
};

/** Hashes an Allocator by its handle. */
template <>
struct hash<tessera::Allocator> {
    /** The hash of `a`'s handle. */
    size_t operator()(const tessera::Allocator& a) const noexcept {
        return hash<TsrAllocator*>()(a.get());
    }
};

/** Hashes an Object by its handle. */
template <>
struct hash<tessera::Object> {
    /** The hash of `o`'s handle. */
    size_t operator()(const tessera::Object& o) const noexcept {
        return hash<TsrObject*>()(o.get());
    }
};

}  // namespace std

#endif  // TESSERA_HPP
