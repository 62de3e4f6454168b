// tessera::Checkpoint: opened once, its names and sizes without loading,
// one tensor, rows, a set with progress and a cancel, into a buffer.
#include "tessera.hpp"

#include "check.hpp"

#include <cstdio>
#include <string>
#include <unistd.h>
#include <vector>

using tessera::Checkpoint;
using tessera::Format;
using tessera::Tensor;
using tessera::TensorDict;

namespace {

Tensor iota2(int64_t rows, int64_t cols) {
    Tensor t = OK(Tensor::empty({rows, cols}, TSR_FLOAT));
    auto* p = static_cast<float*>(t.data());
    for (int64_t i = 0; i < rows * cols; i++) {
        p[i] = static_cast<float>(i);
    }
    return t;
}

int count_then_cancel(void* user, uint64_t, uint64_t, const char*) {
    int* calls = static_cast<int*>(user);
    return ++*calls >= 2;
}

}  // namespace

TEST(checkpoint_loads_in_parts) {
    TensorDict d = OK(TensorDict::create());
    OK(d.set("emb", iota2(100, 8)));
    OK(d.set("head", iota2(4, 8)));
    std::string path = "/tmp/tsr-cpp-checkpoint-" + std::to_string(getpid()) + ".safetensors";
    OK(d.save(path.c_str()));

    Checkpoint c = OK(Checkpoint::open(path.c_str()));
    CHECK_EQ(c.size(), size_t(2));
    size_t emb = std::string(c.name(0)) == "emb" ? 0 : 1;
    CHECK_EQ(c.sizes(emb)[0], 100);
    CHECK_EQ(c.nbytes(emb), uint64_t(3200));
    CHECK_EQ(c.dtype(emb), TSR_FLOAT);
    uint64_t index_bytes = c.bytes_read();

    Tensor rows = OK(c.load_rows("emb", 10, 12));
    CHECK_EQ(rows.numel(), 16);
    CHECK_EQ(static_cast<const float*>(rows.data())[0], 80.0f);
    CHECK_EQ(c.bytes_read(), index_bytes + 64);

    std::vector<float> buf(32);
    OK(c.read_into("head", buf.data(), buf.size() * sizeof(float)));
    CHECK_EQ(buf[31], 31.0f);
    CHECK_FAILS(c.read_into("head", buf.data(), 4), TSR_ERR_INVALID_ARGUMENT, "4 bytes");

    TensorDict all = OK(c.load_many());
    CHECK_EQ(all.size(), size_t(2));
    CHECK_EQ(static_cast<const float*>(all["emb"].data())[799], 799.0f);

    int calls = 0;
    TsrLoadOptions opts = {sizeof(TsrLoadOptions), 1, 256, count_then_cancel, &calls};
    CHECK_FAILS(c.load_many(nullptr, 0, tessera::Device::cpu(), &opts), TSR_ERR_CANCELLED,
                "cancelled");
    CHECK_EQ(calls, 2);

    Tensor head = OK(c.load("head"));
    Checkpoint moved = std::move(c);
    CHECK(!c);
    moved = Checkpoint();  // closed: loaded tensors stay valid
    CHECK_EQ(static_cast<const float*>(head.data())[5], 5.0f);
    CHECK_FAILS(Checkpoint::open("/nonexistent/x.pt"), TSR_ERR_IO, "/nonexistent/x.pt");

    // Settings for a URL's open: a local path ignores them; a name
    // tessera does not take is refused naming it.
    TsrSetting settings[] = {{"TSR_REMOTE_CONCURRENCY", "16"}, {"AWS_REGION", "us-east-1"}};
    Checkpoint local = OK(Checkpoint::open_with(path.c_str(), settings, 2));
    CHECK_EQ(local.size(), size_t(2));
    TsrSetting unknown[] = {{"TSR_REMOTE_THREADS", "4"}};
    CHECK_FAILS(Checkpoint::open_with(path.c_str(), unknown, 1), TSR_ERR_INVALID_ARGUMENT,
                "TSR_REMOTE_THREADS");
    std::remove(path.c_str());
}
