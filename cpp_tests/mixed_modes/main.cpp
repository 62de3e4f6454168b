// Links a translation unit built with exceptions and one built without:
// both use the same inline functions of tessera.hpp (Tensor::empty,
// Tensor::view) with different return types, which only works because the
// two modes live in different inline namespaces.
#include "tessera.hpp"

#include <cstdio>
#include <string>

std::string view_error_with_exceptions();
std::string view_error_with_results();

int main() {
    const std::string expected = "tsr_tensor_view: shape [4] is invalid for input of size 6";
    std::string a = view_error_with_exceptions();
    std::string b = view_error_with_results();
    if (a != expected || b != expected) {
        std::fprintf(stderr, "exceptions side: %s\nresults side: %s\n", a.c_str(), b.c_str());
        return 1;
    }
    std::printf("both modes in one program: ok\n");
    return 0;
}
