// TensorBoard's Event messages (event.proto, summary.proto of tensorflow/tensorboard), with only
// the fields ampt writes: the file version, scalar values and a text summary; and the step and
// tags of an event, to rewrite a file a resumed run continues.
#pragma once

#include "ampt/log/scalars.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ampt::log::tensorboard {

// The first event of every file: "brain.Event:2" (readers purge only on a SessionLog START, not
// whenever a step goes back).
std::string file_version_event(double wall_time);

// One Event at `step` whose Summary holds each value as a simple_value (float32) under its name.
std::string scalars_event(double wall_time, int64_t step, const std::vector<Scalar>& values);

// A Summary value for the text plugin: a scalar DT_STRING tensor holding `markdown`.
std::string text_event(double wall_time, int64_t step, std::string_view tag,
                       std::string_view markdown);

struct EventHead {
  int64_t step = 0;
  std::vector<std::string> tags;  // of its summary values; empty for other events
};

// nullopt when `event` is not a well-formed Event message.
std::optional<EventHead> read_event_head(std::string_view event);

}  // namespace ampt::log::tensorboard
