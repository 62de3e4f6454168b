// tessera::IterConfig and Iter: single-owner moves, the builder with its
// deferred errors, c10-style factories, loops over capturing lambdas (in
// parallel), exceptions thrown by a loop body, reductions.
#include "tessera.hpp"

#include "check.hpp"

#include <atomic>
#include <cmath>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

using tessera::Iter;
using tessera::IterConfig;
using tessera::IterView;
using tessera::Tensor;

namespace {

std::vector<int64_t> vec(tessera::IntSpan s) { return s.vec(); }

Tensor arange(std::initializer_list<int64_t> sizes, float start = 0.0f) {
    Tensor t = OK(Tensor::empty(sizes, TSR_FLOAT));
    float* p = OK(t.data<float>());
    for (int64_t i = 0; i < t.numel(); i++) {
        p[i] = start + static_cast<float>(i);
    }
    return t;
}

float at(const Tensor& t, int64_t i, int64_t j) {
    const float* p = OK(t.data<const float>());
    return p[i * t.strides()[0] + j * t.strides()[1]];
}

// out = a * b + c over float operands (outputs first).
struct Fma {
    void operator()(char** data, const int64_t* strides, int64_t n0, int64_t n1) const {
        for (int64_t j = 0; j < n1; j++) {
            for (int64_t i = 0; i < n0; i++) {
                auto elem = [&](int arg) {
                    return reinterpret_cast<float*>(data[arg] + i * strides[arg] +
                                                    j * strides[4 + arg]);
                };
                *elem(0) = *elem(1) * *elem(2) + *elem(3);
            }
        }
    }
};

}  // namespace

TEST(config_and_iter_are_single_owner) {
    IterConfig config = OK(IterConfig::create());
    TsrIterConfig* raw = config.get();
    CHECK(raw != nullptr);
    IterConfig moved = std::move(config);
    CHECK(config.get() == nullptr);
    CHECK(moved.get() == raw);

    Tensor a = arange({4});
    // The config keeps a reference to each tensor added, and drops it when freed.
    moved.add_output().add_input(a);
    CHECK_EQ(moved.status(), TSR_OK);
    CHECK_EQ(a.use_count(), 2u);
    Iter it = OK(moved.build());
    CHECK(it);
    size_t with_iter = a.use_count();
    CHECK(with_iter >= 3u);  // the config's, the iterator's
    moved.reset();
    CHECK_EQ(a.use_count(), with_iter - 1);
    CHECK_EQ(it.numel(), 4);

    Iter other = std::move(it);
    CHECK(!it);
    CHECK(it.get() == nullptr);
    CHECK_EQ(it.numel(), -1);  // the C API's value for NULL
    CHECK_EQ(other.ntensors(), 2);
    other = Iter();
    CHECK_EQ(a.use_count(), 1u);
}

TEST(deferred_config_errors) {
    Tensor a = arange({3});
    IterConfig config = OK(IterConfig::create());
    config.add_input(a).add_output();  // an output after an input: refused
    CHECK_EQ(config.status(), TSR_ERR_INVALID_ARGUMENT);
    CHECK_CONTAINS(config.message(), "tsr_iter_config_add_output");
    std::string first = config.message();
    config.add_output();  // a later failure does not replace the first
    CHECK_EQ(config.message(), first);
    CHECK_FAILS(config.build(), TSR_ERR_INVALID_ARGUMENT, "tsr_iter_config_add_output");

    IterConfig empty;
    empty.add_output();
    CHECK_EQ(empty.status(), TSR_ERR_NULL_POINTER);
    CHECK_FAILS(empty.build(), TSR_ERR_NULL_POINTER, "");

    IterConfig mismatch = OK(IterConfig::create());
    mismatch.add_output().add_input(arange({2, 3})).add_input(arange({4}));
    CHECK_EQ(mismatch.status(), TSR_OK);
    CHECK_FAILS(mismatch.build(), TSR_ERR_SHAPE, "tsr_iter_build");
}

