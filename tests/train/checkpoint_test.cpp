#include "artel/train/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include "artel/core/rng.h"
#include "train/expect_error.h"
#include "temp_dir.h"

namespace artel::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CheckpointTest : public ::testing::Test {
 protected:

  std::string file(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  test_support::TempDir temp_;
  const std::string dir_ = temp_.str();
};

Compatibility gpt_compat(int64_t n_embd = 64) {
  Compatibility c;
  c.model_kind = "gpt";
  c.model_config = {{"n_layer", 4}, {"n_embd", n_embd}, {"vocab_size", 65}};
  return c;
}

// A checkpoint with every dtype, odd float bit patterns, an empty and a 0-d tensor.
Checkpoint sample(int64_t step) {
  Checkpoint ck;
  ck.step = step;
  ck.sampler_position = step + 1;
  ck.meta = gpt_compat().to_meta();
  ck.meta["note"] = {{"nested", {1, 2, 3}}, {"text", "héllo \"quoted\""}};
  Tensor w = Tensor::empty({3, 5});
  float* p = w.data<float>();
  for (int i = 0; i < 15; ++i) p[i] = 0.1f * static_cast<float>(i) - 0.7f + static_cast<float>(step);
  p[0] = -0.0f;
  p[1] = std::numeric_limits<float>::denorm_min();
  p[2] = std::numeric_limits<float>::quiet_NaN();
  p[3] = -std::numeric_limits<float>::infinity();
  ck.add("model/transformer.h.0.attn.c_attn.weight", w);
  Tensor m = Tensor::empty({7}, DType::f64);
  for (int i = 0; i < 7; ++i) m.data<double>()[i] = std::sqrt(2.0) * i;
  ck.add("optim/m/w", m);
  Tensor count = Tensor::empty({}, DType::i64);
  count.data<int64_t>()[0] = std::numeric_limits<int64_t>::min() + step;
  ck.add("optim/step", count);
  Tensor ids = Tensor::empty({2, 2}, DType::i32);
  for (int i = 0; i < 4; ++i) ids.data<int32_t>()[i] = -i * 1000003;
  ck.add("optim/ids", ids);
  Tensor half = Tensor::empty({3}, DType::bf16);
  for (int i = 0; i < 3; ++i) half.data<bf16>()[i] = bf16(1.5f * i);
  ck.add("optim/bf16", half);
  ck.add("optim/empty", Tensor::empty({0, 4}));
  ck.add("optim/last", Tensor::full({33}, 2.5f));  // odd size: the next offset needs padding
  ck.rng = {RngState{1337, 0, 12, 3}, RngState{std::numeric_limits<uint64_t>::max(), 7, 1ull << 40, 4}};
  return ck;
}

void expect_same(const Checkpoint& a, const Checkpoint& b) {
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.sampler_position, b.sampler_position);
  EXPECT_EQ(a.meta, b.meta);
  ASSERT_EQ(a.rng.size(), b.rng.size());
  for (size_t i = 0; i < a.rng.size(); ++i) {
    EXPECT_EQ(a.rng[i].seed, b.rng[i].seed);
    EXPECT_EQ(a.rng[i].stream, b.rng[i].stream);
    EXPECT_EQ(a.rng[i].counter, b.rng[i].counter);
    EXPECT_EQ(a.rng[i].used, b.rng[i].used);
  }
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const auto& [na, ta] = a.tensors[i];
    const auto& [nb, tb] = b.tensors[i];
    EXPECT_EQ(na, nb);
    EXPECT_EQ(ta.dtype(), tb.dtype()) << na;
    EXPECT_EQ(ta.shape(), tb.shape()) << na;
    ASSERT_EQ(ta.nbytes(), tb.nbytes()) << na;
    EXPECT_EQ(std::memcmp(ta.raw(), tb.raw(), ta.nbytes()), 0) << na << " differs";
  }
}

using artel_test::expect_error;

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}
void spit(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}
void flip_byte(const std::string& path, uint64_t offset) {
  std::string bytes = slurp(path);
  ASSERT_LT(offset, bytes.size());
  bytes[offset] = static_cast<char>(bytes[offset] ^ 0x5a);
  spit(path, bytes);
}

TEST_F(CheckpointTest, RoundTripIsBitIdentical) {
  Checkpoint ck = sample(42);
  std::string path = file("a.artel");
  write_checkpoint(path, ck);
  Checkpoint back = read_checkpoint(path);
  expect_same(ck, back);
  EXPECT_EQ(back.path, path);
}

