/**
 * @file tessera/types.hpp
 * @brief Small value types (IntSpan, Device, dtype_of, Scalar) and the
 * library-wide functions (version, threads, dtypes, CUDA).
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_TYPES_HPP
#define TESSERA_TYPES_HPP

#include "../tessera.h"
#include "error.hpp"

#include <array>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>
#include <vector>

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

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

/** @cond detail */
namespace detail {

/** `s` (a TsrScalar of any tag) as `T`: a bool, an arithmetic type or a
    std::complex, converted as a static_cast from the member its tag selects. */
template <class T>
struct is_complex : std::false_type {};
template <class R>
struct is_complex<std::complex<R>> : std::true_type {};

template <class T>
T scalar_as(const TsrScalar& s) noexcept {
    const bool boolean = s.dtype == TSR_BOOL;
    const bool complex = tsr_dtype_is_complex(s.dtype);
    const bool floating = tsr_dtype_is_floating(s.dtype);
    const bool wide_unsigned =
        s.dtype == TSR_UINT16 || s.dtype == TSR_UINT32 || s.dtype == TSR_UINT64;
    if constexpr (is_complex<T>::value) {
        using R = typename T::value_type;
        if (complex) return T(static_cast<R>(s.v.c.re), static_cast<R>(s.v.c.im));
        if (floating) return T(static_cast<R>(s.v.f), R(0));
        if (boolean) return T(static_cast<R>(s.v.b), R(0));
        if (wide_unsigned) return T(static_cast<R>(s.v.u), R(0));
        return T(static_cast<R>(s.v.i), R(0));
    } else {
        if (complex) return static_cast<T>(s.v.c.re);
        if (floating) return static_cast<T>(s.v.f);
        if (boolean) return static_cast<T>(s.v.b);
        if (wide_unsigned) return static_cast<T>(s.v.u);
        return static_cast<T>(s.v.i);
    }
}

}  // namespace detail
/** @endcond */

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

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

#endif  // TESSERA_TYPES_HPP
