// Half of a program whose other half uses exceptions: built with
// -fno-exceptions -DTESSERA_NO_EXCEPTIONS, TESSERA_EXCEPTIONS is 0 here.
#include "tessera.hpp"

#include <string>

// The message of a failing view, from its Result.
std::string view_error_with_results() {
    static_assert(TESSERA_EXCEPTIONS == 0, "built without exceptions");
    tessera::Result<tessera::Tensor> t = tessera::Tensor::empty({2, 3});
    if (!t.ok()) {
        return "empty failed: " + t.message();
    }
    tessera::Result<tessera::Tensor> v = t->view({4});
    return v.ok() ? "no failure" : v.message();
}
