// Sharded checkpoints without a training run: parts written by "workers" of
// one layout, read back under others (tensor-parallel rows or columns,
// ZeRO ranges, whole), a manifest that must tile every tensor, and torn
// checkpoints — no manifest, a shard missing, cut short, rewritten or with
// corrupt data — never read as complete.
#include "artel/train/checkpoint_store.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "artel/optim/sgd.h"
#include "artel/train/checkpoint_reader.h"
#include "artel/train/held_part.h"
#include "train/expect_error.h"
#include "temp_dir.h"

namespace artel::train {
namespace {

namespace fs = std::filesystem;

class CheckpointStoreTest : public ::testing::Test {
 protected:

  // Step `step` written by two tensor-parallel "workers", each holding half
  // of W's rows, the second also W's step count; worker 0 the dropout state.
  void write_rows_split(const CheckpointStore& store, int64_t step) const {
    store.begin(step);
    for (int rank = 0; rank < 2; ++rank) {
      std::vector<HeldPart> parts = {row_part(rank, {0, 12})};
      if (rank == 1) parts.push_back(step_count(step));
      std::optional<StageDropout> dropout;
      if (rank == 0) dropout = StageDropout{0, RngState{7, 1, static_cast<uint64_t>(step), 2}};
      store.write_shard(step, rank, parts, dropout);
    }
    Manifest run;
    run.step = step;
    run.consumed_samples = 8 * step;
    run.global_batch = 8;
    run.model = {{"model_kind", "test"}};
    run.layout = {{"world", 2}, {"dp", 1}, {"pp", 1}, {"tp", 2}};
    store.commit(run, 2);
  }

  static Tensor whole() {  // W, (4, 6): element i holds i
    Tensor w = Tensor::empty({4, 6});
    for (int i = 0; i < 24; ++i) w.data<float>()[i] = static_cast<float>(i);
    return w;
  }
  static HeldPart region(nn::Split split, int part, int parts, optim::ElementRange range, Tensor data) {
    return HeldPart{"model/w", DType::f32, {4, 6}, split, part, parts, range, std::move(data)};
  }
  // Rows [2·rank, 2·rank + 2) of W, elements `range` of them.
  static HeldPart row_part(int rank, optim::ElementRange range) {
    const Tensor rows = nn::take_part(whole(), nn::Split{.dim = 0}, rank, 2);
    return region(nn::Split{.dim = 0}, rank, 2, range, rows.view({12}).slice0(range.begin, range.end).clone());
  }
  static HeldPart step_count(int64_t steps) {
    Tensor t = Tensor::empty({}, DType::i64);
    t.data<int64_t>()[0] = steps;
    return HeldPart{"optim/step.w", DType::i64, {}, nn::Split{}, 0, 1, {0, 1}, t};
  }
  // What a worker of another layout wants: `range` of part `part` of `parts` by `split`.
  static std::vector<float> read(const ShardedCheckpoint& ck, nn::Split split, int part, int parts,
                                 optim::ElementRange range) {
    HeldPart want = region(split, part, parts, range, Tensor::zeros({range.size()}));
    EXPECT_TRUE(ck.read(want));
    return want.data.to_vector();
  }
  static std::vector<float> expected(nn::Split split, int part, int parts, optim::ElementRange range) {
    const std::vector<float> all = nn::take_part(whole(), split, part, parts).to_vector();
    return {all.begin() + range.begin, all.begin() + range.end};
  }