TEST(for_each_with_a_capturing_lambda_on_broadcast_and_permuted_inputs) {
    Tensor a = arange({2, 3});                            // [[0,1,2],[3,4,5]]
    Tensor b = arange({3}, 1.0f);                         // [1,2,3], broadcast over rows
    Tensor c = OK(arange({3, 2}, 10.0f).transpose(0, 1));  // permuted
    Iter it = OK(OK(IterConfig::create()).add_output().add_input(a).add_input(b).add_input(c).build());
    CHECK_EQ(it.ntensors(), 4);
    CHECK_EQ(it.noutputs(), 1);
    CHECK_EQ(it.ninputs(), 3);
    CHECK_EQ(it.numel(), 6);
    CHECK_EQ(it.common_dtype(), TSR_FLOAT);
    CHECK_EQ(it.dtype(1), TSR_FLOAT);
    CHECK_EQ(it.strides(2).size(), static_cast<size_t>(it.ndim()));
    CHECK(it.strides(99).empty());

    std::atomic<int64_t> visited{0};
    Fma fma;
    OK(it.for_each([&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
        fma(data, strides, n0, n1);
        visited += n0 * n1;
    }));
    CHECK_EQ(visited.load(), 6);
    Tensor out = it.output(0);
    CHECK_EQ(vec(out.sizes()), (std::vector<int64_t>{2, 3}));
    // out[i][j] = a[i][j] * b[j] + c[i][j], c[i][j] = 10 + 2j + i
    for (int64_t i = 0; i < 2; i++) {
        for (int64_t j = 0; j < 3; j++) {
            float expected = static_cast<float>(3 * i + j) * static_cast<float>(j + 1) +
                             static_cast<float>(10 + 2 * j + i);
            CHECK_EQ(at(out, i, j), expected);
        }
    }
    CHECK(!it.output(1).defined());  // out of range: empty
}

// Borrowing from a temporary would dangle: the rvalue overloads are deleted.
template <class C, class = void>
struct borrows_temporaries : std::false_type {};
template <class C>
struct borrows_temporaries<
    C, std::void_t<decltype(std::declval<C&>().add_borrowed_input(std::declval<Tensor>()))>>
    : std::true_type {};
static_assert(!borrows_temporaries<IterConfig>::value, "add_borrowed_input(Tensor&&) is deleted");

TEST(borrowed_operands_take_no_count_in_the_config) {
    Tensor a = arange({2, 3});
    Tensor b = arange({3}, 1.0f);
    Tensor c = OK(arange({3, 2}, 10.0f).transpose(0, 1));
    Tensor out = OK(Tensor::empty({2, 3}, TSR_FLOAT));
    IterConfig config = OK(IterConfig::create());
    config.add_borrowed_output(out).add_borrowed_input(a).add_borrowed_const_input(b).add_input(c);
    CHECK_EQ(a.use_count(), 1u);
    CHECK_EQ(b.use_count(), 1u);
    CHECK_EQ(out.use_count(), 1u);
    Iter it = OK(config.build());
    CHECK_EQ(a.use_count(), 2u);  // the iterator's own
    OK(it.for_each(Fma()));
    for (int64_t i = 0; i < 2; i++)
        for (int64_t j = 0; j < 3; j++)
            CHECK_EQ(at(out, i, j), static_cast<float>(3 * i + j) * static_cast<float>(j + 1) +
                                        static_cast<float>(10 + 2 * j + i));
}

TEST(for_each_runs_in_parallel_chunks) {
    tessera::set_num_threads(2);
    CHECK_EQ(tessera::num_threads(), 2);
    const int64_t n = 1 << 16;
    Tensor x = OK(Tensor::full({n}, 1.0));
    Iter it = OK(OK(IterConfig::create()).add_output().add_input(x).build());
    std::mutex mutex;
    std::set<std::thread::id> threads;
    std::atomic<int64_t> chunks{0};
    std::atomic<int64_t> elements{0};
    OK(it.for_each(
        [&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
            for (int64_t j = 0; j < n1; j++) {
                for (int64_t i = 0; i < n0; i++) {
                    float v = *reinterpret_cast<float*>(data[1] + i * strides[1] + j * strides[3]);
                    *reinterpret_cast<float*>(data[0] + i * strides[0] + j * strides[2]) = 2 * v;
                }
            }
            chunks++;
            elements += n0 * n1;
            std::lock_guard<std::mutex> lock(mutex);
            threads.insert(std::this_thread::get_id());
        },
        1024));
    CHECK_EQ(elements.load(), n);
    CHECK(chunks.load() >= 2);
    CHECK(!threads.empty() && threads.size() <= 2u);
    CHECK_EQ(OK(it.output().data<float>())[n - 1], 2.0f);

    // serial_for_each: one range on this thread.
    std::set<std::thread::id> serial_threads;
    int64_t serial_elements = 0;
    OK(it.serial_for_each(
        [&](char**, const int64_t*, int64_t n0, int64_t n1) {
            serial_elements += n0 * n1;
            serial_threads.insert(std::this_thread::get_id());
        },
        100, 300));
    CHECK_EQ(serial_elements, 200);
    CHECK_EQ(serial_threads.size(), 1u);
    CHECK(*serial_threads.begin() == std::this_thread::get_id());
    OK(it.cast_outputs());
}

