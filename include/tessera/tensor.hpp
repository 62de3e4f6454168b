/**
 * @file tessera/tensor.hpp
 * @brief Tensor: sizes, strides and an offset over a Storage (metadata,
 * views, copies, DLPack).
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_TENSOR_HPP
#define TESSERA_TENSOR_HPP

#include "../tessera.h"
#include "error.hpp"
#include "types.hpp"
#include "ref.hpp"
#include "handle.hpp"
#include "storage.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

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

    /**
     * A new contiguous tensor of `sizes` and `dtype` on `device` holding a
     * copy of the numel * itemsize bytes at `data` (its elements in
     * row-major order), in memory from the device's registered allocator:
     * c10's `from_blob(..).clone()` (tsr_tensor_from_data). `data` is not
     * kept.
     */
    [[nodiscard]] static Returns<Tensor> from_data(const void* data, IntSpan sizes,
                                                   TsrDType dtype,
                                                   Device device = Device::cpu()) {
        TsrTensor* out = nullptr;
        TsrStatus status =
            tsr_tensor_from_data(data, sizes.ssize(), sizes.data(), dtype, device, &out);
        return detail::finish(status, adopt(out));
    }

    /** As from_data(data, sizes, dtype_of<T>::value, device): the dtype is T's. */
    template <class T, class = decltype(dtype_of<T>::value)>
    [[nodiscard]] static Returns<Tensor> from_data(const T* data, IntSpan sizes,
                                                   Device device = Device::cpu()) {
        return from_data(static_cast<const void*>(data), sizes, dtype_of<T>::value, device);
    }

    /**
     * A tensor of `values` (c10's `tensor({..})`): 1-d of values.size()
     * elements, or of `sizes` when given (their product must be
     * values.size(): TSR_ERR_SHAPE otherwise). The dtype is T's:
     * `Tensor::from_values<float>({1, 2, 3, 4}, {2, 2})`.
     */
    template <class T, class = decltype(dtype_of<T>::value)>
    [[nodiscard]] static Returns<Tensor> from_values(std::initializer_list<T> values,
                                                     IntSpan sizes = {},
                                                     Device device = Device::cpu()) {
        int64_t count = static_cast<int64_t>(values.size());
        if (sizes.size() == 0) {
            return from_data(static_cast<const void*>(values.begin()), IntSpan(&count, 1),
                             dtype_of<T>::value, device);
        }
        int64_t numel = 1;
        for (size_t i = 0; i < sizes.size(); i++) numel *= sizes.data()[i];
        if (numel != count) {
            return detail::fail<Tensor>(
                TSR_ERR_SHAPE, ("tessera::Tensor::from_values: " + std::to_string(count) +
                                " values for sizes of " + std::to_string(numel) +
                                " elements: expected as many values as elements")
                                   .c_str());
        }
        return from_data(static_cast<const void*>(values.begin()), sizes, dtype_of<T>::value,
                         device);
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

    /** Whether the tensor's storage is read-only: every write into it is refused. */
    bool is_read_only() const noexcept { return tsr_tensor_is_read_only(get()); }

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

    /** Points this tensor at `storage` with contiguous `sizes` from `storage_offset` (c10's set_);
        a resizable storage too small grows to fit, a fixed one is refused. */
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

    /** Gives this tensor `sizes`, contiguous in `format`, at its storage offset (c10's resize_):
        a resizable storage grows to (offset + numel) * itemsize bytes when smaller, never
        shrinks; a fixed one too small is refused (TSR_ERR_NOT_RESIZABLE). */
    Returns<void> resize_(IntSpan sizes, TsrMemoryFormat format = TSR_CONTIGUOUS) {
        return detail::check(tsr_tensor_resize(get(), sizes.ssize(), sizes.data(), format));
    }

    /** The one element (c10's item()): as `T`, a bool, arithmetic type or
        std::complex, converted from the TsrScalar tsr_tensor_item gives (tagged
        with this tensor's dtype). Refused unless the tensor holds exactly one
        element (TSR_ERR_SHAPE), or for a storage-only dtype (TSR_ERR_DTYPE). */
    template <class T>
    [[nodiscard]] Returns<T> item() const {
        TsrScalar s{};
        TsrStatus status = tsr_tensor_item(get(), &s);
        return detail::finish(status, detail::scalar_as<T>(s));
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

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

namespace std {

/** Hashes a Tensor by its handle. */
template <>
struct hash<tessera::Tensor> {
    /** The hash of `t`'s handle. */
    size_t operator()(const tessera::Tensor& t) const noexcept {
        return hash<TsrTensor*>()(t.get());
    }
};

}  // namespace std

#endif  // TESSERA_TENSOR_HPP
