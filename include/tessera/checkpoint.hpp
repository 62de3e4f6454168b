/**
 * @file tessera/checkpoint.hpp
 * @brief Checkpoint: a checkpoint opened once (its index only) and loaded
 * in parts: one tensor, rows of one, a set in parallel with progress,
 * into memory of the allocator registered for a device, or into a buffer.
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_CHECKPOINT_HPP
#define TESSERA_CHECKPOINT_HPP

#include "../tessera.h"
#include "error.hpp"
#include "serialize.hpp"
#include "tensor.hpp"
#include "types.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

/**
 * A checkpoint opened with tsr_checkpoint_open, the single owner of its
 * handle: movable, not copyable; closed when destroyed (tensors loaded
 * from it stay valid). Loads may run from several threads at once.
 */
class Checkpoint {
  public:
    /** Empty: holds no checkpoint. */
    Checkpoint() noexcept = default;
    /** Takes over a checkpoint the caller opened. */
    explicit Checkpoint(TsrCheckpoint* handle) noexcept : handle_(handle) {}
    /** Takes `other`'s checkpoint, leaving it empty. */
    Checkpoint(Checkpoint&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    /** Closes this checkpoint, then takes `other`'s. */
    Checkpoint& operator=(Checkpoint&& other) noexcept {
        if (this != &other) {
            tsr_checkpoint_close(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    Checkpoint(const Checkpoint&) = delete;
    Checkpoint& operator=(const Checkpoint&) = delete;
    ~Checkpoint() { tsr_checkpoint_close(handle_); }

    /** Opens `path` reading only its index (flags: as tsr_load's). */
    [[nodiscard]] static Returns<Checkpoint> open(const char* path, Format format = Format::Auto,
                                                  uint32_t flags = 0) {
        TsrCheckpoint* out = nullptr;
        TsrStatus status = tsr_checkpoint_open(path, static_cast<TsrFormat>(format), flags, &out);
        return detail::finish(status, Checkpoint(out));
    }

    /**
     * Opens `path` with `n` settings over the environment's for a URL
     * (tsr_checkpoint_open_with: {"AWS_ENDPOINT_URL", "..."},
     * {"TSR_REMOTE_CONCURRENCY", "16"}, ...).
     */
    [[nodiscard]] static Returns<Checkpoint> open_with(const char* path, const TsrSetting* settings,
                                                       size_t n, Format format = Format::Auto,
                                                       uint32_t flags = 0) {
        TsrCheckpoint* out = nullptr;
        TsrStatus status = tsr_checkpoint_open_with(path, static_cast<TsrFormat>(format), flags,
                                                    settings, n, &out);
        return detail::finish(status, Checkpoint(out));
    }

    /** The number of tensors. */
    size_t size() const noexcept { return tsr_checkpoint_size(handle_); }
    /** Tensor `i`'s name (nullptr past the end). */
    const char* name(size_t i) const noexcept { return tsr_checkpoint_name(handle_, i); }
    /** Tensor `i`'s dtype (-1 past the end). */
    TsrDType dtype(size_t i) const noexcept { return tsr_checkpoint_dtype(handle_, i); }
    /** Tensor `i`'s sizes (empty past the end). */
    IntSpan sizes(size_t i) const noexcept {
        int64_t n = tsr_checkpoint_ndim(handle_, i);
        const int64_t* s = tsr_checkpoint_sizes(handle_, i);
        return n > 0 && s != nullptr ? IntSpan(s, static_cast<size_t>(n)) : IntSpan();
    }
    /** Tensor `i`'s bytes in row-major order (0 past the end). */
    uint64_t nbytes(size_t i) const noexcept { return tsr_checkpoint_nbytes(handle_, i); }
    /** The bytes read from its files since open. */
    uint64_t bytes_read() const noexcept { return tsr_checkpoint_bytes_read(handle_); }

    /** One tensor, into memory of the allocator registered for `device`. */
    [[nodiscard]] Returns<Tensor> load(const char* name, Device device = Device::cpu()) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_checkpoint_load(handle_, name, device, 0, &out);
        return detail::finish(status, Tensor::adopt(out));
    }

    /** Rows [start, stop) along dim 0 of one tensor, reading only their bytes. */
    [[nodiscard]] Returns<Tensor> load_rows(const char* name, int64_t start, int64_t stop,
                                            Device device = Device::cpu()) const {
        TsrTensor* out = nullptr;
        TsrStatus status = tsr_checkpoint_load_rows(handle_, name, start, stop, device, 0, &out);
        return detail::finish(status, Tensor::adopt(out));
    }

    /** `n` tensors named in `names` (nullptr: all), fetched in parallel
        (`options`: nullptr for the defaults). */
    [[nodiscard]] Returns<TensorDict> load_many(const char* const* names = nullptr, size_t n = 0,
                                                Device device = Device::cpu(),
                                                const TsrLoadOptions* options = nullptr) const {
        TsrTensorDict* out = nullptr;
        TsrStatus status =
            tsr_checkpoint_load_many_with(handle_, names, n, device, 0, options, &out);
        return detail::finish(status, TensorDict(out));
    }

    /** One tensor's row-major bytes into `dst` of exactly nbytes(its index). */
    Returns<void> read_into(const char* name, void* dst, size_t nbytes) const {
        return detail::check(tsr_checkpoint_read_into(handle_, name, dst, nbytes));
    }

    /** The handle (still owned by this object). */
    TsrCheckpoint* get() const noexcept { return handle_; }
    /** True when this object holds a checkpoint. */
    explicit operator bool() const noexcept { return handle_ != nullptr; }

  private:
    TsrCheckpoint* handle_ = nullptr;
};

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

#endif
