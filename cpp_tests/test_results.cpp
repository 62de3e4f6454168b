// The two error modes: tessera::Error (thrown with exceptions) and
// tessera::Result (returned without). Built and run in both modes; the
// mode-specific parts check what each mode promises.
#include "tessera.hpp"

#include "check.hpp"

#include <string>
#include <thread>
#include <type_traits>
#include <utility>

using tessera::Error;
using tessera::Result;
using tessera::Returns;
using tessera::Tensor;

#if TESSERA_EXCEPTIONS
static_assert(std::is_same<Returns<Tensor>, Tensor>::value, "exceptions: Returns<T> is T");
static_assert(std::is_same<Returns<void>, void>::value, "exceptions: Returns<void> is void");
#else
static_assert(std::is_same<Returns<Tensor>, Result<Tensor>>::value,
              "no exceptions: Returns<T> is Result<T>");
static_assert(std::is_same<Returns<void>, Result<void>>::value,
              "no exceptions: Returns<void> is Result<void>");
#endif
static_assert(std::is_base_of<std::runtime_error, Error>::value,
              "Error derives from std::runtime_error");

TEST(error_carries_status_and_message) {
    Error e(TSR_ERR_SHAPE, "tsr_tensor_view: shape [3, 5] is invalid for input of size 16");
    CHECK_EQ(e.status(), TSR_ERR_SHAPE);
    CHECK_EQ(std::string(e.status_name()), "TSR_ERR_SHAPE");
    CHECK_EQ(std::string(e.what()),
             "tsr_tensor_view: shape [3, 5] is invalid for input of size 16");
}

TEST(result_holds_a_value_or_a_failure) {
    Result<int> good(7);
    CHECK(good.ok());
    CHECK(static_cast<bool>(good));
    CHECK_EQ(good.status(), TSR_OK);
    CHECK_EQ(good.message(), std::string());
    CHECK_EQ(good.value(), 7);
    CHECK_EQ(*good, 7);
    CHECK_EQ(good.value_or(3), 7);

    Result<int> bad = Result<int>::failure(TSR_ERR_DTYPE, "no such dtype");
    CHECK(!bad.ok());
    CHECK(!bad);
    CHECK_EQ(bad.status(), TSR_ERR_DTYPE);
    CHECK_EQ(bad.message(), std::string("no such dtype"));
    CHECK_EQ(bad.value_or(3), 3);

    // A "failure" with TSR_OK is still a failure.
    Result<int> odd = Result<int>::failure(TSR_OK, "confused");
    CHECK(!odd.ok());
    CHECK_EQ(odd.status(), TSR_ERR_INTERNAL);

    Result<std::string> text(std::string("abc"));
    CHECK_EQ(text->size(), 3u);
    std::string moved = std::move(text).value();
    CHECK_EQ(moved, std::string("abc"));

    Result<void> done;
    CHECK(done.ok());
    done.value();  // no-op on success
    Result<void> failed = Result<void>::failure(TSR_ERR_DEVICE, "no device");
    CHECK(!failed);
    CHECK_EQ(failed.status(), TSR_ERR_DEVICE);
    CHECK_EQ(failed.message(), std::string("no device"));

    // Move-only values.
    Result<tessera::DataPtr> memory(tessera::DataPtr{});
    CHECK(memory.ok());
    tessera::DataPtr taken = std::move(memory).value();
    CHECK(!taken);
}

#if TESSERA_EXCEPTIONS
TEST(exceptions_mode_throws_the_library_message) {
    Tensor t = Tensor::empty({2, 8});
    bool caught = false;
    try {
        Tensor v = t.view({3, 5});
    } catch (const Error& e) {
        caught = true;
        CHECK_EQ(e.status(), TSR_ERR_SHAPE);
        CHECK_EQ(std::string(e.what()),
                 "tsr_tensor_view: shape [3, 5] is invalid for input of size 16");
    }
    CHECK(caught);

    // Caught as a std::exception too.
    caught = false;
    try {
        (void)Tensor::empty({-2});
    } catch (const std::exception& e) {
        caught = std::string(e.what()).find("tsr_tensor_empty") != std::string::npos;
    }
    CHECK(caught);

    // Result::value() on a failure throws the same way.
    Result<int> bad = Result<int>::failure(TSR_ERR_OVERLAP, "overlap");
    CHECK_FAILS(bad.value(), TSR_ERR_OVERLAP, "overlap");
    Result<void> failed = Result<void>::failure(TSR_ERR_DEVICE, "no device");
    CHECK_FAILS(failed.value(), TSR_ERR_DEVICE, "no device");
}
#else
TEST(results_mode_returns_status_and_message) {
    Result<Tensor> t = Tensor::empty({2, 8});
    CHECK(t.ok());
    Result<Tensor> v = t->view({3, 5});
    CHECK(!v.ok());
    CHECK_EQ(v.status(), TSR_ERR_SHAPE);
    CHECK_EQ(v.message(), std::string("tsr_tensor_view: shape [3, 5] is invalid for input of size 16"));
    CHECK(!v.value_or(Tensor()).defined());

    Result<void> filled = t->fill(1.0);
    CHECK(filled.ok());
    Result<void> copied = t->copy_(Tensor());
    CHECK_EQ(copied.status(), TSR_ERR_NULL_POINTER);
    CHECK_CONTAINS(copied.message(), "tsr_tensor_copy");

    Result<float*> wrong = t->data<float>();
    CHECK(wrong.ok());
    Result<double*> other = t->data<double>();
    CHECK_EQ(other.status(), TSR_ERR_DTYPE);

    // Chains: each step is checked before the next.
    Result<Tensor> tr = t.value().transpose(0, 1);
    CHECK(tr.ok());
    CHECK_EQ(tr->sizes()[0], 8);
}
#endif

TEST(a_failure_keeps_its_own_message) {
    Tensor t = OK(Tensor::empty({4}));
#if TESSERA_EXCEPTIONS
    std::string first;
    try {
        (void)t.view({3});
    } catch (const Error& e) {
        first = e.what();
    }
    (void)OK(t.view({2, 2}));  // a later success
    try {
        (void)t.select(0, 9);  // a later failure
    } catch (const Error&) {
    }
    CHECK_CONTAINS(first, "shape [3] is invalid for input of size 4");
#else
    Result<Tensor> first = t.view({3});
    Result<Tensor> ok = t.view({2, 2});
    Result<Tensor> second = t.select(0, 9);
    CHECK(ok.ok());
    CHECK(!second.ok());
    CHECK_CONTAINS(first.message(), "shape [3] is invalid for input of size 4");
    CHECK(first.message() != second.message());
#endif
}

TEST(messages_are_per_thread) {
    Tensor t = OK(Tensor::empty({4}));
    std::string other_thread;
    std::thread worker([&] {
#if TESSERA_EXCEPTIONS
        try {
            (void)Tensor::empty({-5});
        } catch (const Error& e) {
            other_thread = e.what();
        }
#else
        other_thread = Tensor::empty({-5}).message();
#endif
    });
    worker.join();
    CHECK_CONTAINS(other_thread, "tsr_tensor_empty");
    CHECK_FAILS(t.view({5}), TSR_ERR_SHAPE, "for input of size 4");
}
