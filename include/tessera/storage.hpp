/**
 * @file tessera/storage.hpp
 * @brief Storage: a refcounted block of bytes with the allocator that made
 * it.
 *
 * Part of tessera's C++ API; include tessera.hpp for all of it.
 */
#ifndef TESSERA_STORAGE_HPP
#define TESSERA_STORAGE_HPP

#include "../tessera.h"
#include "error.hpp"
#include "types.hpp"
#include "ref.hpp"
#include "handle.hpp"
#include "data_ptr.hpp"
#include "allocator.hpp"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>

namespace tessera {
/** @cond TESSERA_INTERNAL */
inline namespace TESSERA_ABI_NAMESPACE {
/** @endcond */

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

    /**
     * A storage over a mapping of the file at `path` (tsr_storage_from_file):
     * TSR_FILE_PRIVATE (copy-on-write), TSR_FILE_SHARED (writes reach the
     * file; created / extended to nbytes) or TSR_FILE_READ_ONLY (a read-only
     * storage). `nbytes` 0 maps the whole file.
     */
    [[nodiscard]] static Returns<Storage> from_file(const char* path, TsrFileMode mode,
                                                    size_t nbytes = 0) {
        TsrStorage* out = nullptr;
        TsrStatus status = tsr_storage_from_file(path, mode, nbytes, &out);
        return detail::finish(status, adopt(out));
    }

    /** The path of a TSR_FILE_SHARED file storage; nullptr for every other storage. */
    const char* filename() const noexcept { return tsr_storage_filename(get()); }

    /** Writes a SHARED file storage's dirty pages to the file (a no-op otherwise). */
    Returns<void> flush() { return detail::check(tsr_storage_flush(get())); }

    /** Whether the storage is read-only: every write through tessera is refused. */
    bool is_read_only() const noexcept { return tsr_storage_is_read_only(get()); }

    /** Makes the storage read-only, for good (all its tensors too). */
    Returns<void> make_read_only() { return detail::check(tsr_storage_make_read_only(get())); }

    /**
     * A borrowed view of the storage's data pointer (data, ctx, deleter,
     * device): never free it; valid while the storage's data is.
     */
    [[nodiscard]] Returns<TsrDataPtr> data_ptr_view() const {
        TsrDataPtr out{};
        TsrStatus status = tsr_storage_data_ptr(get(), &out);
        return detail::finish(status, std::move(out));
    }

    /**
     * Replaces the data pointer under every tensor on the storage (c10's
     * set_data_ptr): `memory` is consumed on success (untouched on
     * failure) and the old data pointer is returned, owned by the caller.
     * Refused for read-only storages and while a DLPack export of the
     * storage is alive.
     */
    [[nodiscard]] Returns<DataPtr> set_data_ptr(DataPtr&& memory, size_t nbytes) {
        TsrDataPtr old{};
        TsrStatus status = tsr_storage_set_data_ptr(get(), memory.raw(), nbytes, &old);
        return detail::finish(status, DataPtr(old));
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

    /**
     * Moves the bytes into a shared-memory segment in place (every tensor
     * on the storage follows; the old memory is freed; no longer
     * resizable). No-op when already shared. See tsr_storage_share_memory.
     */
    Returns<void> share_memory() { return detail::check(tsr_storage_share_memory(get())); }

    /** Whether the data is shared between processes (shared memory, CUDA). */
    bool is_shared() const noexcept { return tsr_storage_is_shared(get()); }

    /**
     * A new close-on-exec descriptor of the segment (the caller closes it);
     * the storage must be shared already.
     */
    [[nodiscard]] Returns<int> share_fd() const {
        int fd = -1;
        TsrStatus status = tsr_storage_share_fd(get(), &fd);
        return detail::finish(status, std::move(fd));
    }

    /** Maps the object behind `fd` (borrowed), `nbytes` bytes (0: all of it). */
    [[nodiscard]] static Returns<Storage> from_fd(int fd, size_t nbytes = 0) {
        TsrStorage* out = nullptr;
        TsrStatus status = tsr_storage_from_fd(fd, nbytes, &out);
        return detail::finish(status, adopt(out));
    }

    /**
     * Moves the storage into a named segment (unless it is in one) and
     * returns the name, for open_shared in another process.
     */
    [[nodiscard]] Returns<std::string> share_name() {
        char buf[300] = {0};
        TsrStatus status = tsr_storage_share_name(get(), buf, sizeof buf);
        return detail::finish(status, std::string(buf));
    }

    /** Opens the named segment made by share_name (in any process). */
    [[nodiscard]] static Returns<Storage> open_shared(const std::string& name) {
        TsrStorage* out = nullptr;
        TsrStatus status = tsr_storage_open_shared(name.c_str(), &out);
        return detail::finish(status, adopt(out));
    }
};

/** A weak reference to a Storage. */
using WeakStorage = Weak<Storage>;

/** @cond TESSERA_INTERNAL */
}  // inline namespace TESSERA_ABI_NAMESPACE
/** @endcond */
}  // namespace tessera

namespace std {

/** Hashes a Storage by its handle. */
template <>
struct hash<tessera::Storage> {
    /** The hash of `s`'s handle. */
    size_t operator()(const tessera::Storage& s) const noexcept {
        return hash<TsrStorage*>()(s.get());
    }
};

}  // namespace std

#endif  // TESSERA_STORAGE_HPP
