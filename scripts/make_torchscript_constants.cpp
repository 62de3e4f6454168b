// Writes tests/data/torch_save/torchscript_constants.pt with libtorch:
// a TorchScript archive whose tensors are in constants.pkl (the
// constants of the module's code), beside one kept attribute in data.pkl.
//
// Python's torch does not import on the machines tessera is built on (it
// needs torch's CUDA wheels); the torch wheel's libtorch does, so this
// program stands in for `torch.jit.save(torch.jit.freeze(m), path)`.
// Run once, by hand (the files it writes are committed):
//
//   T=/path/to/unpacked/torch   # benches/README.md, "Getting libtorch"
//   C=$(dirname $T)/nvidia/cu13/lib
//   g++ -std=c++20 -O1 -isystem $T/include \
//       -isystem $T/include/torch/csrc/api/include \
//       scripts/make_torchscript_constants.cpp -o /tmp/make_ts_constants \
//       -L$T/lib -ltorch_cpu -lc10 -Wl,-rpath,$T/lib -Wl,-rpath-link,$C
//   LD_LIBRARY_PATH=$C /tmp/make_ts_constants tests/data/torch_save
//
// The module: parameters `scale` (float32 2x3), `ids` (int64) and `bias`
// (float16), used by forward, and a buffer `kept`. torch::jit::freeze
// (preserving `kept`) folds the parameters into constants of the graph;
// saving writes them as the tuple of constants.pkl, their storages under
// `<archive>/constants/`, while `kept` stays an attribute in data.pkl
// (its storage under `<archive>/data/`: both directories have a key "0").
//
// Beside the archive it writes torchscript_constants.expected.jsonl, in
// the form of scripts/make_torch_fixtures.py (one line per tensor, then
// {"skipped": null}), from what libtorch itself reads back: the kept
// attribute of torch::jit::load's module, then each tensor of
// constants.pkl as libtorch's own reader (readArchiveAndTensors) returns
// it, named "constants.<index>" as tessera names them.

#include <torch/csrc/jit/api/module.h>
#include <torch/csrc/jit/serialization/import.h>
#include <torch/csrc/jit/serialization/import_read.h>
#include <torch/torch.h>

#include <caffe2/serialize/inline_container.h>

#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string dtype_name(c10::ScalarType t) {
    switch (t) {
    case c10::ScalarType::Float: return "float32";
    case c10::ScalarType::Double: return "float64";
    case c10::ScalarType::Half: return "float16";
    case c10::ScalarType::Long: return "int64";
    case c10::ScalarType::Int: return "int32";
    default: throw std::runtime_error("no name for this dtype here");
    }
}

std::string ints(c10::IntArrayRef v) {
    std::ostringstream s;
    s << "[";
    for (size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
    s << "]";
    return s.str();
}

std::string hex(const at::Tensor& t) {
    at::Tensor c = t.contiguous();
    const auto* p = static_cast<const unsigned char*>(c.data_ptr());
    std::string out;
    char buf[3];
    for (size_t i = 0; i < c.nbytes(); ++i) {
        std::snprintf(buf, sizeof buf, "%02x", p[i]);
        out += buf;
    }
    return out;
}

struct Rows {
    std::map<const void*, int> groups;
    std::string text;
    void add(const std::string& name, const at::Tensor& t) {
        const void* key = t.storage().data();
        auto it = groups.emplace(key, static_cast<int>(groups.size())).first;
        std::ostringstream s;
        s << "{\"name\": \"" << name << "\", \"dtype\": \"" << dtype_name(t.scalar_type())
          << "\", \"parameter\": false, \"sizes\": " << ints(t.sizes())
          << ", \"strides\": " << ints(t.strides()) << ", \"offset\": " << t.storage_offset()
          << ", \"group\": " << it->second << ", \"bytes\": \"" << hex(t) << "\"}\n";
        text += s.str();
    }
};

}  // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s OUTPUT_DIR\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    const std::string path = dir + "/torchscript_constants.pt";

    torch::jit::Module m("__torch__.Constants");
    m.register_parameter("scale",
                         torch::arange(6, torch::kFloat32).div(4).sub(0.5).reshape({2, 3}),
                         false);
    m.register_parameter("ids", torch::tensor(std::vector<int64_t>{7, -3, int64_t{1} << 40}, torch::kInt64), false);
    m.register_parameter("bias", torch::linspace(-1, 1, 3, torch::kFloat16), false);
    m.register_buffer("kept", torch::tensor({0.25, -8.0}, torch::kFloat64));
    m.define(R"(
def forward(self, x):
    y = x * self.scale + self.bias.float()
    return y, self.ids, self.kept, self.bias, self.scale[1], self.scale.t()
)");
    m.eval();
    torch::jit::Module frozen = torch::jit::freeze(m, std::vector<std::string>{"kept"});
    frozen.save(path);

    // What libtorch reads back.
    Rows rows;
    torch::jit::Module back = torch::jit::load(path);
    rows.add("kept", back.attr("kept").toTensor());
    caffe2::serialize::PyTorchStreamReader reader(path);
    c10::IValue constants = torch::jit::readArchiveAndTensors(
        "constants", "", "constants/", std::nullopt, std::nullopt, at::Device("cpu"), reader);
    const auto& elems = constants.toTupleRef().elements();
    for (size_t i = 0; i < elems.size(); ++i) {
        if (elems[i].isTensor()) rows.add("constants." + std::to_string(i), elems[i].toTensor());
    }
    rows.text += "{\"skipped\": null}\n";
    std::ofstream(dir + "/torchscript_constants.expected.jsonl") << rows.text;
    std::printf("%s: %zu constants\n%s", path.c_str(), elems.size(), rows.text.c_str());
    return 0;
}
