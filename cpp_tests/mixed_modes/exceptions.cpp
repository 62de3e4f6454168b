// Half of a program whose other half uses the results mode: built with
// exceptions, TESSERA_EXCEPTIONS is 1 here.
#include "tessera.hpp"

#include <string>

// The message of a failing view, caught as tessera::Error.
std::string view_error_with_exceptions() {
    static_assert(TESSERA_EXCEPTIONS == 1, "built with exceptions");
    tessera::Tensor t = tessera::Tensor::empty({2, 3});
    try {
        tessera::Tensor v = t.view({4});
    } catch (const tessera::Error& e) {
        return e.what();
    }
    return "no exception";
}