#if TESSERA_EXCEPTIONS
TEST(an_exception_in_the_loop_is_rethrown_once) {
    tessera::set_num_threads(2);
    Tensor x = OK(Tensor::full({1 << 15}, 1.0));
    Iter it = IterConfig::create().add_output().add_input(x).build();
    std::atomic<int> calls{0};
    bool caught = false;
    try {
        it.for_each(
            [&](char**, const int64_t*, int64_t, int64_t) {
                calls++;
                throw std::runtime_error("bad element");
            },
            256);
    } catch (const std::runtime_error& e) {
        caught = std::string(e.what()) == "bad element";
    }
    CHECK(caught);
    CHECK(calls.load() >= 1);
    CHECK(calls.load() < 128);  // the remaining chunks were skipped
}
#endif

TEST(parallel_reduce_with_a_struct_accumulator) {
    tessera::set_num_threads(2);
    const int64_t n = 100000;
    Tensor x = OK(Tensor::empty({n}, TSR_DOUBLE));
    double* p = OK(x.data<double>());
    for (int64_t i = 0; i < n; i++) {
        p[i] = static_cast<double>(i % 1000);
    }
    Tensor unused = OK(Tensor::empty({1}, TSR_DOUBLE));
    Iter it = OK(OK(IterConfig::create())
                     .add_output(unused)
                     .add_input(x)
                     .resize_outputs(false)
                     .is_reduction()
                     .build());
    struct Acc {
        double sum;
        double max;
        int64_t count;
    };
    Acc r = OK(it.parallel_reduce(
        Acc{0.0, -1.0, 0},
        [](Acc& acc, char** data, const int64_t* strides, int64_t n0, int64_t n1) {
            for (int64_t j = 0; j < n1; j++) {
                for (int64_t i = 0; i < n0; i++) {
                    double v = *reinterpret_cast<double*>(data[1] + i * strides[1] + j * strides[3]);
                    acc.sum += v;
                    acc.max = v > acc.max ? v : acc.max;
                    acc.count++;
                }
            }
        },
        [](Acc& acc, const Acc& other) {
            acc.sum += other.sum;
            acc.max = other.max > acc.max ? other.max : acc.max;
            acc.count += other.count;
        },
        4096));
    CHECK_EQ(r.count, n);
    CHECK_EQ(r.sum, 100.0 * 499500.0);
    CHECK_EQ(r.max, 999.0);
}

TEST(reduction_helpers_give_borrowed_sub_iterators) {
    Tensor x = arange({4, 5});
    Tensor out = OK(Tensor::empty({4, 1}));
    Iter it = OK(Iter::reduce_op(out, x));
    CHECK_EQ(it.num_output_elements(), 4);
    std::atomic<int> groups{0};
    std::atomic<int64_t> elements{0};
    OK(it.foreach_reduced_elt(
        [&](IterView sub) {
            groups++;
            float sum = 0.0f;
            OK(sub.serial_for_each(
                [&](char** data, const int64_t* strides, int64_t n0, int64_t n1) {
                    for (int64_t j = 0; j < n1; j++) {
                        for (int64_t i = 0; i < n0; i++) {
                            sum += *reinterpret_cast<float*>(data[1] + i * strides[1] +
                                                             j * strides[3]);
                        }
                    }
                },
                0, sub.numel()));
            *static_cast<float*>(sub.data_ptr(0)) = sum;
            elements += sub.numel();
        },
        false));
    CHECK_EQ(groups.load(), 4);
    CHECK_EQ(elements.load(), 20);
    const float* o = OK(out.data<const float>());
    CHECK_EQ(o[0], 10.0f);   // 0+1+2+3+4
    CHECK_EQ(o[3], 85.0f);   // 15+...+19

    int pieces = 0;
    OK(it.for_each_32bit_piece([&](IterView piece) {
        pieces++;
        CHECK(piece.can_use_32bit_indexing());
    }));
    CHECK_EQ(pieces, 1);
    CHECK(it.can_use_32bit_indexing());
}

