#include "ampt/text/hf_tokenizer_writer.h"

#include "ampt/core/errors.h"
#include "ampt/core/json_text.h"
#include "ampt/text/byte_alphabet.h"
#include "ampt/text/pretokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <tuple>
#include <unordered_set>

namespace ampt::text {

std::string tokenizer_json(const Vocabulary& vocabulary) {
  if (vocabulary.pre_tokenizer == PreTokenizer::sentencepiece) {
    throw RuntimeError(fmt::format("{}: a SentencePiece vocabulary is not written as a tokenizer.json: "
                                   "only byte-level ones are (its own tokenizer.json is copied)",
                                   vocabulary.source));
  }
  const auto count = static_cast<int32_t>(vocabulary.tokens.size());
  std::vector<bool> special(vocabulary.tokens.size(), false);
  for (const int32_t id : vocabulary.special_ids) special[id] = true;
  // The model's vocab runs to the last ordinary token; special tokens after it exist only as
  // added tokens, as tokenizer.json files have them.
  int32_t model_size = count;
  while (model_size > 0 && special[model_size - 1]) --model_size;
  const auto written = [&](int32_t id) {
    return special[id] ? vocabulary.tokens[id] : written_token(vocabulary.tokens[id]);
  };

  std::string vocab;
  std::unordered_set<std::string> seen;
  for (int32_t id = 0; id < model_size; ++id) {
    std::string token = written(id);
    if (!seen.insert(token).second) {
      throw RuntimeError(fmt::format("{}: token {} is written \"{}\" as another token is, which a "
                                     "tokenizer.json cannot hold",
                                     vocabulary.source, id, token));
    }
    vocab += fmt::format("{}{}: {}", id == 0 ? "" : ", ", json_string(token), id);
  }
  std::vector<const Merge*> merges;
  for (const Merge& m : vocabulary.merges) merges.push_back(&m);
  std::ranges::sort(merges, [](const Merge* a, const Merge* b) {
    return std::tie(a->rank, a->left, a->right) < std::tie(b->rank, b->left, b->right);
  });
  std::string merge_list;
  for (const Merge* m : merges) {
    merge_list += fmt::format("{}[{}, {}]", merge_list.empty() ? "" : ", ", json_string(written(m->left)),
                              json_string(written(m->right)));
  }
  std::string added;
  std::vector<int32_t> special_ids = vocabulary.special_ids;
  std::ranges::sort(special_ids);
  for (const int32_t id : special_ids) {
    added += fmt::format("{}\n    {{\"id\": {}, \"content\": {}, \"single_word\": false, \"lstrip\": false, "
                         "\"rstrip\": false, \"normalized\": false, \"special\": true}}",
                         added.empty() ? "" : ",", id, json_string(vocabulary.tokens[id]));
  }
  const std::string byte_level_processor =
      R"({"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true})";
  std::string post_processor = byte_level_processor;
  if (vocabulary.bos >= 0) {
    const std::string bos = json_string(vocabulary.tokens[vocabulary.bos]);
    post_processor = fmt::format(
        R"({{"type": "Sequence", "processors": [{0}, {{"type": "TemplateProcessing", )"
        R"("single": [{{"SpecialToken": {{"id": {1}, "type_id": 0}}}}, {{"Sequence": {{"id": "A", "type_id": 0}}}}], )"
        R"("pair": [{{"SpecialToken": {{"id": {1}, "type_id": 0}}}}, {{"Sequence": {{"id": "A", "type_id": 0}}}}, )"
        R"({{"SpecialToken": {{"id": {1}, "type_id": 1}}}}, {{"Sequence": {{"id": "B", "type_id": 1}}}}], )"
        R"("special_tokens": {{{1}: {{"id": {1}, "ids": [{2}], "tokens": [{1}]}}}}}}]}})",
        byte_level_processor, bos, vocabulary.bos);
  }
  return fmt::format(
      "{{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n"
      "  \"added_tokens\": [{}\n  ],\n"
      "  \"normalizer\": {},\n"
      "  \"pre_tokenizer\": {{\"type\": \"Sequence\", \"pretokenizers\": [{{\"type\": \"Split\", "
      "\"pattern\": {{\"Regex\": {}}}, \"behavior\": \"Isolated\", \"invert\": false}}, {{\"type\": "
      "\"ByteLevel\", \"add_prefix_space\": false, \"trim_offsets\": true, \"use_regex\": false}}]}},\n"
      "  \"post_processor\": {},\n"
      "  \"decoder\": {{\"type\": \"ByteLevel\", \"add_prefix_space\": true, \"trim_offsets\": true, "
      "\"use_regex\": true}},\n"
      "  \"model\": {{\"type\": \"BPE\", \"dropout\": null, \"unk_token\": null, "
      "\"continuing_subword_prefix\": null, \"end_of_word_suffix\": null, \"fuse_unk\": false, "
      "\"byte_fallback\": false, \"ignore_merges\": {},\n"
      "    \"vocab\": {{{}}},\n    \"merges\": [{}]}}\n}}\n",
      added, vocabulary.nfc ? R"({"type": "NFC"})" : "null",
      json_string(std::string(pattern_regex(vocabulary.pre_tokenizer))), post_processor,
      vocabulary.ignore_merges ? "true" : "false", vocab, merge_list);
}

}  // namespace ampt::text
