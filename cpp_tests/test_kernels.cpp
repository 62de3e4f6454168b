// The built-in kernels through tessera.hpp (tessera::add ... amax, amin), built
// only when tessera.h declares them (TESSERA_HAS_KERNELS): results,
// broadcasting and promotion, out= forms, reductions, and errors.
#include "tessera.hpp"

#include "check.hpp"

#include <cmath>
#include <vector>

#if defined(TESSERA_HAS_KERNELS)

using tessera::Tensor;

namespace {

std::vector<int64_t> vec(tessera::IntSpan s) { return s.vec(); }

Tensor floats(tessera::IntSpan sizes, std::initializer_list<float> values) {
    Tensor t = OK(Tensor::empty(sizes, TSR_FLOAT));
    float* p = OK(t.data<float>());
    for (float v : values) {
        *p++ = v;
    }
    return t;
}

std::vector<float> values(const Tensor& t) {
    Tensor c = OK(t.contiguous());
    const float* p = OK(c.data<const float>());
    return std::vector<float>(p, p + c.numel());
}

}  // namespace

TEST(binary_kernels_broadcast_and_promote) {
    Tensor a = floats({2, 3}, {1, 2, 3, 4, 5, 6});
    Tensor row = floats({3}, {10, 20, 30});
    Tensor s = OK(tessera::add(a, row));
    CHECK_EQ(vec(s.sizes()), (std::vector<int64_t>{2, 3}));
    CHECK(values(s) == (std::vector<float>{11, 22, 33, 14, 25, 36}));
    CHECK(values(OK(tessera::add(a, row, 2))) == (std::vector<float>{21, 42, 63, 24, 45, 66}));
    CHECK(values(OK(tessera::sub(row, a))) == (std::vector<float>{9, 18, 27, 6, 15, 24}));
    CHECK(values(OK(tessera::mul(a, row))) == (std::vector<float>{10, 40, 90, 40, 100, 180}));
    CHECK(values(OK(tessera::div(row, a))) == (std::vector<float>{10, 10, 10, 2.5f, 4, 5}));
    CHECK(values(OK(tessera::neg(a))) == (std::vector<float>{-1, -2, -3, -4, -5, -6}));

    Tensor ints = OK(Tensor::full({3}, 7, TSR_INT));
    Tensor halves = OK(tessera::add(ints, OK(tessera::scalar_tensor(0.5))));
    CHECK_EQ(halves.dtype(), TSR_FLOAT);  // Int + a wrapped Double computes in Float
    CHECK_EQ(OK(halves.data<float>())[0], 7.5f);
    Tensor three = OK(Tensor::full({3}, 3, TSR_INT));
    CHECK_EQ(OK(tessera::div(ints, three)).dtype(), TSR_FLOAT);
    Tensor floor = OK(tessera::div(OK(tessera::neg(ints)), three, TSR_ROUNDING_FLOOR));
    CHECK_EQ(floor.dtype(), TSR_INT);
    CHECK_EQ(OK(floor.data<int32_t>())[0], -3);
    Tensor trunc = OK(tessera::div(OK(tessera::neg(ints)), three, TSR_ROUNDING_TRUNC));
    CHECK_EQ(OK(trunc.data<int32_t>())[0], -2);
    Tensor zero = OK(Tensor::full({3}, 0, TSR_INT));
    CHECK_FAILS(tessera::div(ints, zero, TSR_ROUNDING_FLOOR), TSR_ERR_ZERO_DIVISION,
                "tsr_div_rounding");
    CHECK_FAILS(tessera::add(a, floats({2}, {1, 2})), TSR_ERR_SHAPE, "tsr_add");
    CHECK_FAILS(tessera::neg(OK(Tensor::full({1}, true, TSR_BOOL))), TSR_ERR_DTYPE, "tsr_neg");
}

