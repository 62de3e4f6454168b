/**
 * @file tessera/error.hpp
 * @brief Errors in both modes: tessera::Error, Result<T>, Returns<T> and the
 * TESSERA_EXCEPTIONS switch.
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_ERROR_HPP
#define TESSERA_ERROR_HPP

#include "../tessera.h"

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

/**
 * @def TESSERA_EXCEPTIONS
 * 1 when fallible functions throw tessera::Error, 0 when they return
 * tessera::Result. Computed by tessera/error.hpp, which every tessera
 * header includes (do not define it): 0 when the compiler has exceptions
 * turned off (-fno-exceptions) or when TESSERA_NO_EXCEPTIONS is defined
 * before the header is included, else 1.
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
/** @endcond */

/** tessera's C++ API. */
namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

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

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

/**
 * @def TESSERA_VALUE
 * The value of a fallible call, written once for both error modes:
 * `tessera::Tensor t = TESSERA_VALUE(tessera::Tensor::full({2, 3}, 1.5));`.
 * With exceptions the call itself (a failure has thrown tessera::Error);
 * without (-fno-exceptions, TESSERA_NO_EXCEPTIONS) its Result's value()
 * (a failure prints the message and aborts). Also for calls returning
 * Returns<void>, as a statement.
 */
#if TESSERA_EXCEPTIONS
#define TESSERA_VALUE(...) (__VA_ARGS__)
#else
#define TESSERA_VALUE(...) (__VA_ARGS__).value()
#endif

#endif  // TESSERA_ERROR_HPP
