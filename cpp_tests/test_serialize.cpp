// tessera::TensorDict: order, operator[], metadata, save / load through
// files and storages in both formats, sharing kept by the torch format.
#include "tessera.hpp"

#include "check.hpp"

#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

using tessera::Format;
using tessera::Storage;
using tessera::Tensor;
using tessera::TensorDict;

namespace {

Tensor iota(int64_t n) {
    Tensor t = OK(Tensor::empty({n}, TSR_FLOAT));
    auto* p = static_cast<float*>(t.data());
    for (int64_t i = 0; i < n; i++) {
        p[i] = static_cast<float>(i);
    }
    return t;
}

std::string temp_path(const char* ext) {
    return "/tmp/tsr-cpp-serialize-" + std::to_string(getpid()) + ext;
}

}  // namespace

TEST(dict_order_lookup_and_metadata) {
    TensorDict d = OK(TensorDict::create());
    OK(d.set("z", iota(2)));
    OK(d.set("a", iota(3)));
    OK(d.set_metadata("epoch", "4"));
    CHECK_EQ(d.size(), 2u);
    std::vector<std::string> names;
    for (auto [name, t] : d) {
        names.push_back(name);
        CHECK(bool(t));
    }
    CHECK(names == (std::vector<std::string>{"z", "a"}));
    CHECK_EQ(d["a"].numel(), 3);
    CHECK(!d["missing"]);
    CHECK(d.contains("z"));
    CHECK_EQ(std::string(d.metadata("epoch")), std::string("4"));
    CHECK(d.metadata("nope") == nullptr);
    TensorDict moved = std::move(d);
    CHECK(!d);
    CHECK_EQ(moved.size(), 2u);
    CHECK_FAILS(d.set("x", iota(1)), TSR_ERR_NULL_POINTER, "dict");
}

TEST(torch_round_trip_keeps_sharing) {
    Tensor base = iota(8);
    Tensor view = OK(base.narrow(0, 2, 4));
    TensorDict d = OK(TensorDict::create());
    OK(d.set("base", base));
    OK(d.set("view", view));
    std::string path = temp_path(".pt");
    OK(d.save(path.c_str()));
    OK(d.save(path.c_str(), Format::Auto, TSR_SAVE_SYNC)); /* replaces it atomically */
    for (uint32_t flags : {0u, static_cast<uint32_t>(TSR_LOAD_MMAP)}) {
        TensorDict back = OK(TensorDict::load(path.c_str(), Format::Auto, flags));
        Tensor b = back["base"], v = back["view"];
        CHECK_EQ(v.storage_offset(), 2);
        CHECK(b.storage().get() == v.storage().get());
        static_cast<float*>(b.data())[3] = 99.0f;
        CHECK_EQ(static_cast<const float*>(v.data())[1], 99.0f);
    }
    Storage bytes = OK(d.save_to_storage());
    TensorDict from_bytes = OK(TensorDict::load(bytes));
    CHECK_EQ(static_cast<const float*>(from_bytes["view"].data())[0], 2.0f);
    std::remove(path.c_str());
}

TEST(safetensors_round_trip_and_errors) {
    TensorDict d = OK(TensorDict::create());
    OK(d.set("w", iota(5)));
    OK(d.set_metadata("format", "pt"));
    std::string path = temp_path(".safetensors");
    OK(d.save(path.c_str()));
    TensorDict back = OK(TensorDict::load(path.c_str()));
    CHECK_EQ(static_cast<const float*>(back["w"].data())[4], 4.0f);
    CHECK_EQ(std::string(back.metadata("format")), std::string("pt"));
    std::remove(path.c_str());
    CHECK_FAILS(TensorDict::load("/nonexistent/x.pt"), TSR_ERR_IO, "/nonexistent/x.pt");
}

TEST(values_round_trip) {
    TensorDict d = OK(TensorDict::create());
    OK(d.set("w", iota(3)));
    OK(d.set_value_json("global_step", "1234"));
    OK(d.set_value_json("config", "{\"n_layers\": 4, \"act\": \"gelu\"}"));
    CHECK_FAILS(d.set_value_json("w", "1"), TSR_ERR_INVALID_ARGUMENT, "a tensor has this name");
    const TsrFormat formats[] = {TSR_FORMAT_TORCH, TSR_FORMAT_SAFETENSORS, TSR_FORMAT_GGUF};
    for (TsrFormat f : formats) {
        std::string path = temp_path(f == TSR_FORMAT_GGUF ? ".gguf" : ".bin");
        OK(d.save(path.c_str(), static_cast<Format>(f)));
        TensorDict back = OK(TensorDict::load(path.c_str()));
        CHECK_EQ(back.value_count(), size_t(2));
        CHECK_EQ(std::string(back.value_name(0)), std::string("global_step"));
        CHECK(back.value_name(2) == nullptr);
        CHECK_EQ(std::string(back.value_json("global_step")), std::string("1234"));
        CHECK_EQ(std::string(back.value_json("config")),
                 std::string("{\"act\":\"gelu\",\"n_layers\":4}"));
        CHECK(back.value_json("absent") == nullptr);
        std::remove(path.c_str());
    }
}

TEST(sharded_and_dcp_checkpoints) {
    TensorDict d = OK(TensorDict::create());
    OK(d.set("a", iota(64)));
    OK(d.set("b", iota(64)));
    std::string dir = temp_path(".shards");
    OK(d.save_sharded(dir.c_str(), 256)); /* 256 bytes per shard: two shards */
    std::string index = dir + "/model.safetensors.index.json";
    TensorDict back = OK(TensorDict::load(index.c_str()));
    CHECK_EQ(back.size(), size_t(2));
    CHECK_EQ(static_cast<const float*>(back["b"].data())[63], 63.0f);
    std::remove((dir + "/model-00001-of-00002.safetensors").c_str());
    std::remove((dir + "/model-00002-of-00002.safetensors").c_str());
    std::remove(index.c_str());
    std::remove(dir.c_str());
    CHECK_FAILS(d.save_sharded(dir.c_str(), 0), TSR_ERR_INVALID_ARGUMENT, "max_shard_bytes");

    std::string dcp = temp_path(".dcp");
    OK(d.save(dcp.c_str(), Format::Dcp));
    TensorDict from_dcp = OK(TensorDict::load(dcp.c_str(), Format::Auto, TSR_LOAD_MMAP));
    CHECK_EQ(static_cast<const float*>(from_dcp["a"].data())[5], 5.0f);
    std::remove((dcp + "/.metadata").c_str());
    std::remove((dcp + "/__0_0.distcp").c_str());
    std::remove(dcp.c_str());
}