TEST_F(CheckpointTest, RestoredRngContinuesTheSameStream) {
  Rng rng(99, 3);
  for (int i = 0; i < 5; ++i) rng.next_u32();  // mid-block: `used` matters
  Checkpoint ck;
  ck.meta = gpt_compat().to_meta();
  ck.rng = {rng.state()};
  write_checkpoint(file("r.artel"), ck);
  Rng resumed;
  resumed.set_state(read_checkpoint(file("r.artel")).rng.at(0));
  for (int i = 0; i < 10; ++i) EXPECT_EQ(resumed.next_u32(), rng.next_u32());
}

TEST_F(CheckpointTest, FileIsSelfDescribingWithAlignedData) {
  std::string path = file("a.artel");
  Checkpoint ck = sample(7);
  write_checkpoint(path, ck);
  std::string bytes = slurp(path);
  EXPECT_EQ(bytes.substr(0, 8), "ARTELCKP");
  EXPECT_EQ(bytes.substr(bytes.size() - 8), "ARTELEND");
  CheckpointHeader h = read_checkpoint_header(path);
  EXPECT_EQ(h.version, kCheckpointFormatVersion);
  EXPECT_EQ(h.step, 7);
  EXPECT_EQ(h.sampler_position, 8);
  ASSERT_EQ(h.tensors.size(), ck.tensors.size());
  for (size_t i = 0; i < h.tensors.size(); ++i) {
    EXPECT_EQ(h.tensors[i].name, ck.tensors[i].first);
    EXPECT_EQ(h.tensors[i].offset % 64, 0u) << h.tensors[i].name;
    EXPECT_EQ(h.tensors[i].nbytes, ck.tensors[i].second.nbytes());
    EXPECT_EQ(std::memcmp(bytes.data() + h.tensors[i].offset, ck.tensors[i].second.raw(), h.tensors[i].nbytes), 0);
  }
}

TEST_F(CheckpointTest, WriteLeavesOnlyTheFinalFile) {
  write_checkpoint(file("a.artel"), sample(1));
  write_checkpoint(file("a.artel"), sample(2));  // replaces it whole
  EXPECT_EQ(names(), std::vector<std::string>{"a.artel"});
  EXPECT_EQ(read_checkpoint(file("a.artel")).step, 2);
}

TEST_F(CheckpointTest, FailedWriteKeepsThePreviousFile) {
  std::string path = file("a.artel");
  write_checkpoint(path, sample(1));
  // The temporary name is taken by a directory: the write fails before any rename.
  fs::create_directory(path + ".tmp-" + std::to_string(::getpid()));
  expect_error([&] { write_checkpoint(path, sample(2)); }, {"cannot create", path + ".tmp-"});
  EXPECT_EQ(read_checkpoint(path).step, 1);
}

TEST_F(CheckpointTest, InvalidContentsAreRefusedBeforeWriting) {
  Checkpoint dup = sample(1);
  dup.add("optim/step", Tensor::zeros({1}));
  expect_error([&] { write_checkpoint(file("d.artel"), dup); }, {"optim/step", "twice"});
  Checkpoint undef = sample(1);
  undef.add("model/x", Tensor());
  expect_error([&] { write_checkpoint(file("u.artel"), undef); }, {"model/x", "undefined"});
  EXPECT_TRUE(names().empty());
}

TEST_F(CheckpointTest, ReadNamesTheFileAndTheProblem) {
  std::string path = file("a.artel");
  write_checkpoint(path, sample(3));
  std::string good = slurp(path);

  spit(path, "PK\x03\x04 this is a zip file, not a checkpoint at all....");
  expect_error([&] { read_checkpoint(path); }, {path, "bad magic"});

  std::string v2 = good;
  v2[8] = 2;
  spit(path, v2);
  expect_error([&] { read_checkpoint(path); }, {path, "unsupported format version 2"});

  for (size_t keep : {size_t{0}, size_t{10}, size_t{30}, good.size() / 2, good.size() - 1}) {
    spit(path, good.substr(0, keep));
    expect_error([&] { read_checkpoint(path); }, {path, "truncated"});
  }

  spit(path, good + "extra");
  expect_error([&] { read_checkpoint(path); }, {path, "truncated"});  // the trailer is no longer last

  spit(path, good);
  flip_byte(path, 40);  // inside the JSON header
  expect_error([&] { read_checkpoint(path); }, {path, "header CRC mismatch"});

  spit(path, good);
  CheckpointTensorInfo m = read_checkpoint_header(path).tensors.at(1);
  flip_byte(path, m.offset + m.nbytes / 2);
  expect_error([&] { read_checkpoint(path); }, {path, "tensor 'optim/m/w' CRC mismatch"});
}

