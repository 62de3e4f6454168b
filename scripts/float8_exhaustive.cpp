// Prints, for each of c10's five one-byte float types, an FNV-1a 64 hash
// of the bytes c10 encodes every one of the 2^32 float32 bit patterns to
// (in bit-pattern order); tests/float8_formats.rs (an ignored test, run in
// release) hashes tessera's encodings the same way. Build as
// scripts/float8_cases.cpp (libtorch headers and libc10).
#include <c10/util/Float8_e4m3fn.h>
#include <c10/util/Float8_e4m3fnuz.h>
#include <c10/util/Float8_e5m2.h>
#include <c10/util/Float8_e5m2fnuz.h>
#include <c10/util/Float8_e8m0fnu.h>
#include <cstdint>
#include <cstdio>
#include <cstring>

template <typename T>
static uint64_t hash_all() {
    uint64_t h = 0xcbf29ce484222325ull;
    uint32_t i = 0;
    do {
        float f;
        std::memcpy(&f, &i, 4);
        h = (h ^ T(f).x) * 0x100000001b3ull;
    } while (++i != 0);
    return h;
}

int main() {
    std::printf("Float8_e5m2 %016llx\n", (unsigned long long)hash_all<c10::Float8_e5m2>());
    std::printf("Float8_e4m3fn %016llx\n", (unsigned long long)hash_all<c10::Float8_e4m3fn>());
    std::printf("Float8_e5m2fnuz %016llx\n", (unsigned long long)hash_all<c10::Float8_e5m2fnuz>());
    std::printf("Float8_e4m3fnuz %016llx\n", (unsigned long long)hash_all<c10::Float8_e4m3fnuz>());
    std::printf("Float8_e8m0fnu %016llx\n", (unsigned long long)hash_all<c10::Float8_e8m0fnu>());
}
