#include "ampt/core/errors.h"
#include "ampt/data/cifar.h"
#include "ampt/data/idx.h"
#include "ampt/data/registry.h"
#include "data/data_fixtures.h"
#include "support/process.h"

#include <catch2/catch.hpp>

#include <filesystem>

using namespace ampt::data;
using ampt::RuntimeError;
using ampt::test::cifar_records;
using ampt::test::idx_file;
using ampt::test::idx_images;
using ampt::test::idx_labels;
using ampt::test::make_temp_dir;
using ampt::test::pixel;
using ampt::test::write_file;

namespace {

constexpr SampleRequest kImageRequest{SampleRequest::Form::images, 0, 0};

uint8_t byte_at(const torch::Tensor& t, int64_t i, int64_t p) {
  return t[i].contiguous().view(-1)[p].item<uint8_t>();
}

std::string mnist_dir(uint32_t train = 12, uint32_t test = 5) {
  const auto dir = make_temp_dir();
  write_file(dir + "/train-images-idx3-ubyte", idx_images(train, 28, 28));
  write_file(dir + "/train-labels-idx1-ubyte", idx_labels(train));
  write_file(dir + "/t10k-images-idx3-ubyte", idx_images(test, 28, 28));
  write_file(dir + "/t10k-labels-idx1-ubyte", idx_labels(test));
  return dir;
}

ampt::config::Config with_dataset(const std::string& spec) {
  ampt::config::Config config;
  config.dataset = spec;
  return config;
}

}  // namespace

TEST_CASE("IDX files: images and labels read back exactly", "[data][images]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/images", idx_images(3, 4, 5));
  write_file(dir + "/labels", idx_labels(3));
  const auto images = read_idx_images(dir + "/images");
  CHECK(images.sizes() == torch::IntArrayRef({3, 1, 4, 5}));
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t p = 0; p < 20; ++p) CHECK(byte_at(images, i, p) == static_cast<uint8_t>(pixel(i, p)));
  }
  const auto labels = read_idx_labels(dir + "/labels");
  CHECK(torch::equal(labels, torch::tensor({0, 1, 2}, torch::kInt64)));
}

TEST_CASE("CIFAR-10 batches: records read back exactly, files concatenated in order",
          "[data][images]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/a.bin", cifar_records(2));
  write_file(dir + "/b.bin", cifar_records(3, 2));
  const auto batch = read_cifar_batches({dir + "/a.bin", dir + "/b.bin"});
  CHECK(batch.inputs.sizes() == torch::IntArrayRef({5, 3, 32, 32}));
  CHECK(torch::equal(batch.targets, torch::tensor({0, 1, 2, 3, 4}, torch::kInt64)));
  for (const int64_t p : {0, 1, 1023, 1024, 3071}) {
    CHECK(byte_at(batch.inputs, 3, p) == static_cast<uint8_t>(pixel(3, p)));
  }
}

TEST_CASE("mnist, fashion-mnist, cifar10 specs: val from the test files, pixels as x / 255",
          "[data][images][registry]") {
  const auto dir = mnist_dir();
  for (const std::string kind : {"mnist", "fashion-mnist"}) {
    const auto splits = open_dataset(with_dataset(kind + ":" + dir), kImageRequest);
    CHECK(splits.spec.sample_shape == std::vector<int64_t>{1, 28, 28});
    CHECK(splits.spec.classes == 10);
    CHECK(splits.train->size() == 12);
    CHECK(splits.val->size() == 5);
    CHECK(splits.description == kind + ":" + dir +
                                    ": 1x28x28 images, 10 classes; train 12 / val 5 "
                                    "images (t10k)");
    const auto batch = splits.train->gather({7});
    CHECK(batch.inputs.scalar_type() == torch::kFloat32);
    CHECK(batch.inputs[0][0][0][3].item<float>() ==
          Approx(static_cast<uint8_t>(pixel(7, 3)) / 255.0));
    CHECK(batch.targets.item<int64_t>() == 7);
  }

  const auto cifar = make_temp_dir();
  for (int i = 1; i <= 5; ++i) write_file(cifar + "/data_batch_" + std::to_string(i) + ".bin", cifar_records(2));
  write_file(cifar + "/test_batch.bin", cifar_records(3));
  const auto splits = open_dataset(with_dataset("cifar10:" + cifar), kImageRequest);
  CHECK(splits.spec.sample_shape == std::vector<int64_t>{3, 32, 32});
  CHECK(splits.train->size() == 10);
  CHECK(splits.val->size() == 3);
}

TEST_CASE("image files: bad data is a one-line error naming the file", "[data][images][errors]") {
  const auto dir = make_temp_dir();
  write_file(dir + "/short", idx_file({2, 28, 28}, std::string(2 * 28 * 28 - 1, '\0')));
  CHECK_THROWS_WITH(read_idx_images(dir + "/short"),
                    Catch::Equals(dir + "/short: the header says 2x28x28 = 1568 bytes of data but "
                                        "the file holds 1567"));
  write_file(dir + "/labels", idx_labels(20));
  CHECK_THROWS_WITH(read_idx_images(dir + "/labels"),
                    Catch::Contains(dir + "/labels: IDX magic 0x00000801 is not 0x00000803"));
  write_file(dir + "/cifar.bin", cifar_records(2) + "x");
  CHECK_THROWS_WITH(read_cifar_batches({dir + "/cifar.bin"}),
                    Catch::Contains(dir + "/cifar.bin: 6147 bytes is not a whole number of "
                                          "3073-byte records"));
  auto bad_label = cifar_records(1);
  bad_label[0] = 10;
  write_file(dir + "/label.bin", bad_label);
  CHECK_THROWS_WITH(read_cifar_batches({dir + "/label.bin"}),
                    Catch::Contains(dir + "/label.bin: label 10 in a CIFAR-10 record"));

  const auto mnist = mnist_dir();
  write_file(mnist + "/train-labels-idx1-ubyte", idx_labels(11));
  CHECK_THROWS_WITH(open_dataset(with_dataset("mnist:" + mnist), kImageRequest),
                    Catch::Equals(mnist + "/train-labels-idx1-ubyte: 11 labels but " + mnist +
                                  "/train-images-idx3-ubyte holds 12 images"));
  const auto resized = mnist_dir();
  write_file(resized + "/t10k-images-idx3-ubyte", idx_images(5, 32, 32));
  CHECK_THROWS_WITH(open_dataset(with_dataset("mnist:" + resized), kImageRequest),
                    Catch::Equals(resized + ": t10k images are 1x32x32 but train images 1x28x28"));
  const auto gz = mnist_dir();
  std::filesystem::rename(gz + "/t10k-labels-idx1-ubyte", gz + "/t10k-labels-idx1-ubyte.gz");
  CHECK_THROWS_WITH(open_dataset(with_dataset("mnist:" + gz), kImageRequest),
                    Catch::Contains("t10k-labels-idx1-ubyte: missing; t10k-labels-idx1-ubyte.gz "
                                    "is there: decompress it with gunzip"));
  CHECK_THROWS_WITH(open_dataset(with_dataset("cifar10:" + dir), kImageRequest),
                    Catch::Contains(dir + "/data_batch_1.bin: cannot open"));
}
