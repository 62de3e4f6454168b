// tessera::Storage, Tensor, DataPtr and the small value types: value
// semantics with exact counts, views, spans, in-place operations and
// errors that carry the library's status and message.
#include "tessera.hpp"

#include "check.hpp"

#include <array>
#include <complex>
#include <cstdlib>
#include <map>
#include <unistd.h>
#include <unordered_set>
#include <vector>

using tessera::DataPtr;
using tessera::Device;
using tessera::IntSpan;
using tessera::Storage;
using tessera::Tensor;

namespace {

std::vector<int64_t> vec(IntSpan s) { return s.vec(); }

// Element [i][j] of a 2-D float tensor, through its strides.
float at(const Tensor& t, int64_t i, int64_t j) {
    const float* p = OK(t.data<const float>());
    return p[i * t.strides()[0] + j * t.strides()[1]];
}

Tensor arange(std::initializer_list<int64_t> sizes) {
    Tensor t = OK(Tensor::empty(sizes, TSR_FLOAT));
    float* p = OK(t.data<float>());
    for (int64_t i = 0; i < t.numel(); i++) {
        p[i] = static_cast<float>(i);
    }
    return t;
}

int frees = 0;
void counting_free(void* ctx) {
    frees++;
    std::free(ctx);
}

}  // namespace

TEST(int_span) {
    std::vector<int64_t> v{4, 5, 6};
    std::array<int64_t, 3> a{4, 5, 6};
    const int64_t c[] = {4, 5, 6};
    IntSpan from_vector(v), from_array(a), from_c(c), from_pointer(v.data(), 2);
    CHECK_EQ(from_vector.size(), 3u);
    CHECK(from_vector == from_array);
    CHECK(from_array == from_c);
    CHECK(from_pointer != from_c);
    CHECK_EQ(from_pointer.back(), 5);
    CHECK_EQ(from_c.front(), 4);
    CHECK_EQ(from_c[2], 6);
    int64_t sum = 0;
    for (int64_t x : from_c) {
        sum += x;
    }
    CHECK_EQ(sum, 15);
    CHECK(IntSpan().empty());
    CHECK(IntSpan() == IntSpan({}));
    CHECK_EQ(IntSpan({7, 8}).vec(), (std::vector<int64_t>{7, 8}));
}

TEST(device_scalar_dtype_helpers) {
    Device cpu;
    CHECK(cpu == Device::cpu());
    CHECK(cpu.is_cpu());
    CHECK_EQ(cpu.index(), -1);
    TsrDevice raw = Device::cuda(1);
    CHECK_EQ(raw.type, TSR_CUDA);
    CHECK_EQ(raw.index, 1);
    CHECK(Device(raw) == Device(TSR_CUDA, 1));
    CHECK(Device(TSR_CUDA, 0) != Device::cuda(1));

    CHECK_EQ(tessera::Scalar(true).dtype(), TSR_BOOL);
    CHECK_EQ(tessera::Scalar(3).dtype(), TSR_LONG);
    CHECK_EQ(tessera::Scalar(2.5f).dtype(), TSR_DOUBLE);
    CHECK_EQ(tessera::Scalar(uint64_t(1) << 63).dtype(), TSR_UINT64);
    CHECK_EQ(tessera::Scalar(uint64_t(7)).dtype(), TSR_LONG);
    CHECK_EQ(tessera::Scalar(std::complex<float>(1, 2)).dtype(), TSR_COMPLEX_DOUBLE);
    CHECK_EQ(tessera::Scalar(std::complex<float>(1, 2)).raw().v.c.im, 2.0);

    CHECK_EQ(std::string(tessera::dtype_name(TSR_BFLOAT16)), "BFloat16");
    CHECK_EQ(tessera::itemsize(TSR_DOUBLE), 8u);
    CHECK_EQ(OK(tessera::promote_types(TSR_INT, TSR_FLOAT)), TSR_FLOAT);
    CHECK_FAILS(tessera::promote_types(TSR_QINT8, TSR_FLOAT), TSR_ERR_DTYPE, "tsr_promote_types");
    CHECK(tessera::can_cast(TSR_INT, TSR_FLOAT));
    CHECK(!tessera::can_cast(TSR_FLOAT, TSR_INT));
    CHECK_EQ(std::string(tessera::status_name(TSR_ERR_SHAPE)), "TSR_ERR_SHAPE");
    CHECK_EQ(std::string(tessera::version()),
             std::to_string(TSR_VERSION_MAJOR) + "." + std::to_string(TSR_VERSION_MINOR) + "." +
                 std::to_string(TSR_VERSION_PATCH));
    CHECK_EQ(tessera::dtype_of<float>::value, TSR_FLOAT);
    CHECK_EQ(tessera::dtype_of<int64_t>::value, TSR_LONG);
    CHECK_EQ(tessera::dtype_of<std::complex<double>>::value, TSR_COMPLEX_DOUBLE);
}

