/**
 * @file tessera/cpu_kernel.hpp
 * @brief Typed element-wise kernels over an iterator: tessera::cpu_kernel
 * and tessera::cpu_serial_kernel (c10's), the operand count and dtypes
 * taken from the callable's signature.
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_CPU_KERNEL_HPP
#define TESSERA_CPU_KERNEL_HPP

#include "../tessera.h"
#include "error.hpp"
#include "types.hpp"
#include "iter.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>

/** @cond TESSERA_INTERNAL */
#if defined(__x86_64__) || defined(_M_X64)
#include <emmintrin.h>
#define TESSERA_KERNEL_STREAM 1
#else
#define TESSERA_KERNEL_STREAM 0
#endif
/** @endcond */

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

/** @cond TESSERA_INTERNAL */
namespace detail {

/** The return type and the decayed argument types of a callable. */
template <class F>
struct kernel_traits : kernel_traits<decltype(&std::decay_t<F>::operator())> {};
template <class R, class... A>
struct kernel_traits<R (*)(A...)> {
    using result = R;
    using args = std::tuple<std::decay_t<A>...>;
    static constexpr size_t arity = sizeof...(A);
};
template <class R, class... A>
struct kernel_traits<R(A...)> : kernel_traits<R (*)(A...)> {};
template <class R, class... A>
struct kernel_traits<R (*)(A...) noexcept> : kernel_traits<R (*)(A...)> {};
template <class C, class R, class... A>
struct kernel_traits<R (C::*)(A...)> : kernel_traits<R (*)(A...)> {};
template <class C, class R, class... A>
struct kernel_traits<R (C::*)(A...) const> : kernel_traits<R (*)(A...)> {};
template <class C, class R, class... A>
struct kernel_traits<R (C::*)(A...) noexcept> : kernel_traits<R (*)(A...)> {};
template <class C, class R, class... A>
struct kernel_traits<R (C::*)(A...) const noexcept> : kernel_traits<R (*)(A...)> {};

/** Whether dtype_of<T> is defined (T has a dtype). */
template <class T, class = void>
struct has_dtype : std::false_type {};
template <class T>
struct has_dtype<T, std::void_t<decltype(dtype_of<T>::value)>> : std::true_type {};

template <class Tuple>
struct all_have_dtype;
template <class... A>
struct all_have_dtype<std::tuple<A...>>
    : std::integral_constant<bool, (has_dtype<A>::value && ...)> {};

/** The T at `p` (any alignment). */
template <class T>
inline T kernel_load(const char* p) noexcept {
    T v;
    std::memcpy(&v, p, sizeof(T));
    return v;
}

/** Elements per block of the contiguous path: a multiple of every vector width. */
constexpr int64_t kernel_block = 32;

/**
 * Outputs of at least this many bytes are written with non-temporal
 * stores, as tessera's built-in kernels write theirs (32 MiB: they cannot
 * stay in the cache, and streaming skips reading every destination line
 * before writing it).
 */
constexpr int64_t kernel_stream_min_bytes = int64_t{32} << 20;

/** Stores the `bytes` (a multiple of 16) at `src` to 16-byte aligned `dst`, bypassing the cache. */
inline void kernel_stream(char* dst, const void* src, size_t bytes) noexcept {
#if TESSERA_KERNEL_STREAM
    const char* from = static_cast<const char*>(src);
    for (size_t k = 0; k < bytes; k += 16) {
        _mm_stream_si128(reinterpret_cast<__m128i*>(dst + k),
                         _mm_loadu_si128(reinterpret_cast<const __m128i*>(from + k)));
    }
#else
    std::memcpy(dst, src, bytes);
#endif
}

/**
 * One inner run of `n` elements. Contiguous (every operand's stride is its
 * element size): blocks of kernel_block elements whose inputs are loaded
 * and whose results are gathered in a local array before they are stored,
 * so that a fixed-length loop with no possible aliasing is left, which GCC
 * and Clang vectorize at -O2; then the tail. Otherwise element by element
 * through the strides.
 */
template <class F, class R, class... A, size_t... I>
inline void kernel_run(F& f, char* out, int64_t out_stride, char* const* in,
                       const int64_t* in_strides, int64_t n, bool stream,
                       std::index_sequence<I...>) {
    constexpr int64_t rsize = static_cast<int64_t>(sizeof(R));
    const bool contiguous =
        out_stride == rsize && ((in_strides[I] == static_cast<int64_t>(sizeof(A))) && ...);
    if (contiguous) {
        int64_t i = 0;
        auto one = [&](int64_t e) {
            R r = f(kernel_load<A>(in[I] + e * static_cast<int64_t>(sizeof(A)))...);
            std::memcpy(out + e * rsize, &r, sizeof(R));
        };
        if (stream) {
            // Up to the first 16-byte boundary one by one; an output that
            // never reaches one is not streamed.
            for (; i < n && i < 16 && reinterpret_cast<uintptr_t>(out + i * rsize) % 16 != 0; i++) {
                one(i);
            }
            stream = reinterpret_cast<uintptr_t>(out + i * rsize) % 16 == 0;
        }
        for (; i + kernel_block <= n; i += kernel_block) {
            R block[kernel_block];
            for (int64_t k = 0; k < kernel_block; k++) {
                block[k] = f(kernel_load<A>(in[I] + (i + k) * static_cast<int64_t>(sizeof(A)))...);
            }
            if (stream) {
                kernel_stream(out + i * rsize, block, sizeof block);
            } else {
                std::memcpy(out + i * rsize, block, sizeof block);
            }
        }
#if TESSERA_KERNEL_STREAM
        if (stream) {
            _mm_sfence();
        }
#endif
        for (; i < n; i++) {
            one(i);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) {
        R r = f(kernel_load<A>(in[I] + i * in_strides[I])...);
        std::memcpy(out + i * out_stride, &r, sizeof(R));
    }
}

/** The 2-D loop body a typed kernel runs: `size1` inner runs of `size0`. */
template <class F, class R, class... A>
struct KernelLoop {
    F* f;
    /** Write contiguous outputs with non-temporal stores (large outputs). */
    bool stream;
    void operator()(char** data, const int64_t* strides, int64_t size0, int64_t size1) const {
        constexpr size_t n = 1 + sizeof...(A);
        char* ptrs[n];
        for (size_t k = 0; k < n; k++) {
            ptrs[k] = data[k];
        }
        for (int64_t j = 0; j < size1; j++) {
            if (j > 0) {
                for (size_t k = 0; k < n; k++) {
                    ptrs[k] += strides[n + k];
                }
            }
            kernel_run<F, R, A...>(*f, ptrs[0], strides[0], ptrs + 1, strides + 1, size0, stream,
                                   std::index_sequence_for<A...>());
        }
    }
};

template <class F, class R, class Tuple>
struct kernel_loop_of;
template <class F, class R, class... A>
struct kernel_loop_of<F, R, std::tuple<A...>> {
    using type = KernelLoop<F, R, A...>;
};

/**
 * Whether `it` has the operands and dtypes of a kernel returning R and
 * taking the types of `Args` (a tuple); else the failure, naming the
 * operand, the iterated dtype and the kernel's.
 */
template <class R, class Args, class Derived, size_t... I>
Result<void> kernel_check(const char* what, const IterOps<Derived>& it,
                          std::index_sequence<I...>) {
    constexpr int64_t arity = static_cast<int64_t>(sizeof...(I));
    if (it.ntensors() < 0) {
        return Result<void>::failure(TSR_ERR_NULL_POINTER,
                                     std::string(what) + ": the iterator is empty");
    }
    if (it.noutputs() != 1 || it.ninputs() != arity) {
        return Result<void>::failure(
            TSR_ERR_INVALID_ARGUMENT,
            std::string(what) + ": the iterator has " + std::to_string(it.noutputs()) +
                " output(s) and " + std::to_string(it.ninputs()) +
                " input(s), but the kernel returns one value and takes " +
                std::to_string(arity) + " argument(s): expected 1 output and " +
                std::to_string(arity) + " input(s)");
    }
    const TsrDType want[] = {dtype_of<R>::value,
                             dtype_of<std::tuple_element_t<I, Args>>::value...};
    for (int64_t arg = 0; arg <= arity; arg++) {
        TsrDType got = it.dtype(arg);
        if (got != want[arg]) {
            std::string operand = arg == 0 ? std::string("output 0 (operand 0)")
                                           : "input " + std::to_string(arg - 1) +
                                                 " (operand " + std::to_string(arg) + ")";
            std::string side = arg == 0 ? std::string("returns")
                                        : "takes as argument " + std::to_string(arg - 1);
            return Result<void>::failure(
                TSR_ERR_DTYPE,
                std::string(what) + ": " + operand + " is iterated as " + tsr_dtype_name(got) +
                    ", but the kernel " + side + " " + tsr_dtype_name(want[arg]) +
                    ": expected the kernel's types to be the iterator's (make the kernel use " +
                    tsr_dtype_name(got) + ", or build the iterator so that this operand is " +
                    tsr_dtype_name(want[arg]) + ")");
        }
    }
    return Result<void>();
}

/** What cpu_kernel and cpu_serial_kernel know of `F` at compile time. */
template <class F>
struct kernel_of {
    using traits = kernel_traits<std::decay_t<F>>;
    using result = typename traits::result;
    using args = typename traits::args;
    static_assert(!std::is_void<result>::value,
                  "tessera::cpu_kernel: the kernel must return the output's value");
    static_assert(has_dtype<result>::value,
                  "tessera::cpu_kernel: the kernel's return type has no tessera dtype "
                  "(tessera::dtype_of: bool, the fixed-width integers, float, double, "
                  "std::complex<float>, std::complex<double>)");
    static_assert(all_have_dtype<args>::value,
                  "tessera::cpu_kernel: an argument type of the kernel has no tessera dtype "
                  "(tessera::dtype_of: bool, the fixed-width integers, float, double, "
                  "std::complex<float>, std::complex<double>)");
    /** The loop body over a callable of type std::remove_reference_t<F>. */
    using loop = typename kernel_loop_of<std::remove_reference_t<F>, result, args>::type;

    /** The checks of kernel_check, in the error mode's form. */
    template <class Derived>
    static Returns<void> check(const char* what, const IterOps<Derived>& it) {
        Result<void> checked = kernel_check<result, args>(
            what, it, std::make_index_sequence<std::tuple_size<args>::value>());
        if (!checked.ok()) {
            return fail<void>(checked.status(), checked.message().c_str());
        }
#if !TESSERA_EXCEPTIONS
        return Result<void>();
#endif
    }
};

}  // namespace detail
/** @endcond */

/**
 * Runs the element-wise kernel `f` over the built iterator `it` (an Iter
 * or an IterView), on tessera's thread pool as Iter::for_each (chunks of
 * at least `grain_size` elements; <= 0: 32768), then writes cast outputs
 * back.
 *
 * As c10's cpu_kernel: `f` returns the value of the one output (operand 0)
 * and takes one argument per input, in order; the operand count and each
 * operand's element type come from its signature, e.g.
 *
 * @code
 * tessera::Iter it = tessera::Iter::binary_op(a, b);   // Float a and b
 * tessera::cpu_kernel(it, [](float x, float y) { return x + y; });
 * tessera::Tensor sum = it.output();
 * @endcode
 *
 * Before any element is touched, `it` must have exactly one output and as
 * many inputs as `f` has arguments (else TSR_ERR_INVALID_ARGUMENT), and
 * each operand must be iterated in the dtype of its C++ type
 * (tessera::dtype_of against Iter::dtype): else TSR_ERR_DTYPE, whose
 * message names the operand, the dtype it is iterated in and the kernel's
 * (as when type promotion made an input Double and `f` takes float). An
 * empty iterator: TSR_ERR_NULL_POINTER. A failure throws tessera::Error or
 * returns a failed Result, as the error mode says.
 *
 * Each inner run whose operands are all contiguous goes through
 * fixed-length blocks that the compiler can vectorize (GCC and Clang at
 * -O2), written with non-temporal stores on x86-64 when the output has
 * 32 MiB or more (as tessera's built-in kernels write theirs); other runs
 * go element by element through the strides. `f` runs
 * on several threads at once: it may capture anything but must be safe to
 * call concurrently. If it throws, the remaining chunks are skipped and
 * the first exception is rethrown here.
 */
template <class Derived, class F>
Returns<void> cpu_kernel(const IterOps<Derived>& it, F&& f, int64_t grain_size = 0) {
    using K = detail::kernel_of<F>;
#if TESSERA_EXCEPTIONS
    K::check("tessera::cpu_kernel", it);
#else
    Result<void> ready = K::check("tessera::cpu_kernel", it);
    if (!ready.ok()) {
        return ready;
    }
#endif
    typename K::loop loop{&f, it.numel() >= detail::kernel_stream_min_bytes /
                                              static_cast<int64_t>(sizeof(typename K::result))};
    return it.for_each(loop, grain_size);
}

/**
 * cpu_kernel on the calling thread: every element in order (one
 * serial_for_each over [0, numel)), then the cast outputs written back.
 * The same checks and failures; `f` need not be thread-safe.
 */
template <class Derived, class F>
Returns<void> cpu_serial_kernel(const IterOps<Derived>& it, F&& f) {
    using K = detail::kernel_of<F>;
    typename K::loop loop{&f, it.numel() >= detail::kernel_stream_min_bytes /
                                  static_cast<int64_t>(sizeof(typename K::result))};
#if TESSERA_EXCEPTIONS
    K::check("tessera::cpu_serial_kernel", it);
    it.serial_for_each(loop, 0, it.numel());
    it.cast_outputs();
#else
    Result<void> done = K::check("tessera::cpu_serial_kernel", it);
    if (done.ok()) {
        done = it.serial_for_each(loop, 0, it.numel());
    }
    if (done.ok()) {
        done = it.cast_outputs();
    }
    return done;
#endif
}

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

#endif  // TESSERA_CPU_KERNEL_HPP
