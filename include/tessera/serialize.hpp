/**
 * @file tessera/serialize.hpp
 * @brief TensorDict: an ordered name -> tensor map with string metadata,
 * saved and loaded in the formats of TSR_FORMAT_* (torch.save, safetensors,
 * DCP directories, ...) and as Hugging Face sharded checkpoints.
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_SERIALIZE_HPP
#define TESSERA_SERIALIZE_HPP

#include "../tessera.h"
#include "error.hpp"
#include "storage.hpp"
#include "tensor.hpp"

#include <cstddef>
#include <cstdint>
#include <utility>

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

/** A file format (TSR_FORMAT_*). */
enum class Format : TsrFormat {
    /** Load: detected from the bytes (the content decides, not the name);
     *  save: the format the path's extension names (".safetensors", ".npy",
     *  ".npz", ".gguf"), else torch. */
    Auto = TSR_FORMAT_AUTO,
    /** torch.save's zip archive. */
    Torch = TSR_FORMAT_TORCH,
    /** The safetensors layout. */
    Safetensors = TSR_FORMAT_SAFETENSORS,
    /** NumPy's .npy: one array ("arr_0" in the dict), no metadata. */
    Npy = TSR_FORMAT_NPY,
    /** torch.save's format before PyTorch 1.6 (read only). */
    TorchLegacy = TSR_FORMAT_TORCH_LEGACY,
    /** A TorchScript archive (torch.jit.save; read only). */
    TorchScript = TSR_FORMAT_TORCHSCRIPT,
    /** NumPy's .npz (np.savez / np.savez_compressed): entry "NAME.npy" is
     *  tensor "NAME"; no metadata. */
    Npz = TSR_FORMAT_NPZ,
    /** llama.cpp's GGUF (versions 3 and 2): typed key-value metadata,
     *  quantized tensors as uint8 blocks. */
    Gguf = TSR_FORMAT_GGUF,
    /** torch.distributed.checkpoint: a directory (.metadata + .distcp files). */
    Dcp = TSR_FORMAT_DCP,
};

/**
 * An ordered name -> tensor map with string metadata (TsrTensorDict), the
 * single owner of its handle: movable, not copyable. Iterating gives
 * (name, tensor) pairs in insertion order. Names and metadata strings
 * returned stay valid until the dict is changed or destroyed.
 */
class TensorDict {
  public:
    /** Empty: holds no dict (fallible calls report TSR_ERR_NULL_POINTER). */
    TensorDict() noexcept = default;

    /** Takes over a dict the caller owns. */
    explicit TensorDict(TsrTensorDict* handle) noexcept : handle_(handle) {}