TEST(storage_value_semantics) {
    Storage s = OK(Storage::create(64));
    CHECK(s.defined());
    CHECK_EQ(s.use_count(), 1u);
    CHECK_EQ(s.nbytes(), 64u);
    CHECK(s.data() != nullptr);
    CHECK(s.device() == Device::cpu() || s.device().type() == TSR_CPU);
    CHECK(!s.resizable());
    {
        Storage copy = s;
        CHECK(copy == s);
        CHECK_EQ(s.use_count(), 2u);
        Storage moved = std::move(copy);
        CHECK(!copy);
        CHECK(copy.get() == nullptr);
        CHECK_EQ(copy.use_count(), 0u);
        CHECK_EQ(copy.nbytes(), 0u);  // the C API's value for NULL
        CHECK_EQ(s.use_count(), 2u);
        copy = moved;  // assigning to a moved-from object
        CHECK_EQ(s.use_count(), 3u);
    }
    CHECK_EQ(s.use_count(), 1u);

    tessera::WeakStorage w = s.downgrade();
    CHECK_EQ(s.weak_use_count(), 2u);
    CHECK(w.lock() == s);
    s.reset();
    CHECK(w.expired());
    CHECK(!w.lock());
}

TEST(storage_operations) {
    Storage s = OK(Storage::create(8, Device::cpu(), /*resizable=*/true));
    CHECK(s.resizable());
    OK(s.fill(7));
    CHECK_EQ(static_cast<unsigned char*>(s.data())[5], 7u);
    OK(s.resize(16));
    CHECK_EQ(s.nbytes(), 16u);
    CHECK_EQ(static_cast<unsigned char*>(s.data())[7], 7u);  // the first 8 bytes kept

    Storage c = OK(s.clone());
    CHECK(c != s);
    CHECK(c.data() != s.data());
    CHECK_EQ(static_cast<unsigned char*>(c.data())[0], 7u);
    OK(c.fill(1));
    OK(s.copy_(c));
    CHECK_EQ(static_cast<unsigned char*>(s.data())[15], 1u);

    tessera::Allocator owner = s.allocator();
    CHECK(owner.defined());
    CHECK(owner == tessera::Allocator::registered(TSR_CPU));

    Storage fixed = OK(Storage::create(8));
    CHECK_FAILS(fixed.resize(32), TSR_ERR_NOT_RESIZABLE, "tsr_storage_resize");
    Storage small = OK(Storage::create(4));
    CHECK_FAILS(s.copy_(small), TSR_ERR_SHAPE, "tsr_storage_copy");
    Storage empty;
    CHECK_FAILS(empty.fill(0), TSR_ERR_NULL_POINTER, "tsr_storage_fill");

    Storage with_allocator = OK(Storage::create(32, tessera::Allocator::cpu()));
    CHECK(with_allocator.allocator() == tessera::Allocator::cpu());
}