TEST(c10_style_factories) {
    Tensor a = OK(Tensor::full({2, 2}, 3, TSR_INT));
    Tensor b = OK(Tensor::full({2}, 0.5, TSR_FLOAT));
    Iter bin = OK(Iter::binary_op(a, b));
    CHECK_EQ(bin.common_dtype(), TSR_FLOAT);  // Int with Float promotes
    CHECK_EQ(bin.output().dtype(), TSR_FLOAT);

    Iter cmp = OK(Iter::comparison_op(Tensor(), a, b));
    CHECK_EQ(cmp.output().dtype(), TSR_BOOL);

    Iter fl = OK(Iter::binary_float_op(Tensor(), a, a));
    CHECK_EQ(fl.common_dtype(), TSR_FLOAT);

    Tensor given = OK(Tensor::empty({2, 2}, TSR_INT));
    Iter un = OK(Iter::unary_op(given, a));
    CHECK(un.output() == given);
    Iter unf = OK(Iter::unary_float_op(Tensor(), a));
    CHECK_EQ(unf.output().dtype(), TSR_FLOAT);

    Iter fill = OK(Iter::nullary_op(given));
    CHECK_EQ(fill.ntensors(), 1);
    CHECK_FAILS(Iter::binary_op(a, OK(Tensor::empty({3}))), TSR_ERR_SHAPE, "tsr_iter_binary_op");
}

TEST(config_flags_reach_the_build) {
    Tensor i = OK(Tensor::full({3}, 2, TSR_INT));
    Tensor f = OK(Tensor::full({3}, 1.5, TSR_FLOAT));
    CHECK_FAILS(OK(IterConfig::create()).add_output().add_input(i).add_input(f).build(),
                TSR_ERR_DTYPE, "tsr_iter_build");
    Iter promoted = OK(OK(IterConfig::create())
                           .add_output()
                           .add_input(i)
                           .add_input(f)
                           .promote_inputs_to_common_dtype()
                           .build());
    CHECK_EQ(promoted.common_dtype(), TSR_FLOAT);

    Iter scalar = OK(OK(IterConfig::create())
                         .add_output()
                         .add_input(i)
                         .add_input(2.5)
                         .promote_inputs_to_common_dtype()
                         .build());
    CHECK_EQ(scalar.common_dtype(), TSR_FLOAT);  // an Int tensor plus 2.5 computes in Float

    Iter shaped = OK(OK(IterConfig::create())
                         .add_output(OK(Tensor::empty({2, 3})))
                         .resize_outputs(false)
                         .declare_static_shape({2, 3})
                         .declare_static_dtype(TSR_FLOAT)
                         .check_all_same_dtype(false)
                         .declare_static_device(tessera::Device::cpu())
                         .build());
    CHECK_EQ(shaped.numel(), 6);
    Iter squashed = OK(OK(IterConfig::create())
                           .add_output(OK(Tensor::empty({2, 3})))
                           .resize_outputs(false)
                           .declare_static_shape({2, 3}, {1})
                           .output_allocator(nullptr)
                           .build());
    CHECK_EQ(squashed.numel(), 2);  // dim 1 squashed to 1

    Tensor base = arange({6});
    Tensor out_view = OK(base.narrow(0, 0, 4));
    Tensor in_view = OK(base.narrow(0, 1, 4));
    CHECK_FAILS(OK(IterConfig::create()).add_output(out_view).add_input(in_view).build(),
                TSR_ERR_OVERLAP, "tsr_iter_build");
    Iter copied = OK(OK(IterConfig::create())
                         .add_output(out_view)
                         .add_input(in_view)
                         .resolve_overlap_by_copy()
                         .build());
    CHECK_EQ(copied.numel(), 4);
    Iter linear = OK(OK(IterConfig::create())
                         .add_output()
                         .add_input(OK(arange({2, 3}).transpose(0, 1)))
                         .enforce_linear_iteration()
                         .check_mem_overlap(false)
                         .allow_cpu_scalars()
                         .enforce_safe_casting_to_output()
                         .cast_common_dtype_to_outputs(false)
                         .promote_integer_inputs_to_float(false)
                         .build());
    CHECK_EQ(linear.numel(), 6);
}
