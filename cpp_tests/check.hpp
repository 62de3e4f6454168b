// A small test harness for the C++ tests: TEST(name) { ... } registers a
// test; CHECK* record failures (file:line and the values) and let the test
// go on; main() (defined here, one per program) runs every test and exits
// non-zero if any check failed. Works in both of tessera.hpp's error modes:
// include tessera.hpp first, then this file.
#ifndef TESSERA_CPP_TESTS_CHECK_HPP
#define TESSERA_CPP_TESTS_CHECK_HPP

#include "tessera.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

namespace check {

struct Test {
    const char* name;
    void (*fn)();
};

inline std::vector<Test>& registry() {
    static std::vector<Test> tests;
    return tests;
}

inline int& failures() {
    static int n = 0;
    return n;
}

inline int& checks() {
    static int n = 0;
    return n;
}

struct Registrar {
    Registrar(const char* name, void (*fn)()) { registry().push_back(Test{name, fn}); }
};

inline void fail(const char* file, int line, const std::string& what) {
    failures()++;
    std::fprintf(stderr, "%s:%d: FAILED: %s\n", file, line, what.c_str());
}

// Writes a value for a failure message (integers as numbers, even 8-bit
// ones such as TsrDType; sizes as lists).
template <class T>
void show(std::ostream& out, const T& v) {
    if constexpr (std::is_same<T, bool>::value) {
        out << (v ? "true" : "false");
    } else if constexpr (std::is_integral<T>::value && std::is_signed<T>::value) {
        out << static_cast<long long>(v);
    } else if constexpr (std::is_integral<T>::value) {
        out << static_cast<unsigned long long>(v);
    } else if constexpr (std::is_same<T, tessera::IntSpan>::value ||
                         std::is_same<T, std::vector<int64_t>>::value) {
        out << "[";
        for (size_t i = 0; i < v.size(); i++) {
            out << (i ? ", " : "") << v[i];
        }
        out << "]";
    } else if constexpr (std::is_same<T, tessera::Device>::value) {
        out << "device(" << static_cast<int>(v.type()) << ", " << static_cast<int>(v.index())
            << ")";
    } else {
        out << v;
    }
}

template <class A, class B>
void check_eq(const char* file, int line, const char* a_text, const char* b_text, const A& a,
              const B& b) {
    checks()++;
    if (!(a == b)) {
        std::ostringstream out;
        out << a_text << " == " << b_text << " (";
        show(out, a);
        out << " vs ";
        show(out, b);
        out << ")";
        fail(file, line, out.str());
    }
}

inline void check_contains(const char* file, int line, const std::string& text,
                           const char* needle) {
    checks()++;
    if (text.find(needle) == std::string::npos) {
        fail(file, line, "\"" + text + "\" should contain \"" + needle + "\"");
    }
}

}  // namespace check

#define CHECK_CONCAT_INNER(a, b) a##b
#define CHECK_CONCAT(a, b) CHECK_CONCAT_INNER(a, b)

#define TEST(name)                                                              \
    static void name();                                                         \
    static const ::check::Registrar CHECK_CONCAT(check_registrar_, name)(#name, \
                                                                         name); \
    static void name()

#define CHECK(cond)                                    \
    do {                                               \
        ::check::checks()++;                           \
        if (!(cond)) {                                 \
            ::check::fail(__FILE__, __LINE__, #cond); \
        }                                              \
    } while (0)

#define CHECK_EQ(a, b) ::check::check_eq(__FILE__, __LINE__, #a, #b, (a), (b))

#define CHECK_CONTAINS(text, needle) \
    ::check::check_contains(__FILE__, __LINE__, (text), (needle))

// OK(expr): the value of a fallible tessera call that must succeed, in
// both error modes. With exceptions it is `expr` itself (a failure throws
// and fails the test); without, a failed Result is reported and the
// program stops (there is no value to go on with).
#if TESSERA_EXCEPTIONS
#define OK(expr) (expr)
#else
namespace check {
template <class T>
T unwrap(tessera::Result<T>&& r, const char* file, int line, const char* text) {
    checks()++;
    if (!r.ok()) {
        fail(file, line, std::string(text) + " failed: " + r.message());
        std::fflush(stderr);
        std::abort();
    }
    return std::move(r).value();
}
inline void unwrap(tessera::Result<void>&& r, const char* file, int line, const char* text) {
    checks()++;
    if (!r.ok()) {
        fail(file, line, std::string(text) + " failed: " + r.message());
        std::fflush(stderr);
        std::abort();
    }
}
}  // namespace check
#define OK(expr) ::check::unwrap((expr), __FILE__, __LINE__, #expr)
#endif

// CHECK_FAILS(expr, want_status, needle): the fallible call `expr` must fail
// with `want_status` and a message containing `needle` (thrown tessera::Error
// with exceptions, a failed Result without).
#if TESSERA_EXCEPTIONS
#define CHECK_FAILS(expr, want_status, needle)                                          \
    do {                                                                           \
        ::check::checks()++;                                                       \
        bool threw_ = false;                                                       \
        try {                                                                      \
            (void)(expr);                                                          \
        } catch (const tessera::Error& e_) {                                       \
            threw_ = true;                                                         \
            CHECK_EQ(e_.status(), (want_status));                                       \
            CHECK_CONTAINS(std::string(e_.what()), (needle));                      \
        }                                                                          \
        if (!threw_) {                                                             \
            ::check::fail(__FILE__, __LINE__, #expr " should throw tessera::Error"); \
        }                                                                          \
    } while (0)
#else
#define CHECK_FAILS(expr, want_status, needle)                       \
    do {                                                        \
        auto result_ = (expr);                                  \
        CHECK(!result_.ok());                                   \
        CHECK_EQ(result_.status(), (want_status));                   \
        CHECK_CONTAINS(result_.message(), (needle));            \
    } while (0)
#endif

int main() {
    int failed_tests = 0;
    for (const check::Test& t : check::registry()) {
        int before = check::failures();
#if TESSERA_EXCEPTIONS
        try {
            t.fn();
        } catch (const std::exception& e) {
            check::fail(__FILE__, __LINE__,
                        std::string("unexpected exception: ") + e.what());
        }
#else
        t.fn();
#endif
        bool ok = check::failures() == before;
        failed_tests += ok ? 0 : 1;
        std::printf("%s %s\n", ok ? "ok  " : "FAIL", t.name);
    }
    std::printf("%zu tests, %d checks, %d failed tests (%s)\n", check::registry().size(),
                check::checks(), failed_tests,
                TESSERA_EXCEPTIONS ? "exceptions" : "no exceptions: results");
    return failed_tests == 0 ? 0 : 1;
}

#endif  // TESSERA_CPP_TESTS_CHECK_HPP