    /** Takes `other`'s dict, leaving it empty. */
    TensorDict(TensorDict&& other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    /** Frees this dict, then takes `other`'s. */
    TensorDict& operator=(TensorDict&& other) noexcept {
        if (this != &other) {
            tsr_dict_free(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    TensorDict(const TensorDict&) = delete;
    TensorDict& operator=(const TensorDict&) = delete;
    ~TensorDict() { tsr_dict_free(handle_); }

    /** A new, empty dict. */
    [[nodiscard]] static Returns<TensorDict> create() {
        TsrTensorDict* out = nullptr;
        TsrStatus status = tsr_dict_new(&out);
        return detail::finish(status, TensorDict(out));
    }

    /** Loads the file at `path` (flags: 0 or TSR_LOAD_MMAP). */
    [[nodiscard]] static Returns<TensorDict> load(const char* path, Format format = Format::Auto,
                                                  uint32_t flags = 0) {
        TsrTensorDict* out = nullptr;
        TsrStatus status = tsr_load(path, static_cast<TsrFormat>(format), flags, &out);
        return detail::finish(status, TensorDict(out));
    }

    /** Loads from file bytes held by a CPU storage (tensors view that storage where aligned). */
    [[nodiscard]] static Returns<TensorDict> load(const Storage& bytes,
                                                  Format format = Format::Auto) {
        TsrTensorDict* out = nullptr;
        TsrStatus status =
            tsr_load_from_storage(bytes.get(), static_cast<TsrFormat>(format), 0, &out);
        return detail::finish(status, TensorDict(out));
    }

    /** Saves to the file at `path`, replacing it atomically (tsr_save_flags;
        `flags`: 0 or TSR_SAVE_SYNC). */
    Returns<void> save(const char* path, Format format = Format::Auto,
                       uint32_t flags = 0) const {
        return detail::check(
            tsr_save_flags(handle_, path, static_cast<TsrFormat>(format), flags));
    }

    /** Saves into the directory `directory` as a Hugging Face sharded
        checkpoint: shards of at most `max_shard_bytes` bytes of tensors
        plus the index, named as transformers' save_pretrained names them
        (tsr_save_sharded; `format`: Safetensors / Auto or Torch;
        `flags`: 0 or TSR_SAVE_SYNC). */
    Returns<void> save_sharded(const char* directory, uint64_t max_shard_bytes,
                               Format format = Format::Safetensors, uint32_t flags = 0) const {
        return detail::check(tsr_save_sharded(handle_, directory, static_cast<TsrFormat>(format),
                                              max_shard_bytes, flags));
    }

    /** The file bytes in a new CPU storage. */
    [[nodiscard]] Returns<Storage> save_to_storage(Format format = Format::Torch) const {
        TsrStorage* out = nullptr;
        TsrStatus status = tsr_save_to_storage(handle_, static_cast<TsrFormat>(format), &out);
        return detail::finish(status, Storage::adopt(out));
    }

    /** Adds `t` under `name` or replaces the tensor there. */
    Returns<void> set(const char* name, const Tensor& t) {
        return detail::check(tsr_dict_set(handle_, name, t.get()));
    }

    /** The tensor under `name`; an empty Tensor when absent. */
    Tensor operator[](const char* name) const noexcept {
        return Tensor::adopt(tsr_dict_get(handle_, name));
    }

    /** True when `name` is present. */
    bool contains(const char* name) const noexcept { return bool((*this)[name]); }

    /** Sets a metadata string. */
    Returns<void> set_metadata(const char* key, const char* value) {
        return detail::check(tsr_dict_set_metadata(handle_, key, value));
    }

    /** A metadata string; nullptr when absent. */
    const char* metadata(const char* key) const noexcept { return tsr_dict_metadata(handle_, key); }

    /** Sets the non-tensor value `name` from its JSON text (a
     *  checkpoint's global_step: "1234"; a config: "{\"n_layers\": 4}"). */
    Returns<void> set_value_json(const char* name, const char* json) {
        return detail::check(tsr_dict_set_value_json(handle_, name, json));
    }

    /** The JSON text of the value `name`; nullptr when absent. */
    const char* value_json(const char* name) const noexcept {
        return tsr_dict_value_json(handle_, name);
    }

    /** The number of non-tensor values. */
    size_t value_count() const noexcept { return tsr_dict_value_count(handle_); }

    /** The `i`-th value's name (nullptr past the end). */
    const char* value_name(size_t i) const noexcept { return tsr_dict_value_name(handle_, i); }

    /** The number of tensors. */
    size_t size() const noexcept { return tsr_dict_size(handle_); }

    /** The `i`-th name (nullptr past the end). */
    const char* name(size_t i) const noexcept { return tsr_dict_name(handle_, i); }

    /** The handle (still owned by this object). */
    TsrTensorDict* get() const noexcept { return handle_; }

    /** True when this object holds a dict. */
    explicit operator bool() const noexcept { return handle_ != nullptr; }

    /** Iterates (name, tensor) pairs in insertion order. */
    class const_iterator {
      public:
        /** The pair an iterator yields. */
        using value_type = std::pair<const char*, Tensor>;
        /** The `i`-th pair of `d`. */
        const_iterator(const TensorDict* d, size_t i) noexcept : d_(d), i_(i) {}
        /** The (name, tensor) pair here. */
        value_type operator*() const noexcept {
            const char* n = d_->name(i_);
            return {n, (*d_)[n]};
        }
        /** The next pair. */
        const_iterator& operator++() noexcept {
            ++i_;
            return *this;
        }
        /** Same position. */
        bool operator==(const const_iterator& o) const noexcept { return i_ == o.i_; }
        /** Different positions. */
        bool operator!=(const const_iterator& o) const noexcept { return i_ != o.i_; }

      private:
        const TensorDict* d_;
        size_t i_;
    };

    /** The first pair. */
    const_iterator begin() const noexcept { return const_iterator(this, 0); }
    /** Past the last pair. */
    const_iterator end() const noexcept { return const_iterator(this, size()); }

  private:
    TsrTensorDict* handle_ = nullptr;
};

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

#endif
