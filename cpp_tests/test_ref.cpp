// tessera::Ref and tessera::WeakRef over every refcounted C handle type:
// exact counts after adopt / copy / move / reset / release / downgrade /
// lock, expiry, dead-object detection, and use in standard containers.
#include "tessera.hpp"

#include "check.hpp"

#include <cstdlib>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

using tessera::Ref;
using tessera::WeakRef;

namespace {

TsrStatus malloc_allocate(void* self, size_t nbytes, TsrDevice device, TsrDataPtr* out) {
    (void)self;
    void* p = nbytes ? std::malloc(nbytes) : nullptr;
    if (nbytes && p == nullptr) {
        return tsr_set_last_error(TSR_ERR_OUT_OF_MEMORY, "malloc failed");
    }
    *out = TsrDataPtr{p, p, &std::free, device};
    return TSR_OK;
}

// A new handle of each type, owned by the caller (count 1).
template <class T>
T* make_handle();

template <>
TsrStorage* make_handle<TsrStorage>() {
    TsrStorage* s = nullptr;
    CHECK_EQ(tsr_storage_new(16, TsrDevice{TSR_CPU, -1}, false, &s), TSR_OK);
    return s;
}

template <>
TsrTensor* make_handle<TsrTensor>() {
    const int64_t sizes[] = {2, 3};
    TsrTensor* t = nullptr;
    CHECK_EQ(tsr_tensor_empty(2, sizes, TSR_FLOAT, TsrDevice{TSR_CPU, -1}, &t), TSR_OK);
    return t;
}

template <>
TsrAllocator* make_handle<TsrAllocator>() {
    TsrAllocatorVTable vtable{};
    vtable.struct_size = sizeof vtable;
    vtable.name = "ref-test";
    vtable.allocate = &malloc_allocate;
    TsrAllocator* a = nullptr;
    CHECK_EQ(tsr_allocator_new(&vtable, nullptr, &a), TSR_OK);
    return a;
}

template <>
TsrObject* make_handle<TsrObject>() {
    TsrObject* o = nullptr;
    CHECK_EQ(tsr_object_new(8, nullptr, &o), TSR_OK);
    return o;
}

template <class T>
void counts_through_copy_move_reset() {
    Ref<T> a = Ref<T>::adopt(make_handle<T>());
    CHECK(a);
    CHECK_EQ(a.use_count(), 1u);
    CHECK_EQ(a.weak_use_count(), 1u);
    CHECK(a.unique());
    {
        Ref<T> b = a;  // copy: +1
        CHECK_EQ(a.use_count(), 2u);
        CHECK(b.get() == a.get());
        CHECK(b == a);
        CHECK(!a.unique());

        Ref<T> c = std::move(b);  // move: steals, count unchanged
        CHECK(!b);
        CHECK(b.get() == nullptr);
        CHECK(b == nullptr);
        CHECK_EQ(b.use_count(), 0u);
        CHECK_EQ(c.use_count(), 2u);

        c.reset();
        CHECK(!c);
        CHECK_EQ(a.use_count(), 1u);
        c.reset();  // resetting an empty Ref does nothing
        CHECK_EQ(a.use_count(), 1u);

        Ref<T> d = a;
        CHECK_EQ(a.use_count(), 2u);
    }  // d's destructor: -1
    CHECK_EQ(a.use_count(), 1u);
    CHECK_EQ(a.weak_use_count(), 1u);
}

template <class T>
void assignment() {
    Ref<T> a = Ref<T>::adopt(make_handle<T>());
    Ref<T> b = Ref<T>::adopt(make_handle<T>());
    WeakRef<T> watch_b = b.downgrade();
    CHECK(a != b);

    b = a;  // copy assignment drops b's old object (its only reference)
    CHECK(b == a);
    CHECK_EQ(a.use_count(), 2u);
    CHECK(watch_b.expired());

    const Ref<T>& same = b;
    b = same;  // self-assignment keeps the count
    CHECK_EQ(a.use_count(), 2u);

    Ref<T> c = Ref<T>::adopt(make_handle<T>());
    WeakRef<T> watch_c = c.downgrade();
    c = std::move(b);  // move assignment: drops c's old object, steals b's reference
    CHECK(watch_c.expired());
    CHECK(!b);
    CHECK(c == a);
    CHECK_EQ(a.use_count(), 2u);

    c = nullptr;
    CHECK(!c);
    CHECK_EQ(a.use_count(), 1u);
}

template <class T>
void release_and_adopt() {
    Ref<T> a = Ref<T>::adopt(make_handle<T>());
    Ref<T> keep = a;
    T* raw = a.release();
    CHECK(!a);
    CHECK_EQ(keep.use_count(), 2u);  // released, not dropped
    Ref<T> back = Ref<T>::adopt(raw);
    CHECK_EQ(keep.use_count(), 2u);
    CHECK(back == keep);

    Ref<T> retained = OK(Ref<T>::retain(raw));  // borrowed: +1
    CHECK_EQ(keep.use_count(), 3u);
    Ref<T> none = OK(Ref<T>::retain(nullptr));
    CHECK(!none);
    CHECK(Ref<T>::adopt(nullptr) == nullptr);
}

template <class T>
void weak_counts_lock_and_expiry() {
    Ref<T> a = Ref<T>::adopt(make_handle<T>());
    WeakRef<T> w = a.downgrade();
    CHECK(w);
    CHECK_EQ(a.use_count(), 1u);
    CHECK_EQ(a.weak_use_count(), 2u);  // one weak ref + 1 while strong > 0
    CHECK_EQ(w.use_count(), 1u);
    CHECK_EQ(w.weak_use_count(), 2u);
    CHECK(!w.expired());
    {
        WeakRef<T> w2 = w;  // weak copy
        CHECK_EQ(a.weak_use_count(), 3u);
        WeakRef<T> w3 = std::move(w2);  // weak move
        CHECK(!w2);
        CHECK_EQ(a.weak_use_count(), 3u);
        CHECK(w3 == w);
    }
    CHECK_EQ(a.weak_use_count(), 2u);
    {
        Ref<T> locked = w.lock();
        CHECK(locked == a);
        CHECK_EQ(a.use_count(), 2u);
    }
    CHECK_EQ(a.use_count(), 1u);

    WeakRef<T> from_ctor(a);
    CHECK_EQ(a.weak_use_count(), 3u);
    from_ctor.reset();
    CHECK(!from_ctor);
    CHECK(from_ctor.expired());  // an empty weak ref counts as expired
    CHECK(!from_ctor.lock());
    CHECK_EQ(a.weak_use_count(), 2u);

    T* dead = a.get();
    a.reset();  // last strong reference: expired, memory kept by w
    CHECK(w.expired());
    CHECK_EQ(w.use_count(), 0u);
    CHECK_EQ(w.weak_use_count(), 1u);
    Ref<T> gone = w.lock();
    CHECK(!gone);
    CHECK(gone == nullptr);
    // The memory is alive (w holds it), so incref on the dead object is
    // detected and refused.
    CHECK_FAILS(Ref<T>::retain(dead), TSR_ERR_DEAD_OBJECT, "");

    typename WeakRef<T>::weak_type* raw = w.release();
    CHECK(!w);
    WeakRef<T> back = WeakRef<T>::adopt(raw);
    WeakRef<T> again = OK(WeakRef<T>::retain(raw));
    CHECK_EQ(back.weak_use_count(), 2u);
}

template <class T>
void containers() {
    Ref<T> a = Ref<T>::adopt(make_handle<T>());
    Ref<T> b = Ref<T>::adopt(make_handle<T>());
    {
        std::vector<Ref<T>> refs;
        for (int i = 0; i < 100; i++) {
            refs.push_back(i % 2 ? a : b);  // reallocations move (noexcept), never leak
        }
        CHECK_EQ(a.use_count(), 51u);
        CHECK_EQ(b.use_count(), 51u);
        refs.erase(refs.begin(), refs.begin() + 10);
        CHECK_EQ(a.use_count(), 46u);
        std::vector<Ref<T>> copy = refs;
        CHECK_EQ(a.use_count(), 91u);
    }
    CHECK_EQ(a.use_count(), 1u);
    CHECK_EQ(b.use_count(), 1u);
    {
        std::map<Ref<T>, int> ordered;
        ordered[a] = 1;
        ordered[b] = 2;
        ordered[a] = 3;  // same key
        CHECK_EQ(ordered.size(), 2u);
        CHECK_EQ(ordered[a], 3);
        CHECK_EQ(a.use_count(), 2u);

        std::unordered_map<Ref<T>, int> hashed;
        hashed.emplace(a, 1);
        hashed.emplace(b, 2);
        CHECK_EQ(hashed.count(a), 1u);
        CHECK_EQ(a.use_count(), 3u);

        std::set<WeakRef<T>> weak_set;
        weak_set.insert(a.downgrade());
        weak_set.insert(b.downgrade());
        std::unordered_set<WeakRef<T>> weak_hashed;
        weak_hashed.insert(*weak_set.begin());
        CHECK_EQ(weak_set.size(), 2u);
        CHECK_EQ(a.weak_use_count() + b.weak_use_count(), 2u + 2u + 1u);  // +1 each, one copy
    }
    CHECK_EQ(a.use_count(), 1u);
    CHECK_EQ(a.weak_use_count(), 1u);

    // Weak references in a container outlive their objects.
    std::vector<WeakRef<T>> watchers;
    for (int i = 0; i < 10; i++) {
        watchers.push_back(a.downgrade());
    }
    CHECK_EQ(a.weak_use_count(), 11u);
    a.reset();
    for (const WeakRef<T>& w : watchers) {
        CHECK(w.expired());
        CHECK(!w.lock());
    }
    CHECK_EQ(watchers.front().weak_use_count(), 10u);
}

template <class T>
void all() {
    counts_through_copy_move_reset<T>();
    assignment<T>();
    release_and_adopt<T>();
    weak_counts_lock_and_expiry<T>();
    containers<T>();
}

}  // namespace

TEST(ref_storage) { all<TsrStorage>(); }
TEST(ref_tensor) { all<TsrTensor>(); }
TEST(ref_allocator) { all<TsrAllocator>(); }
TEST(ref_object) { all<TsrObject>(); }

TEST(ref_swap_and_order) {
    Ref<TsrObject> a = Ref<TsrObject>::adopt(make_handle<TsrObject>());
    Ref<TsrObject> b = Ref<TsrObject>::adopt(make_handle<TsrObject>());
    TsrObject* pa = a.get();
    TsrObject* pb = b.get();
    a.swap(b);
    CHECK(a.get() == pb);
    CHECK(b.get() == pa);
    CHECK((a < b) != (b < a));
    CHECK_EQ(std::hash<Ref<TsrObject>>()(a), std::hash<TsrObject*>()(pb));
}

TEST(weak_ref_of_a_dead_storage_keeps_no_bytes) {
    Ref<TsrStorage> s = Ref<TsrStorage>::adopt(make_handle<TsrStorage>());
    WeakRef<TsrStorage> w(s);
    CHECK_EQ(tsr_storage_nbytes(s.get()), 16u);
    s.reset();
    CHECK(w.expired());
    CHECK(!w.lock());
}
