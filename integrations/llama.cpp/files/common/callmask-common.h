// callmask in llama.cpp's common library: `%callmask` grammars, the tool-call grammar of an
// OpenAI chat request, callmask's sampler and its parse of the output.
//
// A `%callmask` grammar is the prefix followed by a JSON object, one of:
//   {"dialect": "hermes", "tools": [...], "options": {...}}     a built-in dialect
//   {"dialect_text": "<grammar file>", "tools": [...], ...}     a dialect grammar file's text
//   {"json_schema": {...}, "options": {...}}                    a JSON Schema
// with an optional "max_tokens": N, the token budget every output then finishes within (the
// end-of-generation token included). "options" is callmask's options object (tool_choice,
// parallel_tool_calls, reasoning, compile limits, lenient; see callmask's docs/embedding.md).
//
// Compiled grammars are kept in a cache owned by this file (64 entries, least recently used
// dropped), keyed by the grammar without its "max_tokens", so a tool set compiles once and every
// request that repeats it starts warm. Vocabularies are read once per llama_vocab.
#pragma once

#include "chat.h"
#include "llama.h"

#include <cstdint>
#include <string>

// True when `grammar` is a `%callmask` grammar.
bool common_callmask_is_grammar(const std::string & grammar);

// The dialect that tool requests use, from the server's --callmask-dialect value: "off" (none:
// llama.cpp's own tool-call grammars), "auto" (told from the chat template and the vocabulary;
// none, with a warning in the log, when the template shows no format callmask knows), a built-in
// dialect name, or the path of a dialect grammar file (a name with a `/` or ending in `.gbnf`).
// Returns the dialect as a JSON object's fields ({"dialect": name} or {"dialect_text": text}) in
// text, or "" for none. Throws std::runtime_error for an unknown name, an unreadable file, or a
// grammar that does not compile.
std::string common_callmask_resolve_dialect(const llama_vocab * vocab, const std::string & chat_template,
                                            const std::string & flag);

// The `%callmask` grammar of an OpenAI chat request with tools, from the resolved dialect and the
// request's JSON fields (`tools`, `tool_choice` and `parallel_tool_calls` as the client sent them,
// each "" when absent). Compiles it now (into the cache), so a bad tool set or option fails the
// request here: throws std::invalid_argument with callmask's message.
std::string common_callmask_tools_grammar(const std::string & dialect, const std::string & tools_json,
                                          const std::string & tool_choice_json,
                                          const std::string & parallel_tool_calls_json);

// The system message that gives the tools to a model whose chat template shows none (Gemma 3's):
// each tool's JSON and an example call in the dialect, as `callmask generate` writes it; "" when
// `chat_template` renders the tools itself. Throws std::invalid_argument for invalid tools.
std::string common_callmask_tools_prompt(const std::string & dialect, const std::string & chat_template,
                                         const std::string & tools_json);

// `grammar` with its token budget set to `max_tokens` (negative: none).
std::string common_callmask_with_max_tokens(const std::string & grammar, int64_t max_tokens);

// callmask's llama_sampler for a `%callmask` grammar over the model's vocabulary, with the
// grammar's token budget. Throws std::runtime_error with callmask's message (a grammar that does
// not compile, a budget no complete output fits in).
llama_sampler * common_callmask_sampler_init(const llama_vocab * vocab, const std::string & grammar);

// Parses the output of a `%callmask` grammar into a chat message: content, reasoning_content and
// tool_calls (ids left empty unless the model wrote them). With `is_partial`, only what is
// certain so far (text that may still become a call is held back), so that successive partial
// parses only ever grow. Output that callmask rejects is returned as content, with a warning.
common_chat_msg common_callmask_parse(const std::string & grammar, const std::string & text, bool is_partial);
