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
 *
 * @par Headers
 * This header includes all of the API, one part per header in
 * include/tessera/, each of which may also be included on its own (it
 * includes what it needs):
 * - tessera/error.hpp: Error, Result, Returns and TESSERA_EXCEPTIONS;
 * - tessera/types.hpp: IntSpan, Device, dtype_of, Scalar and the library-wide functions;
 * - tessera/ref.hpp: Ref, WeakRef and RefTraits over the bare C handles;
 * - tessera/handle.hpp: Handle and Weak, the common part of the value classes;
 * - tessera/data_ptr.hpp: DataPtr;
 * - tessera/allocator.hpp: Allocator, AllocatorBase and TESSERA_REGISTER_CPP_ALLOCATOR;
 * - tessera/storage.hpp: Storage;
 * - tessera/tensor.hpp: Tensor;
 * - tessera/object.hpp: Object;
 * - tessera/iter.hpp: IterConfig, Iter and IterView;
 * - tessera/cpu_kernel.hpp: cpu_kernel and cpu_serial_kernel, typed
 *   element-wise kernels over an iterator (c10's);
 * - tessera/kernels.hpp: the built-in kernels (tessera::add ... amax);
 * - tessera/serialize.hpp: TensorDict, saved and loaded in the torch and
 *   safetensors formats;
 * - tessera/checkpoint.hpp: Checkpoint, opened once (its index) and
 *   loaded in parts.
 */
#ifndef TESSERA_HPP
#define TESSERA_HPP

#include "tessera.h"

#include "tessera/error.hpp"
#include "tessera/types.hpp"
#include "tessera/ref.hpp"
#include "tessera/handle.hpp"
#include "tessera/data_ptr.hpp"
#include "tessera/allocator.hpp"
#include "tessera/storage.hpp"
#include "tessera/tensor.hpp"
#include "tessera/object.hpp"
#include "tessera/iter.hpp"
#include "tessera/cpu_kernel.hpp"
#include "tessera/kernels.hpp"
#include "tessera/serialize.hpp"
#include "tessera/checkpoint.hpp"

#endif  // TESSERA_HPP
