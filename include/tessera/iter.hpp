/**
 * @file tessera/iter.hpp
 * @brief The iterator: IterConfig (c10's TensorIteratorConfig), Iter,
 * IterView and their loops.
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_ITER_HPP
#define TESSERA_ITER_HPP

#include "../tessera.h"
#include "error.hpp"
#include "types.hpp"
#include "tensor.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

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

    /**
     * Adds `out` as an output borrowed as c10's add_borrowed_output: the
     * config takes no reference, so `out` must outlive build() (the
     * iterator holds its own). An empty Tensor: allocated by the build.
     */
    IterConfig& add_borrowed_output(const Tensor& out) noexcept {
        return record(tsr_iter_config_add_borrowed_output(config_, out.get()));
    }
    /** Borrowing from a temporary would dangle (as in c10). */
    IterConfig& add_borrowed_output(Tensor&&) = delete;

    /** Adds `in` as an input borrowed as c10's add_borrowed_input (see add_borrowed_output). */
    IterConfig& add_borrowed_input(const Tensor& in) noexcept {
        return record(tsr_iter_config_add_borrowed_input(config_, in.get()));
    }
    IterConfig& add_borrowed_input(Tensor&&) = delete;

    /** c10's add_borrowed_const_input: the same as add_borrowed_input. */
    IterConfig& add_borrowed_const_input(const Tensor& in) noexcept {
        return record(tsr_iter_config_add_borrowed_const_input(config_, in.get()));
    }
    IterConfig& add_borrowed_const_input(Tensor&&) = delete;

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

    /** Fixes the loop shape with the dims in `squash_dims` set to 1. */
    IterConfig& declare_static_shape(IntSpan shape, IntSpan squash_dims) noexcept {
        return record(tsr_iter_config_declare_static_shape_squashed(
            config_, shape.ssize(), shape.data(), squash_dims.ssize(), squash_dims.data()));
    }

    /**
     * Outputs the build allocates come from `allocator` (the config keeps
     * its own reference); nullptr: the registry's allocator again.
     */
    IterConfig& output_allocator(TsrAllocator* allocator) noexcept {
        return record(tsr_iter_config_output_allocator(config_, allocator));
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

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

#endif  // TESSERA_ITER_HPP
