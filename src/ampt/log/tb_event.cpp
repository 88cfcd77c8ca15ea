#include "ampt/log/tb_event.h"

#include "ampt/log/protobuf_wire.h"

namespace ampt::log::tensorboard {
namespace {

using protobuf::Message;

// Field numbers, from tensorboard/compat/proto/{event,summary,tensor}.proto.
namespace event {
constexpr int kWallTime = 1;     // double
constexpr int kStep = 2;         // int64
constexpr int kFileVersion = 3;  // string
constexpr int kSummary = 5;      // Summary
}  // namespace event
namespace summary {
constexpr int kValue = 1;  // repeated Summary.Value
}
namespace value {
constexpr int kTag = 1;          // string
constexpr int kSimpleValue = 2;  // float
constexpr int kTensor = 8;       // TensorProto
constexpr int kMetadata = 9;     // SummaryMetadata
}  // namespace value
namespace metadata {
constexpr int kPluginData = 1;   // PluginData { string plugin_name = 1; bytes content = 2; }
constexpr int kPluginName = 1;
}  // namespace metadata
namespace tensor {
constexpr int kDtype = 1;        // enum DataType
constexpr int kShape = 2;        // TensorShapeProto (empty: a scalar)
constexpr int kStringVal = 8;    // repeated bytes
constexpr uint64_t kDtString = 7;
}  // namespace tensor

Message event_at(double wall_time, int64_t step) {
  Message e;
  e.float64(event::kWallTime, wall_time);
  if (step != 0) e.varint(event::kStep, static_cast<uint64_t>(step));
  return e;
}

}  // namespace

std::string file_version_event(double wall_time) {
  return event_at(wall_time, 0).bytes(event::kFileVersion, "brain.Event:2").data();
}

std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& values) {
  Message s;
  for (const auto& v : values) {
    s.message(summary::kValue, Message()
                                   .bytes(value::kTag, v.name)
                                   .float32(value::kSimpleValue, static_cast<float>(v.value)));
  }
  return event_at(wall_time, step).message(event::kSummary, s).data();
}

std::string text_event(double wall_time, int64_t step, std::string_view tag,
                       std::string_view markdown) {
  // As tensorboard.plugins.text.summary_v2.text_pb writes it, field by field.
  const auto meta =
      Message().message(metadata::kPluginData, Message().bytes(metadata::kPluginName, "text"));
  const auto text = Message()
                        .varint(tensor::kDtype, tensor::kDtString)
                        .message(tensor::kShape, Message())
                        .bytes(tensor::kStringVal, markdown);
  const auto v = Message()
                     .bytes(value::kTag, tag)
                     .message(value::kTensor, text)
                     .message(value::kMetadata, meta);
  return event_at(wall_time, step)
      .message(event::kSummary, Message().message(summary::kValue, v))
      .data();
}

std::optional<EventHead> read_event_head(std::string_view bytes) {
  const auto fields = protobuf::parse_fields(bytes);
  if (!fields) return std::nullopt;
  EventHead head;
  for (const auto& f : *fields) {
    if (f.number == event::kStep && f.type == protobuf::kVarint) {
      head.step = static_cast<int64_t>(f.value);
    }
    if (f.number != event::kSummary || f.type != protobuf::kLengthDelimited) continue;
    const auto values = protobuf::parse_fields(f.bytes);
    if (!values) return std::nullopt;
    for (const auto& v : *values) {
      if (v.number != summary::kValue || v.type != protobuf::kLengthDelimited) continue;
      const auto value_fields = protobuf::parse_fields(v.bytes);
      if (!value_fields) return std::nullopt;
      for (const auto& vf : *value_fields) {
        if (vf.number == value::kTag && vf.type == protobuf::kLengthDelimited) {
          head.tags.emplace_back(vf.bytes);
        }
      }
    }
  }
  return head;
}

}  // namespace ampt::log::tensorboard