TEST(out_forms_write_into_the_given_tensor) {
    Tensor a = floats({2, 2}, {1, 2, 3, 4});
    Tensor b = floats({2, 2}, {1, 1, 1, 1});
    uint64_t version = a.version();
    OK(tessera::add_out(a, a, b));  // in place
    CHECK(values(a) == (std::vector<float>{2, 3, 4, 5}));
    CHECK(a.version() > version);
    Tensor out = OK(Tensor::empty({2, 2}));
    OK(tessera::sub_out(out, a, b, 2));
    CHECK(values(out) == (std::vector<float>{0, 1, 2, 3}));
    OK(tessera::mul_out(out, a, a));
    CHECK(values(out) == (std::vector<float>{4, 9, 16, 25}));
    OK(tessera::div_out(out, out, a));
    CHECK(values(out) == (std::vector<float>{2, 3, 4, 5}));
    OK(tessera::neg_out(out, out));
    CHECK(values(out) == (std::vector<float>{-2, -3, -4, -5}));
    Tensor ints = OK(Tensor::empty({2, 2}, TSR_INT));
    CHECK_FAILS(tessera::div_out(ints, a, b), TSR_ERR_DTYPE, "tsr_div");
}

TEST(reductions) {
    Tensor a = floats({2, 3}, {1, 5, 3, 4, 2, 6});
    Tensor all = OK(tessera::sum(a));
    CHECK_EQ(all.ndim(), 0);
    CHECK_EQ(OK(all.data<float>())[0], 21.0f);
    Tensor rows = OK(tessera::sum(a, {1}));
    CHECK(values(rows) == (std::vector<float>{9, 12}));
    Tensor kept = OK(tessera::sum(a, {-2}, true));
    CHECK_EQ(vec(kept.sizes()), (std::vector<int64_t>{1, 3}));
    CHECK(values(kept) == (std::vector<float>{5, 7, 9}));
    CHECK(values(OK(tessera::amax(a, {0}))) == (std::vector<float>{4, 5, 6}));
    CHECK_EQ(OK(OK(tessera::amax(a)).data<float>())[0], 6.0f);
    CHECK(values(OK(tessera::amin(a, {1}))) == (std::vector<float>{1, 2}));
    CHECK_EQ(OK(OK(tessera::amin(a)).data<float>())[0], 1.0f);
    CHECK(values(OK(tessera::prod(a, {0}))) == (std::vector<float>{4, 10, 18}));
    CHECK(values(OK(tessera::mean(a, {1}))) == (std::vector<float>{3, 4}));
    CHECK_FAILS(tessera::mean(OK(Tensor::full({4}, 2, TSR_INT))), TSR_ERR_DTYPE, "tsr_mean");
    CHECK(values(OK(tessera::vector_norm(a, 1, {1}))) == (std::vector<float>{9, 12}));
    CHECK_EQ(OK(OK(tessera::vector_norm(a, INFINITY)).data<float>())[0], 6.0f);
    tessera::ValuesIndices mx = OK(tessera::max_dim(a, 1));
    CHECK(values(mx.values) == (std::vector<float>{5, 6}));
    CHECK_EQ(mx.indices.dtype(), TSR_LONG);
    CHECK_EQ(OK(mx.indices.data<int64_t>())[0], 1);
    CHECK_EQ(OK(mx.indices.data<int64_t>())[1], 2);
    tessera::ValuesIndices mn = OK(tessera::min_dim(a, 0, true));
    CHECK(values(mn.values) == (std::vector<float>{1, 2, 3}));
    CHECK_EQ(OK(mn.indices.data<int64_t>())[1], 1);
    CHECK_FAILS(tessera::max_dim(a, 2), TSR_ERR_SHAPE, "tsr_max_dim");
    Tensor counts = OK(tessera::sum(OK(Tensor::full({4}, 2, TSR_INT))));
    CHECK_EQ(counts.dtype(), TSR_LONG);
    CHECK_EQ(OK(counts.data<int64_t>())[0], 8);
    CHECK_FAILS(tessera::sum(a, {2}), TSR_ERR_SHAPE, "tsr_sum");
    CHECK_FAILS(tessera::amax(OK(Tensor::empty({0, 3}))), TSR_ERR_SHAPE, "tsr_amax");
    CHECK_FAILS(tessera::amin(OK(Tensor::empty({0, 3}))), TSR_ERR_SHAPE, "tsr_amin");
}

#endif  // TESSERA_HAS_KERNELS
