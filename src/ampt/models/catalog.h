// config::Catalog from the family table: what config resolves --model and --init_from against,
// with hf/ reading the Hugging Face files.
#pragma once

#include "ampt/config/catalog.h"

namespace ampt::models {

// Every family's --model names; --init_from's model is the family whose hf_model_types holds its
// config.json's model_type (a name not found is taken for a GPT-2, whose loading then says what
// was searched); an adapter is a peft directory (hf/peft_adapter.h).
const config::Catalog& catalog();

}  // namespace ampt::models
