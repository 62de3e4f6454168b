/*
 * An element-wise kernel in C++: out = a * b + c on float, through the
 * iterator with a lambda as the loop body (the C++ counterpart of
 * fma_kernel.c). The inputs are broadcast (b is one row) and permuted (c is
 * a transpose); the iterator works out the shape, allocates the output and
 * hands the lambda byte strides. The lambda captures what it needs: here a
 * counter of the elements it visited, updated from several threads.
 *
 * Build and run (from the repository root, after ./scripts/quickstart.sh,
 * which builds target/release and its libtessera.so.0.MINOR link):
 *   g++ -std=c++17 -Wall -Wextra -pedantic -Iinclude examples/kernel.cpp \
 *       -Ltarget/release -ltessera -Wl,-rpath,$PWD/target/release -o /tmp/kernel
 *   /tmp/kernel
 */
#include "tessera.hpp"

#include <atomic>
#include <cstdio>
#include <exception>

namespace {

// A float tensor of `sizes` holding start, start + 1, ...
tessera::Tensor filled(tessera::IntSpan sizes, float start) {
    tessera::Tensor t = tessera::Tensor::empty(sizes, TSR_FLOAT);
    float* p = t.data<float>();
    for (int64_t i = 0; i < t.numel(); i++) {
        p[i] = start + static_cast<float>(i);
    }
    return t;
}

void print(const char* label, const tessera::Tensor& t) {
    tessera::IntSpan sizes = t.sizes();
    tessera::IntSpan strides = t.strides();
    std::printf("%s: sizes [%lld, %lld] strides [%lld, %lld]\n", label,
                static_cast<long long>(sizes[0]), static_cast<long long>(sizes[1]),
                static_cast<long long>(strides[0]), static_cast<long long>(strides[1]));
    const float* p = t.data<const float>();
    for (int64_t i = 0; i < sizes[0]; i++) {
        std::printf("  ");
        for (int64_t j = 0; j < sizes[1]; j++) {
            std::printf(" %5.1f", static_cast<double>(p[i * strides[0] + j * strides[1]]));
        }
        std::printf("\n");
    }
}

}  // namespace

int main() try {
    tessera::Tensor a = filled({2, 3}, 0.0f);                     // [[0,1,2],[3,4,5]]
    tessera::Tensor b = filled({3}, 1.0f);                        // [1,2,3], broadcast over rows
    tessera::Tensor c = filled({3, 2}, 10.0f).transpose(0, 1);    // a permuted view

    tessera::Iter it = tessera::IterConfig::create()
                           .add_output()  // allocated by the build
                           .add_input(a)
                           .add_input(b)
                           .add_input(c)
                           .build();
    std::printf("iterator: %lld dims, %lld elements, %lld operands\n",
                static_cast<long long>(it.ndim()), static_cast<long long>(it.numel()),
                static_cast<long long>(it.ntensors()));

    std::atomic<int64_t> visited{0};
    it.for_each([&visited](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
        // data[0] is the output, data[1..3] the inputs; strides holds the
        // dim-0 byte strides of the 4 operands, then the dim-1 ones.
        for (int64_t j = 0; j < n1; j++) {
            char* out = data[0] + j * strides[4];
            const char* x = data[1] + j * strides[5];
            const char* y = data[2] + j * strides[6];
            const char* z = data[3] + j * strides[7];
            for (int64_t i = 0; i < n0; i++) {
                *reinterpret_cast<float*>(out + i * strides[0]) =
                    *reinterpret_cast<const float*>(x + i * strides[1]) *
                        *reinterpret_cast<const float*>(y + i * strides[2]) +
                    *reinterpret_cast<const float*>(z + i * strides[3]);
            }
        }
        visited += n0 * n1;
    });
    std::printf("the lambda visited %lld elements\n", static_cast<long long>(visited.load()));
    print("out = a * b + c", it.output());

    // The same kernel on a larger problem, split across threads.
    tessera::set_num_threads(2);
    tessera::Tensor x = tessera::Tensor::full({256, 512}, 2.0);
    tessera::Tensor y = tessera::Tensor::full({512}, 3.0);
    tessera::Tensor z = tessera::Tensor::full({512, 256}, 1.0).transpose(0, 1);
    tessera::Tensor big = tessera::Tensor::empty({256, 512});
    tessera::Iter it2 = tessera::IterConfig::create()
                            .add_output(big)
                            .add_input(x)
                            .add_input(y)
                            .add_input(z)
                            .build();
    std::atomic<int64_t> chunks{0};
    it2.for_each(
        [&chunks](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
            for (int64_t j = 0; j < n1; j++) {
                for (int64_t i = 0; i < n0; i++) {
                    auto at = [&](int arg) {
                        return reinterpret_cast<float*>(data[arg] + i * strides[arg] +
                                                        j * strides[4 + arg]);
                    };
                    *at(0) = *at(1) * *at(2) + *at(3);
                }
            }
            chunks++;
        },
        /*grain_size=*/16384);
    const float* p = big.data<const float>();
    bool all_seven = true;
    for (int64_t i = 0; i < big.numel(); i++) {
        all_seven = all_seven && p[i] == 7.0f;
    }
    std::printf("256 x 512: every element is 2 * 3 + 1 = 7: %s (in %s chunk)\n",
                all_seven ? "yes" : "no", chunks.load() > 1 ? "more than one" : "one");
    return all_seven ? 0 : 1;
} catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
}