TEST(data_ptr_ownership) {
    frees = 0;
    {
        void* block = std::malloc(32);
        DataPtr p(block, block, &counting_free, Device::cpu());
        CHECK(p);
        CHECK(p.data() == block);
        CHECK(p.context() == block);
        CHECK(p.cast_context(&counting_free) == block);
        CHECK(p.cast_context(&std::free) == nullptr);
        DataPtr q = std::move(p);
        CHECK(!p);
        CHECK(p.context() == nullptr);
        CHECK(q.data() == block);
    }
    CHECK_EQ(frees, 1);  // freed once, by the moved-to object

    {
        void* block = std::malloc(32);
        DataPtr p(block, block, &counting_free, Device::cpu());
        CHECK(p.compare_exchange_deleter(&counting_free, &std::free));
        CHECK(!p.compare_exchange_deleter(&counting_free, &std::free));
        CHECK(p.deleter() == &std::free);
    }
    CHECK_EQ(frees, 1);  // std::free ran instead

    {
        void* block = std::malloc(32);
        DataPtr p(block, block, &counting_free, Device::cpu());
        void* ctx = p.release_context();
        CHECK(ctx == block);
        CHECK(p.deleter() == nullptr);
        std::free(ctx);
    }
    CHECK_EQ(frees, 1);

    // A storage over external memory consumes the DataPtr; the deleter
    // runs when the storage's data is released.
    {
        void* block = std::malloc(64);
        DataPtr p(block, block, &counting_free, Device::cpu());
        Storage s = OK(Storage::from_data_ptr(std::move(p), 64));
        CHECK(!p.data() && !p.context());  // consumed
        CHECK(s.data() == block);
        CHECK(!s.allocator());
        CHECK_EQ(frees, 1);
    }
    CHECK_EQ(frees, 2);

    // Refused: the caller keeps ownership.
    {
        DataPtr nothing(nullptr, nullptr, nullptr, Device::cpu());
        CHECK_FAILS(Storage::from_data_ptr(std::move(nothing), 8), TSR_ERR_INVALID_ARGUMENT,
                    "tsr_storage_from_data_ptr");
    }

    DataPtr from_allocator = OK(tessera::Allocator::cpu().allocate(128));
    CHECK(from_allocator.data() != nullptr);
    CHECK_EQ(reinterpret_cast<uintptr_t>(from_allocator.data()) % 64, 0u);
    TsrDataPtr raw = from_allocator.release();
    CHECK(!from_allocator);
    tsr_data_ptr_free(&raw);
}

TEST(share_external_needs_a_unique_storage) {
    frees = 0;
    Storage s = OK(Storage::create(16));
    Storage other = s;
    void* block = std::malloc(16);
    DataPtr p(block, block, &counting_free, Device::cpu());
    CHECK_FAILS(s.share_external(std::move(p), 16), TSR_ERR_INVALID_ARGUMENT,
                "tsr_storage_share_external");
    CHECK(p.data() == block);  // untouched on failure
    other.reset();
    OK(s.share_external(std::move(p), 16));
    CHECK(!p.data());
    CHECK(s.data() == block);
    s.reset();
    CHECK_EQ(frees, 1);
}

TEST(shared_memory_storages) {
    Storage s = OK(Storage::create(16, Device::cpu(), true));
    OK(s.fill(7));
    CHECK_FAILS(s.share_fd(), TSR_ERR_INVALID_ARGUMENT, "tsr_storage_share_fd");
    CHECK(!s.is_shared());
    OK(s.share_memory());
    CHECK(s.is_shared());
    CHECK(!s.resizable());
    int fd = OK(s.share_fd());
    Storage other = OK(Storage::from_fd(fd));
    close(fd);
    CHECK_EQ(other.nbytes(), 16u);
    static_cast<unsigned char*>(other.data())[3] = 9;
    CHECK_EQ(static_cast<unsigned char*>(s.data())[3], 9);
    std::string name = OK(s.share_name());
    CHECK_EQ(name.rfind("/tessera-", 0), 0u);
    Storage named = OK(Storage::open_shared(name));
    CHECK_EQ(static_cast<unsigned char*>(named.data())[0], 7);
    CHECK_FAILS(Storage::open_shared("/tessera-no-such-name"), TSR_ERR_IO,
                "tsr_storage_open_shared");
}

