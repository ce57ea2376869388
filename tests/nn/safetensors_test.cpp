#include "artel/nn/safetensors.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "artel/nn/linear.h"
#include "temp_dir.h"

namespace artel::nn {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

class Safetensors : public ::testing::Test {
 protected:
  std::string path(const std::string& name) const { return (fs::path(dir_) / name).string(); }

  // A file with this header text (length-prefixed, unpadded) and data bytes.
  std::string craft(const std::string& header, const std::string& data, int64_t claimed_len = -1) {
    std::string bytes(8, '\0');
    uint64_t n = claimed_len < 0 ? header.size() : static_cast<uint64_t>(claimed_len);
    for (int i = 0; i < 8; ++i) bytes[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    bytes += header + data;
    std::string p = path("bad.safetensors");
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  // The message of the Error reading `p` throws (fails the test if none).
  std::string read_error(const std::string& p) {
    try {
      read_safetensors(p);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error reading " << p;
    return "";
  }

  test_support::TempDir temp_;
  const std::string dir_ = temp_.str();
};

TEST_F(Safetensors, RoundTripsEveryDtypeShapeAndMetadata) {
  std::map<std::string, Tensor> t;
  t["a.weight"] = Tensor::from_vector({1, 2, 3, 4, 5, 6}, {2, 3});
  t["scalar"] = Tensor::full({}, 3.5f);
  t["empty"] = Tensor::zeros({0, 4});
  t["ids"] = Tensor::empty({3}, DType::i64);
  for (int i = 0; i < 3; ++i) t["ids"].data<int64_t>()[i] = -7 + i;
  t["i32"] = Tensor::empty({2}, DType::i32);
  t["i32"].data<int32_t>()[0] = 42, t["i32"].data<int32_t>()[1] = -1;
  t["f64"] = Tensor::empty({1}, DType::f64);
  t["f64"].data<double>()[0] = 0.1;
  t["bf16"] = Tensor::empty({1}, DType::bf16);
  t["bf16"].data<bf16>()[0] = bf16(1.5f);
  std::string p = path("w.safetensors");
  write_safetensors(p, t, {{"format", "pt"}, {"step", "12"}});

  SafetensorsFile f = read_safetensors(p);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  EXPECT_EQ(f.metadata.at("step"), "12");
  ASSERT_EQ(f.tensors.size(), t.size());
  for (const auto& [name, want] : t) {
    const Tensor& got = f.tensors.at(name);
    EXPECT_EQ(got.shape(), want.shape()) << name;
    EXPECT_EQ(got.dtype(), want.dtype()) << name;
    EXPECT_EQ(0, std::memcmp(got.raw(), want.raw(), want.nbytes())) << name;
  }
  // Header length is a multiple of 8, so the data starts aligned; no temp file is left.
  std::ifstream in(p, std::ios::binary);
  uint64_t n = 0;
  in.read(reinterpret_cast<char*>(&n), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 1);
}

TEST_F(Safetensors, ReadsAHeaderWrittenByOthers) {
  // Keys in any order, no padding, metadata first (as safetensors.torch writes).
  std::string data(12, '\0');
  float v[3] = {1, -2, 0.5f};
  std::memcpy(data.data(), v, 12);
  std::string p = craft(
      R"({"__metadata__":{"format":"pt"},"x":{"data_offsets":[0,12],"shape":[3],"dtype":"F32"}})", data);
  EXPECT_EQ(read_safetensors(p).tensors.at("x").to_vector(), (std::vector<float>{1, -2, 0.5f}));
}

TEST_F(Safetensors, EveryCorruptionIsANamedError) {
  const std::string ok_entry = R"("x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
  std::string eight(8, '\0');
  struct Case {
    std::string header, data;
    int64_t claimed;
    std::string expect;
  };
  std::vector<Case> cases = {
      {"", "", -1, "the header is not valid JSON"},
      {"{\"x\": ", eight, -1, "not valid JSON"},
      {"[1, 2]", "", -1, "not a JSON object"},
      {"{" + ok_entry + "}", eight, 1000, "header length 1000 runs past the end"},
      {R"({"x":{"dtype":"F16","shape":[2],"data_offsets":[0,4]}})", "1234", -1,
       "tensor 'x' is F16, which artel does not read"},
      {R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", eight, -1,
       "tensor 'x': shape [3] of F32 needs 12 bytes but data_offsets [0,8] span 8"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", eight, -1, "run past the data section (8 bytes)"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"y":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       eight, -1, "overlap the previous tensor"},
      {"{" + ok_entry + "}", eight + "xxxx", -1, "the tensors cover 8 bytes of a 12-byte data section"},
      {R"({"x":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", eight, -1, "leave a gap after byte 0"},
      {R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", eight, -1, "end before they begin"},
      {R"({"x":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", eight, -1, "sizes >= 0"},
      {R"({"x":{"dtype":"F32","data_offsets":[0,8]}})", eight, -1, "tensor 'x': no \"shape\" array"},
      {R"({"x":{"dtype":"F32","shape":[2]}})", eight, -1, "no \"data_offsets\""},
      {R"({"x":5})", "", -1, "entry is not a JSON object"},
      {R"({"__metadata__":{"a":1}})", "", -1, "__metadata__ value of 'a' is not a string"},
  };
  for (const Case& c : cases) {
    std::string p = craft(c.header, c.data, c.claimed);
    std::string msg = read_error(p);
    EXPECT_THAT(msg, HasSubstr(c.expect)) << c.header;
    EXPECT_THAT(msg, HasSubstr(p)) << "the error names the file";
  }
  std::string p = path("short.safetensors");
  std::ofstream(p, std::ios::binary) << "abc";
  EXPECT_THAT(read_error(p), HasSubstr("3 bytes, shorter than the 8-byte header length"));
  EXPECT_THAT(read_error(path("nope.safetensors")), HasSubstr("nope.safetensors does not exist"));
}

TEST_F(Safetensors, WritingIntoAMissingDirectoryFailsCleanly) {
  EXPECT_THROW(write_safetensors(path("no/such/dir/w.safetensors"), {{"x", Tensor::zeros({1})}}), Error);
  // Onto a directory: said before any byte is written, with a file to name instead.
  EXPECT_THAT([&] { write_safetensors(dir_, {{"x", Tensor::zeros({1})}}); },
              ::testing::ThrowsMessage<Error>(HasSubstr("safetensors file " + dir_ + " is a directory, not a file (hint: "
                                                        "name a file inside it, e.g. " + dir_ + "/model.safetensors)")));
  EXPECT_EQ(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()), 0) << "no temporary file left";
}

// A module never materialised was written as a file of no tensors.
TEST_F(Safetensors, SavingAModuleThatWasNeverMaterialisedIsRefused) {
  Linear declared(3, 2, true);
  const std::string file = path("none.safetensors");
  try {
    save_weights(declared, file);
    ADD_FAILURE() << "an unmaterialised module was saved";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parameter 'weight' has no value: it was declared but not materialised"),
              std::string::npos)
        << e.what();
  }
  EXPECT_FALSE(fs::exists(file));
}

TEST_F(Safetensors, ModuleWeightsRoundTripAndLoadErrorsNameTheTensor) {
  Linear a(4, 3, true), b(4, 3, true);
  materialize(a, 1);
  materialize(b, 2);
  ASSERT_NE(b.weight().value().to_vector(), a.weight().value().to_vector());
  std::string p = path("lin.safetensors");
  save_weights(a, p);
  load_weights(b, p);
  EXPECT_EQ(b.weight().value().to_vector(), a.weight().value().to_vector());
  EXPECT_EQ(b.bias().value().to_vector(), a.bias().value().to_vector());

  Linear wide(5, 3, true);
  materialize(wide, 1);
  try {
    load_weights(wide, p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(p));
    EXPECT_THAT(e.what(), HasSubstr("weight (given float32 [3, 4], model has float32 [3, 5])"));
  }
  Linear no_bias(4, 3, false);
  materialize(no_bias, 1);
  try {
    load_weights(no_bias, p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("unexpected bias"));
  }
  write_safetensors(p, {{"weight", Tensor::zeros({3, 4})}});
  try {
    load_weights(b, p);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("missing bias"));
  }
}

}  // namespace
}  // namespace artel::nn
