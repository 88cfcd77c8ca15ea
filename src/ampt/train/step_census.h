// --profile's step census: what one optimizer step asks of the device, counted from the calls
// ampt makes (LibTorch's RecordFunction), so that a CPU run counts what a GPU run of the same
// model would launch:
// - operators: the outermost operator calls that do work (views, metadata and allocations apart;
//   a composite like reshape counts when it copies), ampt's own fused operations (ampt::…)
//   included, what happens inside any of them not counted again (an ampt:: operation is one
//   kernel or one cuBLAS call on a GPU);
// - dtype conversions: every copy between dtypes, at any depth (autocast's casts inside a
//   matmul, a CPU kernel's casts of mixed-dtype inputs and the conversions inside ampt::
//   operations included, a number passed to an operator not), with the bytes read and written,
//   how many convert a parameter or a gradient (by storage), and apart, those inside ampt::
//   operations, per operation: the optimizer writes the half working weights in its own pass
//   (a second pass over them on a CPU), the fp32 weight-gradient GEMM adds a half product into
//   an fp32 gradient;
// - host synchronisations: calls that make a GPU wait for the host (item, nonzero, …) and copies
//   to the host (ampt's own are marked ampt::copy_to_host, visible on a CPU run too), outside
//   ampt:: operations (a GPU kernel waits for nothing);
// - autograd nodes: the backward nodes the engine ran.
#pragma once

#include "ampt/log/events.h"

#include <torch/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace ampt::train {

struct StepCensus {
  log::StepCensusReport counts;
  std::map<std::string, int64_t> operator_calls;    // per name: the census file's detail
  std::map<std::string, int64_t> conversion_calls;  // the operator each conversion came from
  std::map<std::string, int64_t> sync_calls;
  std::map<std::string, int64_t> node_calls;

  // The counts and the per-name detail as one JSON object (a line of the census file).
  std::string json() const;
};

// Counts one step at a time while it exists. At most one at a time in a process.
class StepCensusRecorder {
 public:
  // `parameters`: the model's (frozen ones too), whose storage tells a parameter's conversion.
  explicit StepCensusRecorder(std::vector<torch::Tensor> parameters);
  ~StepCensusRecorder();
  StepCensusRecorder(const StepCensusRecorder&) = delete;
  StepCensusRecorder& operator=(const StepCensusRecorder&) = delete;

  // Around one optimizer step, on the thread that runs it.
  void begin(int64_t step);
  // The step's gradients once backward has made them (TrainStep calls it): conversions into
  // them count as a parameter's.
  void note_gradients(const std::vector<torch::Tensor>& gradients);
  StepCensus end();

  struct State;  // shared with the RecordFunction callbacks

 private:
  std::unique_ptr<State> state_;
};

}  // namespace ampt::train