TEST(tensor_value_semantics) {
    Tensor t = OK(Tensor::empty({2, 3}, TSR_FLOAT));
    CHECK_EQ(t.use_count(), 1u);
    Tensor copy = t;
    CHECK_EQ(t.use_count(), 2u);
    CHECK(copy == t);
    CHECK_EQ(copy.data(), t.data());  // a copy shares the tensor, not a clone
    Tensor moved = std::move(copy);
    CHECK(!copy);
    CHECK_EQ(copy.ndim(), -1);
    CHECK(copy.sizes().empty());
    CHECK_EQ(t.use_count(), 2u);
    moved = Tensor();
    CHECK_EQ(t.use_count(), 1u);

    tessera::WeakTensor w = t.downgrade();
    CHECK_EQ(w.use_count(), 1u);
    {
        Tensor locked = w.lock();
        CHECK(locked == t);
        CHECK_EQ(t.use_count(), 2u);
    }
    // A tensor keeps its storage alive; the storage handle is shared.
    Storage s = t.storage();
    CHECK_EQ(s.use_count(), 2u);  // the tensor's reference and ours
    tessera::WeakStorage ws = s.downgrade();
    s.reset();
    t.reset();
    CHECK(w.expired());
    CHECK(ws.expired());

    std::map<Tensor, int> by_identity;
    std::unordered_set<Tensor> seen;
    Tensor a = OK(Tensor::empty({1}));
    Tensor b = OK(Tensor::empty({1}));
    by_identity[a] = 1;
    by_identity[b] = 2;
    seen.insert(a);
    seen.insert(a);
    CHECK_EQ(by_identity.size(), 2u);
    CHECK_EQ(seen.size(), 1u);
    CHECK_EQ(a.use_count(), 3u);

    // Weak references compare and hash by the object they refer to.
    std::unordered_set<tessera::WeakTensor> watched;
    watched.insert(a.downgrade());
    watched.insert(a.downgrade());
    watched.insert(b.downgrade());
    CHECK_EQ(watched.size(), 2u);
    CHECK(a.downgrade() == a.downgrade());
    CHECK(a.downgrade() != b.downgrade());
    CHECK_EQ(a.weak_use_count(), 2u);  // the set kept one weak reference, + 1 while alive
}

// from_data / from_values: a copy of C++ values (tsr_tensor_from_data),
// the dtype from the element type; TESSERA_VALUE in both modes.
TEST(tensor_from_values) {
    std::array<double, 6> values{1.5, -2.0, 3.25, 0.0, 1e300, -7.0};
    Tensor t = OK(Tensor::from_data(values.data(), {2, 3}));
    CHECK_EQ(t.dtype(), TSR_DOUBLE);
    CHECK_EQ(vec(t.sizes()), (std::vector<int64_t>{2, 3}));
    values[0] = 99.0;  // a copy: the tensor keeps 1.5
    const double* p = OK(t.data<const double>());
    CHECK(p != values.data());
    CHECK(p[0] == 1.5 && p[4] == 1e300);

    Tensor v = TESSERA_VALUE(Tensor::from_values<int32_t>({1, 2, 3, 4}, {2, 2}));
    CHECK_EQ(v.dtype(), TSR_INT);
    CHECK_EQ(OK(v.data<const int32_t>())[3], 4);
    Tensor flat = OK(Tensor::from_values<float>({0.5f, 1.5f}));
    CHECK_EQ(vec(flat.sizes()), (std::vector<int64_t>{2}));
    CHECK_FAILS(Tensor::from_values<float>({1, 2, 3}, {2, 2}), TSR_ERR_SHAPE,
                "3 values for sizes of 4 elements");
    CHECK_FAILS(Tensor::from_data(static_cast<const void*>(nullptr), {2}, TSR_FLOAT),
                TSR_ERR_NULL_POINTER, "tsr_tensor_from_data");
}