TEST_F(CheckpointTest, RestoreChecksNameShapeAndDtype) {
  write_checkpoint(file("a.artel"), sample(3));
  Checkpoint ck = read_checkpoint(file("a.artel"));
  Tensor dst = Tensor::zeros({7}, DType::f64);
  ck.restore("optim/m/w", dst);
  EXPECT_EQ(std::memcmp(dst.raw(), ck.get("optim/m/w").raw(), dst.nbytes()), 0);
  EXPECT_TRUE(ck.has("optim/step"));
  EXPECT_FALSE(ck.has("model/lm_head.weight"));
  expect_error([&] { ck.get("model/lm_head.weight"); }, {file("a.artel"), "missing tensor 'model/lm_head.weight'"});
  Tensor wrong = Tensor::zeros({8});
  expect_error([&] { ck.restore("optim/m/w", wrong); }, {"optim/m/w", "float64 [7]", "float32 [8]"});
}

TEST_F(CheckpointTest, FileReadsOneTensorAtATime) {
  const std::string path = file("a.artel");
  write_checkpoint(path, sample(3));
  CheckpointFile f(path);
  EXPECT_EQ(f.header().step, 3);
  EXPECT_EQ(f.header().file_bytes, fs::file_size(path));
  ASSERT_NE(f.find("optim/m/w"), nullptr);
  EXPECT_EQ(f.find("optim/none"), nullptr);
  const Tensor m = f.read("optim/m/w");
  EXPECT_EQ(std::memcmp(m.raw(), sample(3).get("optim/m/w").raw(), m.nbytes()), 0);
  expect_error([&] { f.read("optim/none"); }, {path, "no tensor 'optim/none'"});
  flip_byte(path, f.find("optim/m/w")->offset + 3);
  expect_error([&] { CheckpointFile(path).read("optim/m/w"); }, {path, "tensor 'optim/m/w' CRC mismatch"});
  EXPECT_NO_THROW(CheckpointFile(path).read("optim/last"));  // only the tensor read is checked
}

TEST_F(CheckpointTest, AnotherModelIsRefusedNamingEachField) {
  const std::string path = file("manifest.json");
  Compatibility deeper = gpt_compat();
  deeper.model_config["n_layer"] = 6;
  expect_error([&] { check_compatible(gpt_compat().to_meta(), deeper, path); },
               {path, "n_layer 4 in the checkpoint, 6 in this run", "hint"});
  Compatibility mlp = gpt_compat();
  mlp.model_kind = "mlp";
  expect_error([&] { check_compatible(gpt_compat().to_meta(), mlp, path); },
               {"model 'gpt' in the checkpoint, 'mlp' in this run"});
  Compatibility extra = gpt_compat();
  extra.model_config["dropout"] = 0.1;
  expect_error([&] { check_compatible(gpt_compat().to_meta(), extra, path); },
               {"dropout none in the checkpoint, 0.1 in this run"});
  expect_error([&] { check_compatible({{"something", "else"}}, gpt_compat(), path); }, {path, "no model_kind"});
  // A model of the user's own is told apart by its parameters, and runs by their optimizers.
  Compatibility mine = gpt_compat();
  mine.parameters = {{"fc.weight", {16, 4}}, {"fc.bias", {16}}, {"head.weight", {3, 16}}};
  mine.optimizer = {{"name", "sgd"}, {"state", {"momentum_buffer"}}};
  Compatibility wider = mine;
  wider.parameters["fc.weight"] = {32, 4};
  wider.parameters.erase("fc.bias");
  wider.parameters["gate"] = {4};
  expect_error([&] { check_compatible(mine.to_meta(), wider, path); },
               {"parameter 'fc.weight' is [16,4] in the checkpoint, [32,4] in this run",
                "parameter 'gate' [4] is not in the checkpoint",
                "the checkpoint's parameter 'fc.bias' [16] is not in this run's model"});
  Compatibility adamw = mine, plain = mine;
  adamw.optimizer = {{"name", "adamw"}, {"state", {"exp_avg", "exp_avg_sq"}}};
  expect_error([&] { check_compatible(mine.to_meta(), adamw, path); },
               {"optimizer 'sgd' (state: momentum_buffer) in the checkpoint, 'adamw' (state: exp_avg exp_avg_sq)"});
  plain.optimizer = {{"name", "sgd"}, {"state", json::array()}};
  EXPECT_NO_THROW(check_compatible(mine.to_meta(), plain, path));  // the momentum buffers are left unread
  expect_error([&] { check_compatible(plain.to_meta(), mine, path); },
               {"optimizer 'sgd' (state: none) in the checkpoint, 'sgd' (state: momentum_buffer) in this run"});
  EXPECT_NO_THROW(check_compatible(gpt_compat().to_meta(), wider, path));  // written before they were recorded
  EXPECT_THROW(check_compatible(gpt_compat().to_meta(), gpt_compat(32), path), Error);
}

}  // namespace
}  // namespace artel::train