  test_support::TempDir temp_;
  const std::string dir_ = temp_.str();
};

using artel_test::expect_error;

TEST_F(CheckpointStoreTest, ManifestListsEveryPartAndTheRun) {
  CheckpointStore store(dir_, 3);
  write_rows_split(store, 20);
  EXPECT_EQ(fs::path(store.path_for(20)).filename(), "ckpt-00000020");
  for (const char* f : {"rank-00000.artel", "rank-00001.artel", "manifest.json"})
    EXPECT_TRUE(fs::exists(fs::path(store.path_for(20)) / f)) << f;
  const ShardedCheckpoint ck(store.path_for(20));
  const Manifest& m = ck.manifest();
  EXPECT_EQ(m.step, 20);
  EXPECT_EQ(m.consumed_samples, 160);
  EXPECT_EQ(m.global_batch, 8);
  EXPECT_EQ(m.layout["tp"], 2);
  ASSERT_EQ(m.dropout.size(), 1u);
  EXPECT_EQ(m.dropout[0].counter, 20u);
  ASSERT_EQ(m.shards.size(), 2u);
  const ManifestTensor* w = m.find("model/w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->shape, (Shape{4, 6}));
  ASSERT_EQ(w->parts.size(), 2u);
  EXPECT_EQ(w->parts[1].file, "rank-00001.artel");
  EXPECT_EQ(w->parts[1].part, 1);
  EXPECT_EQ(w->parts[1].split.dim, 0);
  EXPECT_EQ(ck.read_whole("model/w").to_vector(), whole().to_vector());
  EXPECT_EQ(ck.read_whole("optim/step.w").data<int64_t>()[0], 20);
}

TEST_F(CheckpointStoreTest, AnyLayoutReadsItsOwnRegion) {
  CheckpointStore store(dir_, 3);
  write_rows_split(store, 1);
  const ShardedCheckpoint ck(store.path_for(1));
  const nn::Split rows{.dim = 0}, cols{.dim = 1};
  // The same tensor-parallel part: copied from one part (or a ZeRO range of it).
  EXPECT_EQ(read(ck, rows, 1, 2, {0, 12}), expected(rows, 1, 2, {0, 12}));
  EXPECT_EQ(read(ck, rows, 0, 2, {5, 9}), expected(rows, 0, 2, {5, 9}));
  // Whole, a ZeRO range of the whole, other splits: put together first.
  EXPECT_EQ(read(ck, nn::Split{}, 0, 1, {0, 24}), expected(nn::Split{}, 0, 1, {0, 24}));
  EXPECT_EQ(read(ck, nn::Split{}, 0, 1, {7, 19}), expected(nn::Split{}, 0, 1, {7, 19}));
  EXPECT_EQ(read(ck, cols, 1, 2, {0, 12}), expected(cols, 1, 2, {0, 12}));
  EXPECT_EQ(read(ck, rows, 3, 4, {1, 6}), expected(rows, 3, 4, {1, 6}));
  HeldPart absent = region(rows, 0, 2, {0, 12}, Tensor::zeros({12}));
  absent.key = "model/none";
  EXPECT_FALSE(ck.read(absent));
  HeldPart wider{"model/w", DType::f32, {4, 8}, nn::Split{}, 0, 1, {0, 32}, Tensor::zeros({32})};
  expect_error([&] { ck.read(wider); }, {"'model/w' is float32 [4, 6], this run expects float32 [4, 8]"});
}

TEST_F(CheckpointStoreTest, PartsMustCoverEveryElementExactlyOnce) {
  CheckpointStore store(dir_, 3);
  store.write_shard(5, 0, {row_part(0, {0, 12})}, std::nullopt);
  store.write_shard(5, 1, {row_part(1, {0, 12})}, std::nullopt);
  store.write_shard(5, 2, {row_part(1, {6, 12})}, std::nullopt);  // elements written twice
  expect_error([&] { store.commit(Manifest{.step = 5, .global_batch = 1}, 3); }, {"'model/w'", "overlap"});
  store.write_shard(5, 1, {row_part(1, {0, 5})}, std::nullopt);  // a gap
  expect_error([&] { store.commit(Manifest{.step = 5, .global_batch = 1}, 2); }, {"'model/w'", "covers 5 of 12"});
  EXPECT_FALSE(fs::exists(fs::path(store.path_for(5)) / kManifestName));
}

TEST_F(CheckpointStoreTest, TornCheckpointsNeverReadAsComplete) {
  CheckpointStore store(dir_, 0);
  for (int64_t step : {1, 2, 3, 4, 5}) write_rows_split(store, step);
  const fs::path two = store.path_for(2), three = store.path_for(3), four = store.path_for(4), five = store.path_for(5);
  fs::remove(five / kManifestName);                                            // never committed
  fs::remove(four / "rank-00001.artel");                                       // a shard lost
  fs::resize_file(three / "rank-00000.artel", fs::file_size(three / "rank-00000.artel") - 10);  // cut short
  fs::copy_file(two / "rank-00000.artel", two / "copy", fs::copy_options::overwrite_existing);
  fs::copy_file(store.path_for(1) + "/rank-00000.artel", two / "rank-00000.artel",
                fs::copy_options::overwrite_existing);  // another step's shard: whole, but not the one named
  expect_error([&] { ShardedCheckpoint c(five.string()); }, {(five / kManifestName).string(), "no manifest"});
  expect_error([&] { ShardedCheckpoint c(four.string()); }, {(four / "rank-00001.artel").string(), "missing"});
  expect_error([&] { ShardedCheckpoint c(three.string()); }, {(three / "rank-00000.artel").string(), "truncated"});
  expect_error([&] { ShardedCheckpoint c(two.string()); }, {(two / "rank-00000.artel").string(), "not the shard"});

  std::vector<std::string> warnings;
  auto newest = open_newest_checkpoint(dir_, [&](const std::string& w) { warnings.push_back(w); });
  ASSERT_TRUE(newest);
  EXPECT_EQ(newest->manifest().step, 1);
  ASSERT_EQ(warnings.size(), 4u);
  EXPECT_EQ(warnings[0].rfind("skipping checkpoint " + (five / kManifestName).string() + ": no manifest", 0), 0u)
      << warnings[0];
  EXPECT_NE(warnings[0].find("; trying " + four.string()), std::string::npos) << warnings[0];
  EXPECT_NE(warnings[2].find("truncated"), std::string::npos) << warnings[2];

  // Data corrupt inside a shard whose header is intact: found when that tensor is read.
  const std::string shard = store.path_for(1) + "/rank-00001.artel";
  const CheckpointTensorInfo info = *CheckpointFile(shard).find("model/w");
  std::string bytes;
  {
    std::ifstream in(shard, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[info.offset + 4] ^= 0x21;
  std::ofstream(shard, std::ios::binary | std::ios::trunc) << bytes;
  const ShardedCheckpoint ck(store.path_for(1));
  expect_error([&] { ck.read_whole("model/w"); }, {shard, "CRC mismatch"});
  expect_error([&] { open_newest_checkpoint(dir_ + "/nowhere", nullptr); }, {dir_ + "/nowhere", "no such directory"});
  // A file where the checkpoints go: refused when the store is made, before a run trains (was: at its first checkpoint).
  std::ofstream(dir_ + "/a_file") << "x";
  expect_error([&] { CheckpointStore(dir_ + "/a_file", 0); }, {"checkpoint directory " + dir_ + "/a_file is a file"});
}

TEST_F(CheckpointStoreTest, KeepsTheLastKWholeAndCleansWhatDeadWritersLeft) {
  CheckpointStore store(dir_, 2);
  // A writer that died mid-write of step 3 left a temporary file; a live one (this process) keeps its own.
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  fs::create_directories(store.path_for(3));
  const std::string crashed = store.path_for(3) + "/rank-00000.artel.tmp-" + std::to_string(dead);
  const std::string live = store.path_for(3) + "/rank-00001.artel.tmp-" + std::to_string(::getpid());
  std::ofstream(crashed) << "partial";
  std::ofstream(live) << "in progress";
  for (int64_t step : {1, 2}) write_rows_split(store, step);
  EXPECT_EQ(store.list(), (std::vector<std::string>{store.path_for(2), store.path_for(3)}));  // step 1's directory gone
  EXPECT_FALSE(fs::exists(crashed));
  EXPECT_TRUE(fs::exists(live));
  for (int64_t step : {4, 123456789}) write_rows_split(store, step);
  EXPECT_EQ(store.list(), (std::vector<std::string>{store.path_for(4), store.path_for(123456789)}));
  EXPECT_EQ(checkpoints_newest_first(dir_).front(), store.path_for(123456789));
  expect_error([&] { CheckpointStore(dir_, -1); }, {"-1"});
}

TEST_F(CheckpointStoreTest, BeginRemovesTheManifestOfAnEarlierAttempt) {
  CheckpointStore store(dir_, 3);
  store.write_shard(6, 2, {}, std::nullopt);  // an earlier attempt of 3 workers
  write_rows_split(store, 6);
  EXPECT_FALSE(fs::exists(fs::path(store.path_for(6)) / "rank-00002.artel"));
  store.begin(6);
  EXPECT_FALSE(fs::exists(fs::path(store.path_for(6)) / kManifestName));
  EXPECT_THROW(ShardedCheckpoint c(store.path_for(6)), Error);
}

// A range outside the wanted part read past the buffers (AddressSanitizer's
// heap-buffer-overflow) or returned bytes beyond it as a success.
TEST_F(CheckpointStoreTest, ARangeOutsideItsPartIsRefused) {
  CheckpointStore store(dir_, 3);
  write_rows_split(store, 1);
  const ShardedCheckpoint ck(store.path_for(1));
  for (const optim::ElementRange r : {optim::ElementRange{8, 14}, {-2, 2}, {0, 5000}}) {
    HeldPart want = region(nn::Split{.dim = 0}, 0, 2, r, Tensor::zeros({r.size()}));
    expect_error([&] { ck.read(want); }, {"checkpoint read of model/w: elements [", "are not within its part of 12"});
  }
}

// What a run found at a checkpoint's names: a symlink loop threw a
// filesystem_error from list(); a file where the directory goes, a directory
// where the manifest goes and a link to another checkpoint failed the write
// (or wrote into that other one) only after the step was trained; a newer
// torn directory outlived complete ones when the oldest were pruned.
TEST_F(CheckpointStoreTest, DebrisAtACheckpointsNamesIsClearedOrSkipped) {
  CheckpointStore store(dir_, 2);
  fs::create_symlink(store.path_for(99), store.path_for(99));  // a link to itself
  EXPECT_TRUE(store.list().empty());
  std::ofstream(store.path_for(1)) << "not a checkpoint";
  write_rows_split(store, 1);
  fs::create_directories(fs::path(store.path_for(2)) / kManifestName);
  write_rows_split(store, 2);
  fs::create_directory_symlink(store.path_for(1), store.path_for(3));
  write_rows_split(store, 3);
  for (int64_t step : {2, 3}) EXPECT_NO_THROW(ShardedCheckpoint ck(store.path_for(step)));
  EXPECT_FALSE(fs::is_symlink(store.path_for(3)));
  fs::create_directories(store.path_for(7));  // torn, newer than the next one written
  write_rows_split(store, 4);
  EXPECT_EQ(store.list(), (std::vector<std::string>{store.path_for(3), store.path_for(4)}));
}

// A resume reads the manifest's model and layout records as they are: one
// of the wrong type is refused as damage, naming the field, where it was
// nlohmann's "[json.exception.type_error.302] type must be number".
TEST_F(CheckpointStoreTest, AManifestRecordOfTheWrongTypeIsRefusedByName) {
  CheckpointStore store(dir_, 3);
  write_rows_split(store, 1);
  const std::string path = (fs::path(store.path_for(1)) / kManifestName).string();
  const nlohmann::json good = nlohmann::json::parse(std::ifstream(path));
  manifest_from_json(good, path);
  auto refused = [&](const std::function<void(nlohmann::json&)>& spoil, const std::string& why) {
    nlohmann::json j = good;
    spoil(j);
    expect_error([&] { manifest_from_json(j, path); }, {path, why});
  };
  refused([](nlohmann::json& j) { j["layout"]["zero"] = "1"; }, "layout: field \"zero\" is not an integer");
  refused([](nlohmann::json& j) { j["layout"]["world"] = -1; }, "layout: field \"world\" is out of range");
  refused([](nlohmann::json& j) { j["layout"]["zero"] = 4; }, "layout: field \"zero\" is out of range");
  refused([](nlohmann::json& j) { j["layout"]["train_items"] = -5; }, "layout: field \"train_items\" is out of range");
  refused([](nlohmann::json& j) { j["model"]["parameters"] = {1}; }, "model: field \"parameters\" is not an object");
  refused([](nlohmann::json& j) { j["model"]["optimizer"] = {{"name", 5}}; }, "the optimizer's \"name\" is not a string");
  refused([](nlohmann::json& j) { j["model"]["optimizer"] = {{"name", "sgd"}, {"state", {"momentum_buffer", 2}}}; },
          "the optimizer's \"state\" is not an array of names");
}

// A parameter's momentum without its step count would have been dropped, the
// parameter taken as never stepped and its momentum started over: refused.
TEST_F(CheckpointStoreTest, AnOptimizerBufferWithoutItsStepCountIsRefused) {
  autograd::Variable w(Tensor::zeros({2}), true);
  optim::Sgd sgd(optim::one_group({{"w", w}}, 0.1f), {.momentum = 0.9f});
  const HeldPart step{"optim/step.w", DType::i64, {}, nn::Split{}, 0, 1, {0, 1}, Tensor::empty({}, DType::i64)};
  const HeldPart momentum{"optim/momentum_buffer.w", DType::f32, {2}, nn::Split{}, 0, 1, {0, 2}, Tensor::zeros({2})};
  expect_error([&] { load_optimizer_parts({step, momentum}, {false, true}, sgd, dir_); },
               {"checkpoint " + dir_, "momentum_buffer for w but no step count"});
  load_optimizer_parts({step, momentum}, {false, false}, sgd, dir_);  // neither: never stepped
  EXPECT_EQ(sgd.steps("w"), 0);
}

}  // namespace
}  // namespace artel::train
