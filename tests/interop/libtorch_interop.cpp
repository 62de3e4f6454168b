// Serialization interop with libtorch (.ci/serialization-interop.sh):
// 1. tessera writes a torch-format dict (a base tensor, two views of it,
//    other dtypes, a 0-dim and a 0-size tensor); libtorch's
//    torch::pickle_load reads it: same names, dtypes, sizes, strides,
//    offsets and values, the views sharing the base's storage.
// 2. libtorch's torch::pickle_save writes a dict of the same kind; tessera
//    reads it (from a storage and from a file, copied and mapped): same
//    values and geometry, the views on one storage, a write through the
//    base visible in the views.
// Prints one line per check group and exits non-zero on the first failure.
#include <torch/torch.h>
#include <torch/serialize.h>

#include "tessera.hpp"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

namespace {

int failures = 0;

#define EXPECT(cond)                                                                  \
    do {                                                                              \
        if (!(cond)) {                                                                \
            std::fprintf(stderr, "%s:%d: FAILED: %s\n", __FILE__, __LINE__, #cond);  \
            failures++;                                                               \
        }                                                                             \
    } while (0)

struct Pair {
    TsrDType tsr;
    at::ScalarType at;
};

const Pair kDtypes[] = {
    {TSR_FLOAT, at::kFloat},   {TSR_DOUBLE, at::kDouble}, {TSR_HALF, at::kHalf},
    {TSR_BFLOAT16, at::kBFloat16}, {TSR_LONG, at::kLong}, {TSR_INT, at::kInt},
    {TSR_SHORT, at::kShort},   {TSR_CHAR, at::kChar},     {TSR_BYTE, at::kByte},
    {TSR_BOOL, at::kBool},     {TSR_COMPLEX_FLOAT, at::kComplexFloat},
    {TSR_COMPLEX_DOUBLE, at::kComplexDouble},
};

at::ScalarType at_of(TsrDType d) {
    for (const Pair& p : kDtypes) {
        if (p.tsr == d) return p.at;
    }
    return at::kFloat;
}

// The element bytes of a tessera tensor in row-major order.
std::vector<char> bytes_of(const tessera::Tensor& t) {
    int64_t n = t.numel(), nd = t.ndim();
    size_t item = tsr_tensor_itemsize(t.get());
    std::vector<char> out(size_t(n) * item);
    std::vector<int64_t> idx(size_t(nd), 0);
    const char* base = static_cast<const char*>(t.data());
    for (int64_t e = 0; e < n; e++) {
        int64_t off = 0;
        for (int64_t d = 0; d < nd; d++) off += idx[d] * t.stride(d);
        std::memcpy(out.data() + size_t(e) * item, base + off * int64_t(item), item);
        for (int64_t d = nd - 1; d >= 0; d--) {
            if (++idx[d] < t.size(d)) break;
            idx[d] = 0;
        }
    }
    return out;
}

std::vector<char> bytes_of(const at::Tensor& t) {
    at::Tensor c = t.contiguous();
    const char* p = static_cast<const char*>(c.data_ptr());
    return std::vector<char>(p, p + c.numel() * c.element_size());
}

// Same dtype, sizes, strides and storage offset (shifted by `shift`
// elements: tensors loaded from a storage view it at their record's offset).
bool same_geometry(const tessera::Tensor& a, const at::Tensor& b, int64_t shift = 0) {
    if (a.ndim() != b.dim() || a.storage_offset() != b.storage_offset() + shift) return false;
    for (int64_t d = 0; d < a.ndim(); d++) {
        if (a.size(d) != b.size(d) || a.stride(d) != b.stride(d)) return false;
    }
    return at_of(a.dtype()) == b.scalar_type();
}

void fill_random(const tessera::Tensor& t, unsigned seed, bool is_bool) {
    auto* p = static_cast<unsigned char*>(tsr_storage_data(t.storage().get()));
    size_t n = tsr_storage_nbytes(t.storage().get());
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        p[i] = is_bool ? (seed >> 16) & 1 : (unsigned char)(seed >> 16);
    }
}

tessera::TensorDict tessera_dict() {
    tessera::TensorDict d = tessera::TensorDict::create();
    tessera::Tensor base = tessera::Tensor::empty({4, 6}, TSR_FLOAT);
    fill_random(base, 1, false);
    d.set("base", base);
    d.set("rows", base.narrow(0, 1, 2));
    d.set("cols_t", base.permute({1, 0}).narrow(0, 2, 3));
    unsigned seed = 7;
    for (const Pair& p : kDtypes) {
        tessera::Tensor t = tessera::Tensor::empty({3, 2}, p.tsr);
        fill_random(t, seed++, p.tsr == TSR_BOOL);
        d.set((std::string("dtype.") + tsr_dtype_name(p.tsr)).c_str(), t);
    }
    tessera::Tensor scalar = tessera::Tensor::empty({}, TSR_LONG);
    fill_random(scalar, 99, false);
    d.set("scalar", scalar);
    d.set("empty", tessera::Tensor::empty({0, 5}, TSR_FLOAT));
    return d;
}

void tessera_writes_libtorch_reads() {
    tessera::TensorDict d = tessera_dict();
    tessera::Storage s = d.save_to_storage(tessera::Format::Torch);
    const char* p = static_cast<const char*>(s.data());
    std::vector<char> bytes(p, p + s.nbytes());
    c10::IValue v = torch::pickle_load(bytes);
    EXPECT(v.isGenericDict());
    c10::Dict<c10::IValue, c10::IValue> dict = v.toGenericDict();
    EXPECT(dict.size() == d.size());
    size_t i = 0;
    for (const auto& entry : dict) {
        std::string name = entry.key().toStringRef();
        EXPECT(name == d.name(i));  // order kept
        i++;
        at::Tensor t = entry.value().toTensor();
        tessera::Tensor mine = d[name.c_str()];
        EXPECT(same_geometry(mine, t));
        EXPECT(bytes_of(mine) == bytes_of(t));
        if (!same_geometry(mine, t)) std::fprintf(stderr, "  geometry of '%s' differs\n", name.c_str());
    }
    at::Tensor base = dict.at("base").toTensor(), rows = dict.at("rows").toTensor(),
               cols = dict.at("cols_t").toTensor();
    EXPECT(base.storage().is_alias_of(rows.storage()));
    EXPECT(base.storage().is_alias_of(cols.storage()));
    base.view(-1)[6] = 123.5f;  // element [1, 0] of base is rows[0, 0]
    EXPECT(rows[0][0].item<float>() == 123.5f);
    std::printf("tessera -> torch::pickle_load: %zu tensors, values, geometry and sharing match\n",
                dict.size());
}

void libtorch_writes_tessera_reads(const std::string& dir) {
    c10::Dict<std::string, at::Tensor> dict;
    at::Tensor base = torch::randn({5, 4});
    dict.insert("base", base);
    dict.insert("rows", base.narrow(0, 1, 3));
    dict.insert("t", base.t());
    dict.insert("other.long", torch::arange(10, torch::kLong));
    dict.insert("other.half", torch::randn({2, 3}).to(torch::kHalf));
    dict.insert("other.bf16", torch::randn({3}).to(torch::kBFloat16));
    dict.insert("other.bool", torch::rand({4}) > 0.5);
    dict.insert("other.cfloat", torch::randn({2}, torch::kComplexFloat));
    dict.insert("scalar", torch::tensor(3.25));
    std::vector<char> bytes = torch::pickle_save(c10::IValue(dict));
    std::string path = dir + "/libtorch.pt";
    std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));

    tessera::Storage s = tessera::Storage::create(bytes.size());
    std::memcpy(s.data(), bytes.data(), bytes.size());
    std::vector<tessera::TensorDict> loaded;
    loaded.push_back(tessera::TensorDict::load(s));
    loaded.push_back(tessera::TensorDict::load(path.c_str()));
    loaded.push_back(tessera::TensorDict::load(path.c_str(), tessera::Format::Auto, TSR_LOAD_MMAP));
    for (tessera::TensorDict& d : loaded) {
        EXPECT(d.size() == dict.size());
        // From the storage (the first), base views `s` at its record's
        // offset; the other views keep their offsets relative to it.
        int64_t shift = d["base"].storage_offset();
        for (const auto& entry : dict) {
            tessera::Tensor mine = d[entry.key().c_str()];
            EXPECT(bool(mine));
            if (!mine) continue;
            bool shares = entry.value().storage().is_alias_of(base.storage());
            int64_t own_shift = shares ? shift : mine.storage_offset() - entry.value().storage_offset();
            EXPECT(same_geometry(mine, entry.value(), own_shift));
            EXPECT(bytes_of(mine) == bytes_of(entry.value()));
        }
        tessera::Tensor b = d["base"], r = d["rows"], t = d["t"];
        EXPECT(b.storage().get() == r.storage().get());
        EXPECT(b.storage().get() == t.storage().get());
        static_cast<float*>(b.data())[4] = -8.0f;  // base[1, 0] = rows[0, 0] = t[0, 1]
        EXPECT(static_cast<const float*>(r.data())[0] == -8.0f);
    }
    std::printf("torch::pickle_save -> tessera (storage, file, mmap): %zu tensors, values, geometry "
                "and sharing match\n",
                dict.size());
}

}  // namespace

int main(int argc, char** argv) {
    std::string dir = argc > 1 ? argv[1] : "/tmp";
    try {
        tessera_writes_libtorch_reads();
        libtorch_writes_tessera_reads(dir);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "FAILED: exception: %s\n", e.what());
        return 1;
    }
    if (failures) {
        std::fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    std::printf("libtorch interop: ok\n");
    return 0;
}
