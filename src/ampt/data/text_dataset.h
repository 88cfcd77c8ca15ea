// Language-model data from text: `text:PATH` (a file, a directory of *.txt or a glob; each file
// one document) and `jsonl:PATH` (the same with *.jsonl; each record's text field one document).
#pragma once

#include "ampt/config/config.h"
#include "ampt/config/dataset_spec.h"
#include "ampt/data/data_splits.h"
#include "ampt/data/sample_request.h"
#include "ampt/text/tokenize_files.h"

namespace ampt::data {

// The documents are tokenized by config.tokenizer, else by the tokenizer files of init_from's
// directory, else taken byte by byte (ids 0..255); tokenized text is kept in config.token_cache
// (token_cache.h), reporting `progress` while it is being made. Samples have max_length input
// tokens (0: request.block_size): packed, documents joined by <|endoftext|> (bytes: by a newline
// between JSON Lines documents; text files are never joined) and cut into windows; unpacked, one
// padded example per document (document_examples.h). A seeded val_fraction is held out.
// Throws UsageError for a tokenizer larger than request.vocab_size or a max_length beyond
// block_size, RuntimeError naming the file or tokenizer that cannot be read.
DataSplits open_text_dataset(const config::DatasetSpec& spec, const config::Config& config,
                             const SampleRequest& request, const text::InputProgress& progress);

}  // namespace ampt::data