TEST(tensor_metadata) {
    Tensor t = OK(Tensor::empty({2, 3, 4}, TSR_DOUBLE));
    CHECK_EQ(t.ndim(), 3);
    CHECK_EQ(vec(t.sizes()), (std::vector<int64_t>{2, 3, 4}));
    CHECK_EQ(vec(t.strides()), (std::vector<int64_t>{12, 4, 1}));
    CHECK_EQ(OK(t.size(-1)), 4);
    CHECK_EQ(OK(t.stride(0)), 12);
    CHECK_FAILS(t.size(3), TSR_ERR_SHAPE, "dim 3 is out of range");
    CHECK_FAILS(Tensor().stride(0), TSR_ERR_NULL_POINTER, "");
    CHECK_EQ(t.numel(), 24);
    CHECK_EQ(t.dtype(), TSR_DOUBLE);
    CHECK_EQ(t.itemsize(), 8u);
    CHECK(t.device().is_cpu());
    CHECK_EQ(t.storage_offset(), 0);
    CHECK(t.is_contiguous());
    CHECK(t.is_non_overlapping_and_dense());
    CHECK(OK(t.data<double>()) == t.data());
    CHECK_FAILS(t.data<float>(), TSR_ERR_DTYPE, "T is Float but the tensor holds Double");
    CHECK_FAILS(Tensor().data<float>(), TSR_ERR_NULL_POINTER, "");

    Tensor cl = OK(Tensor::empty({1, 3, 4, 5}, TSR_FLOAT, Device::cpu(), TSR_CHANNELS_LAST));
    CHECK(cl.is_contiguous(TSR_CHANNELS_LAST));
    CHECK(!cl.is_contiguous());
    CHECK_EQ(vec(cl.strides()), (std::vector<int64_t>{60, 1, 15, 3}));

    Tensor strided = OK(Tensor::empty_strided({2, 2}, {1, 2}, TSR_INT));
    CHECK_EQ(vec(strided.strides()), (std::vector<int64_t>{1, 2}));
    CHECK_FAILS(Tensor::empty_strided({2, 2}, {1}), TSR_ERR_SHAPE, "2 sizes but 1 strides");
    CHECK_FAILS(Tensor::empty({-1}), TSR_ERR_SHAPE, "tsr_tensor_empty");

    Tensor like = OK(t.empty_like());
    CHECK_EQ(vec(like.sizes()), vec(t.sizes()));
    CHECK_EQ(like.dtype(), TSR_DOUBLE);
    CHECK(like.data() != t.data());
}

TEST(tensor_views_share_storage) {
    Tensor t = arange({2, 3});
    Tensor tr = OK(t.transpose(0, 1));
    CHECK_EQ(vec(tr.sizes()), (std::vector<int64_t>{3, 2}));
    CHECK_EQ(vec(tr.strides()), (std::vector<int64_t>{1, 3}));
    CHECK(tr.storage() == t.storage());
    CHECK_EQ(at(tr, 2, 1), 5.0f);
    CHECK(!tr.is_contiguous());

    Tensor v = OK(t.view({3, -1}));
    CHECK_EQ(vec(v.sizes()), (std::vector<int64_t>{3, 2}));
    CHECK(v.data() == t.data());
    CHECK_FAILS(t.view({4, 2}), TSR_ERR_SHAPE, "shape [4, 2] is invalid for input of size 6");
    CHECK_FAILS(tr.view({6}), TSR_ERR_SHAPE, "tsr_tensor_view");

    Tensor r = OK(tr.reshape({6}));  // needs a copy
    CHECK(r.storage() != t.storage());
    CHECK_EQ(OK(r.data<float>())[1], 3.0f);

    Tensor p = OK(OK(t.unsqueeze(0)).permute({2, 0, 1}));
    CHECK_EQ(vec(p.sizes()), (std::vector<int64_t>{3, 1, 2}));
    CHECK_EQ(vec(OK(p.squeeze()).sizes()), (std::vector<int64_t>{3, 2}));
    CHECK_EQ(vec(OK(p.squeeze(1)).sizes()), (std::vector<int64_t>{3, 2}));
    CHECK_EQ(vec(OK(p.squeeze(0)).sizes()), (std::vector<int64_t>{3, 1, 2}));

    Tensor e = OK(OK(t.select(0, 1)).expand({4, 3}));
    CHECK_EQ(vec(e.strides()), (std::vector<int64_t>{0, 1}));
    CHECK_EQ(at(e, 3, 2), 5.0f);
    CHECK_FAILS(t.expand({3, 3}), TSR_ERR_SHAPE, "tsr_tensor_expand");

    Tensor n = OK(t.narrow(1, 1, 2));
    CHECK_EQ(n.storage_offset(), 1);
    CHECK_EQ(at(n, 1, 1), 5.0f);

    Tensor f = OK(OK(Tensor::empty({2, 3, 4})).flatten(1));
    CHECK_EQ(vec(f.sizes()), (std::vector<int64_t>{2, 12}));

    Tensor s = OK(t.as_strided({3}, {2}, 0));
    CHECK_EQ(OK(s.data<float>())[2 * 2], 4.0f);
    CHECK_FAILS(t.as_strided({3}, {3}, 0), TSR_ERR_SHAPE, "out of bounds");

    Tensor c = OK(tr.contiguous());
    CHECK(c.is_contiguous());
    CHECK_EQ(OK(c.data<float>())[1], 3.0f);
    Tensor same = OK(t.contiguous());
    CHECK(same == t);  // already contiguous: the same tensor

    Tensor k = OK(t.clone());
    CHECK(k.storage() != t.storage());
    CHECK_EQ(at(k, 1, 2), 5.0f);
}

