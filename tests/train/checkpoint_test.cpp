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

namespace artel::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "artel-ckpt-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string file(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  std::vector<std::string> names() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_)) out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  std::string dir_;
};

Compatibility gpt_compat(int64_t world_size = 2) {
  Compatibility c;
  c.model_kind = "gpt";
  c.model_config = {{"n_layer", 4}, {"n_embd", 64}, {"vocab_size", 65}};
  c.world_size = world_size;
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

void expect_error(const std::function<void()>& fn, const std::vector<std::string>& parts) {
  try {
    fn();
    ADD_FAILURE() << "no error thrown";
  } catch (const Error& e) {
    std::string msg = e.what();
    for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << "not one line: " << msg;
  }
}

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

// A pid that belonged to a process that has exited.
pid_t dead_pid() {
  pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  int status = 0;
  ::waitpid(pid, &status, 0);
  return pid;
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
  expect_error([&] { write_checkpoint(path, sample(2)); }, {"cannot create checkpoint", path + ".tmp-"});
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

TEST_F(CheckpointTest, StoreKeepsTheLastK) {
  CheckpointStore store(dir_ + "/ckpts", 2);
  EXPECT_TRUE(store.list().empty());
  for (int64_t step : {100, 200, 300, 400}) EXPECT_EQ(store.save(sample(step)), store.path_for(step));
  EXPECT_EQ(store.list(), (std::vector<std::string>{store.path_for(300), store.path_for(400)}));
  EXPECT_EQ(fs::path(store.path_for(300)).filename(), "ckpt-00000300.artel");

  CheckpointStore all(dir_ + "/all", 0);
  for (int64_t step : {1, 2, 3}) all.save(sample(step));
  EXPECT_EQ(all.list().size(), 3u);
  expect_error([&] { CheckpointStore(dir_, -1); }, {"-1"});
}

TEST_F(CheckpointTest, StoreOrdersByStepBeyondEightDigits) {
  CheckpointStore store(dir_, 2);
  store.save(sample(99999999));
  store.save(sample(123456789));
  auto ck = store.load_latest(gpt_compat(), nullptr);
  ASSERT_TRUE(ck);
  EXPECT_EQ(ck->step, 123456789);
}

TEST_F(CheckpointTest, LoadLatestPicksTheNewest) {
  CheckpointStore store(dir_, 3);
  for (int64_t step : {10, 30, 20}) store.save(sample(step));
  std::vector<std::string> warnings;
  auto ck = store.load_latest(gpt_compat(), [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(ck);
  expect_same(*ck, sample(30));
  EXPECT_TRUE(warnings.empty());
}

TEST_F(CheckpointTest, TruncatedNewestIsReportedAndThePreviousUsed) {
  CheckpointStore store(dir_, 3);
  for (int64_t step : {10, 20}) store.save(sample(step));
  std::string newest = store.path_for(20);
  fs::resize_file(newest, fs::file_size(newest) - 100);
  std::vector<std::string> warnings;
  auto ck = store.load_latest(gpt_compat(), [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(ck);
  EXPECT_EQ(ck->step, 10);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find(newest), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find("truncated"), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[0].find(store.path_for(10)), std::string::npos) << warnings[0];
  EXPECT_EQ(warnings[0].find('\n'), std::string::npos);
}

TEST_F(CheckpointTest, CorruptTensorIsReportedAndThePreviousUsed) {
  CheckpointStore store(dir_, 3);
  for (int64_t step : {10, 20, 30}) store.save(sample(step));
  CheckpointTensorInfo w = read_checkpoint_header(store.path_for(30)).tensors.at(0);
  flip_byte(store.path_for(30), w.offset + 5);
  std::vector<std::string> warnings;
  auto ck = store.load_latest(gpt_compat(), [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(ck);
  expect_same(*ck, sample(20));
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_NE(warnings[0].find("tensor 'model/transformer.h.0.attn.c_attn.weight' CRC mismatch"), std::string::npos)
      << warnings[0];
}

TEST_F(CheckpointTest, NothingReadableGivesNothing) {
  CheckpointStore missing(dir_ + "/never-created", 2);
  EXPECT_FALSE(missing.load_latest(gpt_compat(), nullptr));
  CheckpointStore store(dir_, 2);
  EXPECT_FALSE(store.load_latest(gpt_compat(), nullptr));
  spit(store.path_for(5), "garbage");
  int warned = 0;
  EXPECT_FALSE(store.load_latest(gpt_compat(), [&](const std::string&) { ++warned; }));
  EXPECT_EQ(warned, 1);
}

TEST_F(CheckpointTest, IncompatibleCheckpointIsRefused) {
  CheckpointStore store(dir_, 3);
  store.save(sample(10));
  int warned = 0;
  auto warn = [&](const std::string&) { ++warned; };

  Compatibility deeper = gpt_compat();
  deeper.model_config["n_layer"] = 6;
  expect_error([&] { store.load_latest(deeper, warn); },
               {store.path_for(10), "different run", "n_layer 4 in the checkpoint, 6 in this run", "hint"});

  Compatibility mlp = gpt_compat();
  mlp.model_kind = "mlp";
  expect_error([&] { store.load_latest(mlp, warn); }, {"model 'gpt' in the checkpoint, 'mlp' in this run"});

  expect_error([&] { store.load_latest(gpt_compat(4), warn); }, {"world size 2 in the checkpoint, 4 in this run"});

  Compatibility extra = gpt_compat();
  extra.model_config["dropout"] = 0.1;
  expect_error([&] { store.load_latest(extra, warn); }, {"dropout none in the checkpoint, 0.1 in this run"});
  EXPECT_EQ(warned, 0);
  EXPECT_TRUE(store.load_latest(gpt_compat(), warn));
}

TEST_F(CheckpointTest, MetadataWithoutModelIsRefused) {
  Checkpoint ck = sample(1);
  ck.meta = {{"something", "else"}};
  CheckpointStore store(dir_, 1);
  store.save(ck);
  expect_error([&] { store.load_latest(gpt_compat(), nullptr); }, {store.path_for(1), "no model_kind"});
}

TEST_F(CheckpointTest, LeftoverTemporaryFilesAreIgnoredThenCleanedUp) {
  CheckpointStore store(dir_, 3);
  store.save(sample(10));
  // A crash mid-write of step 20 left a partial temporary file behind.
  std::string crashed = store.path_for(20) + ".tmp-" + std::to_string(dead_pid());
  spit(crashed, slurp(store.path_for(10)).substr(0, 100));
  // A writer still running (this process) must keep its temporary file.
  std::string live = store.path_for(30) + ".tmp-" + std::to_string(::getpid());
  spit(live, "in progress");

  EXPECT_EQ(store.list(), std::vector<std::string>{store.path_for(10)});
  int warned = 0;
  auto ck = store.load_latest(gpt_compat(), [&](const std::string&) { ++warned; });
  ASSERT_TRUE(ck);
  EXPECT_EQ(ck->step, 10);
  EXPECT_EQ(warned, 0);

  store.save(sample(20));
  EXPECT_FALSE(fs::exists(crashed));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_EQ(read_checkpoint(store.path_for(20)).step, 20);
}

}  // namespace
}  // namespace artel::train
