// tessera::Object: host C++ objects in refcounted blocks. The destructor
// runs exactly once, at the point the documented protocol says; copies,
// moves and weak references count exactly; raw C objects keep their
// callbacks.
#include "tessera.hpp"

#include "check.hpp"

#include <cstdint>
#include <string>
#include <vector>

using tessera::Object;
using tessera::WeakObject;

namespace {

struct Log {
    int constructed = 0;
    int destroyed = 0;
    int released = 0;
};

// A plain C++ type: destroyed when the strong count reaches 0.
struct Plain {
    Log* log;
    std::string name;
    std::vector<int> payload;
    Plain(Log* l, std::string n) : log(l), name(std::move(n)), payload(1000, 1) {
        log->constructed++;
    }
    ~Plain() { log->destroyed++; }
};

// A type with release_resources(): c10's protocol.
struct WithRelease {
    Log* log;
    std::vector<int> resources;
    explicit WithRelease(Log* l) : log(l), resources(1000, 2) { log->constructed++; }
    void release_resources() {
        log->released++;
        resources.clear();
        resources.shrink_to_fit();
    }
    ~WithRelease() { log->destroyed++; }
};

struct alignas(64) OverAligned {
    Log* log;
    double value;
    OverAligned(Log* l, double v) : log(l), value(v) { log->constructed++; }
    ~OverAligned() { log->destroyed++; }
};

int c_destroy_calls = 0;
int c_release_calls = 0;
void c_destroy(void* obj) {
    c_destroy_calls++;
    CHECK_EQ(*static_cast<int*>(obj), 42);
}
void c_release(void* obj) {
    c_release_calls++;
    CHECK_EQ(*static_cast<int*>(obj), 42);
}

}  // namespace

TEST(plain_object_destroyed_once_when_strong_count_ends) {
    Log log;
    {
        Object o = OK(Object::make<Plain>(&log, "first"));
        CHECK_EQ(log.constructed, 1);
        CHECK_EQ(o.use_count(), 1u);
        Plain* p = o.as<Plain>();
        CHECK(p != nullptr);
        CHECK_EQ(p->name, std::string("first"));
        CHECK_EQ(p->payload.size(), 1000u);
        CHECK(o.as<WithRelease>() == nullptr);  // another type

        Object copy = o;
        CHECK_EQ(o.use_count(), 2u);
        CHECK(copy.as<Plain>() == p);
        Object moved = std::move(copy);
        CHECK(!copy);
        CHECK(copy.as<Plain>() == nullptr);
        CHECK_EQ(o.use_count(), 2u);
        moved.reset();
        CHECK_EQ(o.use_count(), 1u);
        CHECK_EQ(log.destroyed, 0);
    }
    CHECK_EQ(log.destroyed, 1);
    CHECK_EQ(log.released, 0);
}

TEST(plain_object_with_weak_refs) {
    Log log;
    WeakObject w;
    {
        Object o = OK(Object::make<Plain>(&log, "weak"));
        w = o.downgrade();
        CHECK_EQ(o.weak_use_count(), 2u);
        CHECK(!w.expired());
        Object again = w.lock();
        CHECK(again == o);
        CHECK_EQ(o.use_count(), 2u);
    }
    // The strong count ended: the C++ object is gone, its memory stays for w.
    CHECK_EQ(log.destroyed, 1);
    CHECK(w.expired());
    CHECK(!w.lock());
    CHECK_EQ(w.weak_use_count(), 1u);
    w.reset();
    CHECK_EQ(log.destroyed, 1);  // still exactly once
}

TEST(release_resources_protocol) {
    Log log;
    {
        // No weak reference: no release_resources, one destructor call.
        Object o = OK(Object::make<WithRelease>(&log));
        CHECK_EQ(log.constructed, 1);
    }
    CHECK_EQ(log.released, 0);
    CHECK_EQ(log.destroyed, 1);

    WeakObject w;
    {
        Object o = OK(Object::make<WithRelease>(&log));
        w = o.downgrade();
        WeakObject w2 = w;
        CHECK_EQ(o.weak_use_count(), 3u);
    }
    // Strong count 0 with a weak reference left: resources released, the
    // object itself kept until the last weak reference goes.
    CHECK_EQ(log.released, 1);
    CHECK_EQ(log.destroyed, 1);
    CHECK(w.expired());
    w.reset();
    CHECK_EQ(log.released, 1);
    CHECK_EQ(log.destroyed, 2);
}

TEST(over_aligned_object) {
    Log log;
    {
        Object o = OK(Object::make<OverAligned>(&log, 2.5));
        OverAligned* p = o.as<OverAligned>();
        CHECK(p != nullptr);
        CHECK_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
        CHECK_EQ(p->value, 2.5);
    }
    CHECK_EQ(log.constructed, 1);
    CHECK_EQ(log.destroyed, 1);
}

TEST(objects_in_containers) {
    Log log;
    {
        std::vector<Object> objects;
        for (int i = 0; i < 20; i++) {
            objects.push_back(OK(Object::make<Plain>(&log, std::to_string(i))));
        }
        std::vector<Object> copies = objects;
        std::vector<WeakObject> watchers;
        for (const Object& o : objects) {
            watchers.push_back(o.downgrade());
            CHECK_EQ(o.use_count(), 2u);
        }
        objects.clear();
        CHECK_EQ(log.destroyed, 0);
        copies.erase(copies.begin(), copies.begin() + 5);
        CHECK_EQ(log.destroyed, 5);
        CHECK(watchers[0].expired());
        CHECK(!watchers[5].expired());
        CHECK_EQ(watchers[5].lock().as<Plain>()->name, std::string("5"));
    }
    CHECK_EQ(log.constructed, 20);
    CHECK_EQ(log.destroyed, 20);
}

#if TESSERA_EXCEPTIONS
namespace {
struct ThrowsInConstructor {
    explicit ThrowsInConstructor(Log* log) {
        log->constructed++;
        throw std::runtime_error("constructor failed");
    }
    ~ThrowsInConstructor() { std::abort(); }  // must never run
};
}  // namespace

TEST(throwing_constructor_never_destroys) {
    Log log;
    bool caught = false;
    try {
        Object o = Object::make<ThrowsInConstructor>(&log);
    } catch (const std::runtime_error& e) {
        caught = std::string(e.what()) == "constructor failed";
    }
    CHECK(caught);
    CHECK_EQ(log.constructed, 1);
}
#endif

TEST(raw_c_objects) {
    c_destroy_calls = 0;
    c_release_calls = 0;
    TsrObjectVTable vtable{sizeof(TsrObjectVTable), &c_release, &c_destroy};
    WeakObject w;
    {
        Object o = OK(Object::create(sizeof(int), &vtable));
        *static_cast<int*>(o.data()) = 42;
        w = o.downgrade();
    }
    CHECK_EQ(c_release_calls, 1);
    CHECK_EQ(c_destroy_calls, 0);
    w.reset();
    CHECK_EQ(c_destroy_calls, 1);

    Object plain = OK(Object::create(16));
    CHECK(plain.data() != nullptr);
    CHECK_EQ(static_cast<unsigned char*>(plain.data())[15], 0u);  // zeroed
    TsrObjectVTable bad{2, nullptr, nullptr};
    CHECK_FAILS(Object::create(8, &bad), TSR_ERR_INVALID_ARGUMENT, "struct_size");
}
