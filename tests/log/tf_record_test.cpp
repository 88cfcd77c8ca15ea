// TensorFlow's record framing: the bytes tensorboard's RecordWriter writes, and reading back up to
// the first record that is cut short or damaged.
#include "ampt/log/tf_record.h"

#include "support/hex.h"

#include <catch2/catch.hpp>

#include <string>
#include <vector>

using ampt::log::frame_record;
using ampt::log::read_records;

using ampt::test::hex;

TEST_CASE("tf record: a record is framed as tensorboard's RecordWriter frames it", "[log][tensorboard]") {
  // tensorboard.summary.writer.record_writer.RecordWriter(io.BytesIO()).write(b"hello")
  CHECK(hex(frame_record("hello")) == "0500000000000000eab2043e68656c6c6fbb1f1c19");
}

TEST_CASE("tf record: records read back in order, and a cut or damaged record ends the file", "[log][tensorboard]") {
  const std::vector<std::string> data = {"first", std::string(300, 'x'), "", "last one"};
  std::string file;
  for (const auto& d : data) file += frame_record(d);
  CHECK(read_records(file) == data);

  // Cut anywhere inside the last record: the three before it are intact.
  const auto last_start = file.size() - frame_record(data.back()).size();
  for (std::size_t cut = last_start; cut < file.size(); ++cut) {
    INFO("cut at byte " << cut);
    CHECK(read_records(std::string_view(file).substr(0, cut)) ==
          std::vector<std::string>(data.begin(), data.end() - 1));
  }
  // A changed byte in the second record's data, or in its length, stops the reading there.
  auto damaged = file;
  damaged[frame_record(data[0]).size() + 12 + 100] ^= 0x01;
  CHECK(read_records(damaged) == std::vector<std::string>{data[0]});
  damaged = file;
  damaged[frame_record(data[0]).size()] ^= 0x01;
  CHECK(read_records(damaged) == std::vector<std::string>{data[0]});
}
