// tessera::cpu_kernel and cpu_serial_kernel: typed kernels whose operand
// count and dtypes come from the callable's signature; results equal to
// tessera's built-in add over contiguous, broadcast and transposed
// operands; a kernel of three inputs of three dtypes; the refusals of a
// dtype or an operand count that differs from the iterator's, in both
// error modes.
#include "tessera.hpp"

#include "check.hpp"

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <vector>

using tessera::Iter;
using tessera::IterConfig;
using tessera::Tensor;

namespace {

Tensor filled(std::initializer_list<int64_t> sizes, float scale, float offset) {
    Tensor t = OK(Tensor::empty(sizes, TSR_FLOAT));
    float* p = OK(t.data<float>());
    for (int64_t i = 0; i < t.numel(); i++) {
        // Values with a fractional part, so that a wrong pairing shows.
        p[i] = offset + scale * static_cast<float>(i % 1009) + 0.25f * static_cast<float>(i % 7);
    }
    return t;
}

// Whether `a` and `b` (float, same shape) hold the same bits at every index.
bool same_floats(const Tensor& a, const Tensor& b) {
    if (a.sizes().vec() != b.sizes().vec()) {
        return false;
    }
    Tensor ca = OK(a.contiguous());
    Tensor cb = OK(b.contiguous());
    const float* pa = OK(ca.data<const float>());
    const float* pb = OK(cb.data<const float>());
    return std::memcmp(pa, pb, sizeof(float) * static_cast<size_t>(a.numel())) == 0;
}

}  // namespace

TEST(a_plus_b_equals_the_built_in_add) {
    // 100,003 elements: parallel chunks, whole blocks and a tail.
    Tensor a = filled({100003}, 0.5f, -3.0f);
    Tensor b = filled({100003}, -0.125f, 7.0f);
    Iter it = OK(Iter::binary_op(a, b));
    OK(tessera::cpu_kernel(it, [](float x, float y) { return x + y; }));
    Tensor want = OK(tessera::add(a, b));
    CHECK(same_floats(it.output(), want));

    // Serial, over the same iterator: the same values.
    Tensor first = OK(it.output().clone());
    OK(tessera::cpu_serial_kernel(it, [](float x, float y) { return x + y; }));
    CHECK(same_floats(it.output(), first));
}

TEST(a_large_output_is_streamed_with_the_same_values) {
    // 8 Mi + 5 floats (over 32 MiB: non-temporal stores); the pool's split
    // puts a chunk start off a 16-byte boundary, so the head before the
    // first boundary is written one by one.
    const int64_t n = (int64_t{8} << 20) + 5;
    Tensor a = filled({n}, 0.5f, -3.0f);
    Tensor b = filled({n}, -0.125f, 7.0f);
    Iter it = OK(Iter::binary_op(a, b));
    OK(tessera::cpu_kernel(it, [](float x, float y) { return x + y; }));
    CHECK(same_floats(it.output(), OK(tessera::add(a, b))));
    // Views starting 4 bytes into their storages: the output's first
    // 16-byte boundary is 3 elements in.
    Tensor a1 = OK(a.narrow(0, 1, n - 1));
    Tensor b1 = OK(b.narrow(0, 1, n - 1));
    Tensor o1 = OK(OK(Tensor::empty({n}, TSR_FLOAT)).narrow(0, 1, n - 1));
    Iter it1 = OK(Iter::binary_op(o1, a1, b1));
    OK(tessera::cpu_kernel(it1, [](float x, float y) { return x + y; }));
    CHECK(same_floats(o1, OK(tessera::add(a1, b1))));
}

TEST(non_contiguous_and_broadcast_operands) {
    // A transposed input (inner stride 300 elements), a row broadcast
    // along dim 0 (stride 0) and a column slice: strided runs.
    Tensor base = filled({300, 257}, 1.0f, 0.0f);
    Tensor at = OK(base.transpose(0, 1));  // [257, 300]
    Tensor row = filled({300}, 2.0f, 1.0f);
    Iter it = OK(Iter::binary_op(at, row));
    CHECK(!it.is_contiguous());
    OK(tessera::cpu_kernel(it, [](float x, float y) { return x + y; }));
    CHECK(same_floats(it.output(), OK(tessera::add(at, row))));

    Tensor wide = filled({64, 40}, 0.75f, 2.0f);
    Tensor cols = OK(wide.narrow(1, 3, 17));  // rows of 17 out of 40
    Tensor other = filled({64, 17}, -1.5f, 0.0f);
    Iter it2 = OK(Iter::binary_op(cols, other));
    OK(tessera::cpu_serial_kernel(it2, [](float x, float y) { return x + y; }));
    CHECK(same_floats(it2.output(), OK(tessera::add(cols, other))));
}