TEST(tensor_in_place) {
    Tensor t = OK(Tensor::full({2, 2}, 1.5));
    CHECK_EQ(at(t, 1, 1), 1.5f);
    uint64_t v0 = t.version();
    OK(t.fill(2));
    CHECK_EQ(at(t, 0, 1), 2.0f);
    CHECK(t.version() > v0);

    Tensor row = arange({2});
    OK(t.copy_(row));  // broadcast over rows
    CHECK_EQ(at(t, 1, 1), 1.0f);
    CHECK_FAILS(t.copy_(arange({3})), TSR_ERR_SHAPE, "tsr_tensor_copy");

    Tensor ints = OK(Tensor::full({3}, 7, TSR_INT));
    CHECK_EQ(OK(ints.data<int32_t>())[2], 7);

    // set_: the seed scenario, pointing the tensor at a zeroed clone.
    Storage zeros = OK(t.storage().clone());
    OK(zeros.fill(0));
    OK(t.set_(zeros, 0, {2, 2}));
    CHECK(t.storage() == zeros);
    CHECK_EQ(at(t, 1, 0), 0.0f);
    OK(t.set_(zeros, 1, {2}, {2}));
    CHECK_EQ(vec(t.sizes()), (std::vector<int64_t>{2}));
    CHECK_EQ(t.storage_offset(), 1);
    CHECK_FAILS(t.set_(zeros, 0, {2}, {1, 1}), TSR_ERR_SHAPE, "1 sizes but 2 strides");
    // A resizable storage grows to fit (c10's set_), a fixed one is refused.
    OK(t.fill(3));  // elements 1 and 3 of zeros
    OK(t.set_(zeros, 0, {5}));
    CHECK_EQ(zeros.nbytes(), 5 * sizeof(float));
    CHECK_EQ(OK(t.data<const float>())[3], 3.0f);  // the first bytes kept
    Storage fixed = OK(Storage::create(4 * sizeof(float)));
    CHECK_FAILS(t.set_(fixed, 0, {5}), TSR_ERR_SHAPE, "out of bounds");

    // resize_: the offset kept, the storage grown, the layout in the format asked for.
    uint64_t v1 = t.version();
    OK(t.set_(zeros, 1, {2}));
    OK(t.resize_({2, 3, 2, 2}, TSR_CHANNELS_LAST));
    CHECK_EQ(vec(t.strides()), (std::vector<int64_t>{12, 1, 6, 3}));
    CHECK_EQ(t.storage_offset(), 1);
    CHECK_EQ(zeros.nbytes(), 25 * sizeof(float));
    CHECK(t.version() > v1);
    OK(t.resize_({2}));
    CHECK_EQ(zeros.nbytes(), 25 * sizeof(float));  // never shrunk
    Tensor on_fixed = OK(Tensor::from_storage(fixed, {4}, TSR_FLOAT));
    CHECK_FAILS(on_fixed.resize_({5}), TSR_ERR_NOT_RESIZABLE, "tsr_tensor_resize");
    CHECK_FAILS(on_fixed.resize_({2, 2}, TSR_CHANNELS_LAST), TSR_ERR_SHAPE, "requires 4 dims");

    Storage bytes = OK(Storage::create(6 * sizeof(float)));
    Tensor over = OK(Tensor::from_storage(bytes, {2, 3}, TSR_FLOAT));
    CHECK(over.data() == bytes.data());
    Tensor strided = OK(Tensor::from_storage(bytes, {3, 2}, {1, 3}, TSR_FLOAT));
    CHECK(strided.storage() == bytes);
    CHECK_FAILS(Tensor::from_storage(bytes, {7}, TSR_FLOAT), TSR_ERR_SHAPE, "out of bounds");
}

