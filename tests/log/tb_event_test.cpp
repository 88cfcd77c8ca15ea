// TensorBoard Event messages: byte for byte what tensorboard's own protos serialize for the same
// content, and the step and tags read back from them.
#include "ampt/log/tb_event.h"

#include "support/hex.h"

#include <catch2/catch.hpp>

#include <limits>
#include <string>

namespace tb = ampt::log::tensorboard;

using ampt::test::hex;

TEST_CASE("tb event: scalar, text and file-version events as tensorboard serializes them", "[log][tensorboard]") {
  // event_pb2.Event(wall_time=1.5, step=300) with summary.value.add(tag="a", simple_value=1.0)
  CHECK(hex(tb::scalars_event(1.5, 300, {{"a", 1.0}})) ==
        "09000000000000f83f10ac022a0a0a080a0161150000803f");
  // event_pb2.Event(wall_time=2.0, step=7, summary=text_summary_v2.text_pb("config", "hi"))
  CHECK(hex(tb::text_event(2.0, 7, "config", "hi")) ==
        "09000000000000004010072a1e0a1c0a06636f6e666967420808071200420268694a080a060a0474657874");
  // event_pb2.Event(wall_time=2.0, file_version="brain.Event:2")
  CHECK(hex(tb::file_version_event(2.0)) == "0900000000000000401a0d627261696e2e4576656e743a32");
}

TEST_CASE("tb event: the step and tags of an event read back", "[log][tensorboard]") {
  const auto head = tb::read_event_head(
      tb::scalars_event(3.0, 1234567, {{"train/loss", 0.5}, {"amp/loss_scale", 65536.0}}));
  REQUIRE(head);
  CHECK(head->step == 1234567);
  CHECK(head->tags == std::vector<std::string>{"train/loss", "amp/loss_scale"});
  const auto text = tb::read_event_head(tb::text_event(3.0, 40, "config", "x"));
  REQUIRE(text);
  CHECK(text->step == 40);
  CHECK(text->tags == std::vector<std::string>{"config"});
  const auto version = tb::read_event_head(tb::file_version_event(3.0));
  REQUIRE(version);
  CHECK(version->step == 0);
  CHECK(version->tags.empty());
  CHECK_FALSE(tb::read_event_head(tb::scalars_event(3.0, 5, {{"a", 1.0}}).substr(0, 12)));
}
