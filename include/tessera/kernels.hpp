/**
 * @file tessera/kernels.hpp
 * @brief The built-in CPU kernels (tessera::add ... amax, amin, prod, mean, vector_norm, max_dim, min_dim), when tessera.h
 * declares them.
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_KERNELS_HPP
#define TESSERA_KERNELS_HPP

#include "../tessera.h"
#include "error.hpp"
#include "types.hpp"
#include "tensor.hpp"

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

#if defined(TSR_ROUNDING_TRUNC)
/**
 * 1 when tessera.h declares the built-in CPU kernels (tsr_add ... tsr_amax, tsr_amin)
 * and tessera/kernels.hpp (included by tessera.hpp) wraps them
 * (tessera::add, ...); undefined otherwise.
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

/** The product over `dims`, as sum() (integer and bool inputs multiply in Long). */
[[nodiscard]] inline Returns<Tensor> prod(const Tensor& a, IntSpan dims = {},
                                          bool keepdim = false) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_prod(a.get(), dims.ssize(), dims.data(), keepdim, &r);
    return detail::kernel_result(status, r);
}

/** The mean over `dims`, as sum(), of a floating or complex tensor (half and bfloat16 summed in float). */
[[nodiscard]] inline Returns<Tensor> mean(const Tensor& a, IntSpan dims = {},
                                          bool keepdim = false) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_mean(a.get(), dims.ssize(), dims.data(), keepdim, &r);
    return detail::kernel_result(status, r);
}

/** The maximum over `dims`, as sum(), in a's dtype (NaN if any reduced element is NaN). */
[[nodiscard]] inline Returns<Tensor> amax(const Tensor& a, IntSpan dims = {},
                                          bool keepdim = false) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_amax(a.get(), dims.ssize(), dims.data(), keepdim, &r);
    return detail::kernel_result(status, r);
}

/** The minimum over `dims`, as amax() (NaN if any reduced element is NaN). */
[[nodiscard]] inline Returns<Tensor> amin(const Tensor& a, IntSpan dims = {},
                                          bool keepdim = false) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_amin(a.get(), dims.ssize(), dims.data(), keepdim, &r);
    return detail::kernel_result(status, r);
}

/**
 * The `ord` vector norm over `dims` (c10's `linalg.vector_norm`): 2, 1,
 * INFINITY, -INFINITY, 0 or any p; floating and complex inputs, the
 * result in a's real dtype.
 */
[[nodiscard]] inline Returns<Tensor> vector_norm(const Tensor& a, double ord = 2,
                                                 IntSpan dims = {}, bool keepdim = false) {
    TsrTensor* r = nullptr;
    TsrStatus status = tsr_vector_norm(a.get(), ord, dims.ssize(), dims.data(), keepdim, &r);
    return detail::kernel_result(status, r);
}

/** The values and Long indices of max_dim() and min_dim(). */
struct ValuesIndices {
    Tensor values;   /**< a's dtype */
    Tensor indices;  /**< TSR_LONG */
};

/**
 * The maximum along `dim` with its index (c10's `max(dim)`): the first
 * occurrence; where the dim holds a NaN, NaN and the first NaN's index.
 */
[[nodiscard]] inline Returns<ValuesIndices> max_dim(const Tensor& a, int64_t dim,
                                                    bool keepdim = false) {
    TsrTensor *v = nullptr, *i = nullptr;
    TsrStatus status = tsr_max_dim(a.get(), dim, keepdim, &v, &i);
    return detail::finish(status, ValuesIndices{Tensor::adopt(v), Tensor::adopt(i)});
}

/** The minimum along `dim` with its index, as max_dim() mirrored. */
[[nodiscard]] inline Returns<ValuesIndices> min_dim(const Tensor& a, int64_t dim,
                                                    bool keepdim = false) {
    TsrTensor *v = nullptr, *i = nullptr;
    TsrStatus status = tsr_min_dim(a.get(), dim, keepdim, &v, &i);
    return detail::finish(status, ValuesIndices{Tensor::adopt(v), Tensor::adopt(i)});
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

#endif  // TESSERA_KERNELS_HPP