TEST(tensor_item) {
    // c10's item(): the one element, whatever the number of dims of size 1.
    Tensor h = OK(Tensor::empty({1, 1}, TSR_HALF));
    OK(h.fill(1.5));
    CHECK_EQ(OK(h.item<double>()), 1.5);
    CHECK_EQ(OK(h.item<int>()), 1);
    Tensor c = OK(Tensor::empty({}, TSR_COMPLEX_FLOAT));
    OK(c.fill(std::complex<double>(2.0, -0.5)));
    CHECK(OK(c.item<std::complex<double>>()) == std::complex<double>(2.0, -0.5));
    Tensor b = OK(Tensor::empty({1}, TSR_BOOL));
    OK(b.fill(true));
    CHECK(OK(b.item<bool>()));
    Tensor u = OK(Tensor::empty({1}, TSR_UINT64));
    OK(u.fill(UINT64_MAX));
    CHECK_EQ(OK(u.item<uint64_t>()), UINT64_MAX);
    CHECK_FAILS(OK(Tensor::empty({2}, TSR_FLOAT)).item<float>(), TSR_ERR_SHAPE,
                "exactly one element");
}

TEST(dlpack_round_trip) {
    Tensor t = arange({2, 3});
    DLManagedTensorVersioned* m = OK(t.to_dlpack());
    CHECK_EQ(m->dl_tensor.ndim, 2);
    CHECK(m->dl_tensor.data == t.data());
    Tensor back = OK(Tensor::from_dlpack(m));  // consumed
    CHECK(back.data() == t.data());
    CHECK_EQ(vec(back.sizes()), (std::vector<int64_t>{2, 3}));
    CHECK_FAILS(Tensor::from_dlpack(nullptr), TSR_ERR_NULL_POINTER, "tsr_tensor_from_dlpack");

    DLManagedTensor* legacy = OK(OK(t.transpose(0, 1)).to_dlpack_legacy());
    CHECK_EQ(legacy->dl_tensor.strides[0], 1);
    Tensor from_legacy = OK(Tensor::from_dlpack_legacy(legacy));
    CHECK_EQ(vec(from_legacy.strides()), (std::vector<int64_t>{1, 3}));
    CHECK(from_legacy.data() == t.data());
    CHECK_FAILS(Tensor().to_dlpack(), TSR_ERR_NULL_POINTER, "tsr_tensor_to_dlpack");
}

TEST(cuda_without_the_cuda_feature_or_a_device) {
    // This build may or may not have CUDA; either way the answers agree.
    if (!tessera::cuda_is_available()) {
        CHECK_EQ(tessera::cuda_device_count(), 0);
        TsrStatus why = tsr_cuda_init();
        CHECK(why == TSR_ERR_UNSUPPORTED || why == TSR_ERR_DEVICE);
        CHECK_FAILS(tessera::cuda_init(), why, "tsr_cuda_init");
        CHECK_FAILS(tessera::Allocator::cuda(), why, "tsr_cuda_allocator");
        CHECK_FAILS(tessera::Allocator::cuda_raw(), why, "tsr_cuda_raw_allocator");
        CHECK_FAILS(tessera::Allocator::cuda_pinned(), why, "tsr_cuda_pinned_allocator");
    } else {
        OK(tessera::cuda_init());
        CHECK(tessera::cuda_device_count() > 0);
        CHECK(OK(tessera::Allocator::cuda()).is_caching());
    }
}
