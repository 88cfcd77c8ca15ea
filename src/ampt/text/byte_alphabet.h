// GPT-2's bytes_to_unicode: how its vocabulary files write a token's bytes, each byte as one
// printable character ("Ġ" for a space), so that every token is a printable string.
#pragma once

#include <string>
#include <string_view>

namespace ampt::text {

// The characters (UTF-8) that write `bytes`.
std::string written_token(std::string_view bytes);

// The bytes that `written` stands for; false when a character is not in the alphabet.
bool token_bytes(std::string_view written, std::string& bytes);

}  // namespace ampt::text