TEST(three_inputs_of_three_dtypes) {
    // out(double) = a(float) * b(double) + c(int32), with c transposed.
    Tensor a = filled({5, 6}, 0.5f, 1.0f);
    Tensor b = OK(Tensor::empty({5, 6}, TSR_DOUBLE));
    Tensor c0 = OK(Tensor::empty({6, 5}, TSR_INT32));
    double* pb = OK(b.data<double>());
    int32_t* pc = OK(c0.data<int32_t>());
    for (int i = 0; i < 30; i++) {
        pb[i] = 0.1 * i;
        pc[i] = 100 * i;
    }
    Tensor c = OK(c0.transpose(0, 1));
    Tensor out = OK(Tensor::empty({5, 6}, TSR_DOUBLE));
    Iter it = OK(OK(IterConfig::create())
                     .add_output(out)
                     .add_input(a)
                     .add_input(b)
                     .add_input(c)
                     .check_all_same_dtype(false)
                     .build());
    OK(tessera::cpu_kernel(it, [](float x, double y, int32_t z) {
        return static_cast<double>(x) * y + static_cast<double>(z);
    }));
    const float* pa = OK(a.data<const float>());
    const double* po = OK(out.data<const double>());
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < 6; j++) {
            double want = static_cast<double>(pa[i * 6 + j]) * pb[i * 6 + j] + 100.0 * (j * 5 + i);
            CHECK_EQ(po[i * 6 + j], want);
        }
    }
}

TEST(a_dtype_that_differs_is_refused_naming_both) {
    // Float + Double promotes: the iterator computes in Double, and a float
    // kernel would read the doubles' bytes as floats.
    Tensor a = filled({8}, 1.0f, 0.0f);
    Tensor d = OK(Tensor::empty({8}, TSR_DOUBLE));
    Iter it = OK(Iter::binary_op(a, d));
    CHECK_EQ(it.dtype(1), TSR_DOUBLE);
    auto add = [](float x, float y) { return x + y; };
    CHECK_FAILS(tessera::cpu_kernel(it, add), TSR_ERR_DTYPE,
                "tessera::cpu_kernel: output 0 (operand 0) is iterated as Double, but the "
                "kernel returns Float");
    CHECK_FAILS(tessera::cpu_serial_kernel(it, add), TSR_ERR_DTYPE, "is iterated as Double");

    // The inputs only: the output's type matches, the first input's does not.
    CHECK_FAILS(tessera::cpu_kernel(it, [](float x, double y) { return x + y; }), TSR_ERR_DTYPE,
                "input 0 (operand 1) is iterated as Double, but the kernel takes as argument 0 "
                "Float");
    // Nothing was written: the output stays as the build left it.
    std::vector<double> before(8);
    std::memcpy(before.data(), OK(it.output().data<const double>()), sizeof(double) * 8);
    CHECK_FAILS(tessera::cpu_kernel(it, [](double, int32_t) { return 1.0; }), TSR_ERR_DTYPE,
                "takes as argument 1 Int");
    CHECK(std::memcmp(before.data(), OK(it.output().data<const double>()),
                      sizeof(double) * 8) == 0);
    // The right types run.
    OK(tessera::cpu_kernel(it, [](double x, double y) { return x + y; }));
}

TEST(an_operand_count_that_differs_is_refused) {
    Tensor a = filled({4}, 1.0f, 0.0f);
    Iter it = OK(Iter::binary_op(a, a));
    CHECK_FAILS(tessera::cpu_kernel(it, [](float x) { return x; }), TSR_ERR_INVALID_ARGUMENT,
                "the iterator has 1 output(s) and 2 input(s), but the kernel returns one value "
                "and takes 1 argument(s)");
    CHECK_FAILS(tessera::cpu_kernel(Iter(), [](float x) { return x; }), TSR_ERR_NULL_POINTER,
                "the iterator is empty");
}

TEST(nullary_and_unary_kernels) {
    Tensor out = OK(Tensor::empty({3, 70}, TSR_INT64));
    Iter fill = OK(Iter::nullary_op(out));
    OK(tessera::cpu_kernel(fill, []() { return int64_t{42}; }));
    const int64_t* p = OK(out.data<const int64_t>());
    for (int i = 0; i < 210; i++) {
        CHECK_EQ(p[i], 42);
    }
    // Serial: one call after another in iteration order, so a counter
    // that is not thread-safe numbers the elements.
    int64_t next = 0;
    OK(tessera::cpu_serial_kernel(fill, [&next]() { return next++; }));
    for (int i = 0; i < 210; i++) {
        CHECK_EQ(p[i], i);
    }
    Tensor neg = Tensor();
    Iter un = OK(Iter::unary_op(neg, out));
    OK(tessera::cpu_kernel(un, [](int64_t v) -> int64_t { return -v; }));
    const int64_t* q = OK(un.output().data<const int64_t>());
    CHECK_EQ(q[209], -209);
}

#if TESSERA_EXCEPTIONS
TEST(an_exception_in_the_kernel_is_rethrown) {
    Tensor a = filled({200000}, 1.0f, 0.0f);
    Iter it = OK(Iter::unary_op(Tensor(), a));
    std::atomic<int> calls{0};
    bool caught = false;
    try {
        tessera::cpu_kernel(it, [&calls](float x) -> float {
            if (calls.fetch_add(1) == 1000) {
                throw std::runtime_error("kernel failed");
            }
            return x;
        });
    } catch (const std::runtime_error& e) {
        caught = std::strcmp(e.what(), "kernel failed") == 0;
    }
    CHECK(caught);
}
#endif
