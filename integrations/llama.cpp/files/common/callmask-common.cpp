// callmask in llama.cpp's common library; see callmask-common.h.

#include "callmask-common.h"

#include "callmask.h"  // callmask's C API (callmask's crates/callmask-c/include)
#include "log.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

using json = nlohmann::ordered_json;

static const char   CALLMASK_PREFIX[]   = "%callmask";
static const size_t CALLMASK_CACHE_SIZE = 64;

namespace {

struct grammar_deleter {
    void operator()(CallmaskGrammar * g) const { callmask_grammar_free(g); }
};
struct vocab_deleter {
    void operator()(CallmaskVocab * v) const { callmask_vocab_free(v); }
};
struct string_deleter {
    void operator()(char * s) const { callmask_string_free(s); }
};

using grammar_ptr = std::shared_ptr<CallmaskGrammar>;
using vocab_ptr   = std::shared_ptr<CallmaskVocab>;
using string_ptr  = std::unique_ptr<char, string_deleter>;

std::string last_error(CallmaskStatus status) {
    const char * msg = callmask_last_error();
    return std::string("callmask (") + callmask_status_name(status) + "): " + (msg ? msg : "unknown failure");
}

// The request's own faults (callmask_status_is_request_fault) as std::invalid_argument, which
// llama-server answers with HTTP 400; the server's own as std::runtime_error.
[[noreturn]] void throw_status(CallmaskStatus status) {
    if (callmask_status_is_request_fault(status)) {
        throw std::invalid_argument(last_error(status));
    }
    throw std::runtime_error(last_error(status));
}

// The JSON object after the prefix.
json spec_of(const std::string & grammar) {
    if (!common_callmask_is_grammar(grammar)) {
        throw std::invalid_argument("not a %callmask grammar");
    }
    json spec;
    try {
        spec = json::parse(grammar.substr(sizeof(CALLMASK_PREFIX) - 1));
    } catch (const std::exception & e) {
        throw std::invalid_argument(std::string("%callmask: the grammar is not a JSON object: ") + e.what());
    }
    if (!spec.is_object()) {
        throw std::invalid_argument("%callmask: the grammar is not a JSON object");
    }
    return spec;
}

std::string text_of(const json & spec, const char * key) {
    if (!spec.contains(key)) {
        return "";
    }
    return spec.at(key).dump();
}

// The server's compile caches: the lexemes its requests' grammars compile, kept for the next
// request (callmask keeps no process-wide cache; this server owns one, for its life).
const CallmaskCaches * compile_caches() {
    static CallmaskCaches * caches = [] {
        CallmaskCaches * c = nullptr;
        if (callmask_caches_new(CALLMASK_DEFAULT_CACHE_BYTES, &c) != CALLMASK_STATUS_OK) {
            return (CallmaskCaches *) nullptr;  // compiles then keep their lexemes for themselves
        }
        return c;
    }();
    return caches;
}

// Compiles a spec (without max_tokens).
grammar_ptr compile(const json & spec) {
    static const char * known[] = { "dialect", "dialect_text", "json_schema", "tools", "options", "max_tokens" };
    for (const auto & item : spec.items()) {
        bool ok = false;
        for (const char * k : known) {
            ok = ok || item.key() == k;
        }
        if (!ok) {
            throw std::invalid_argument("%callmask: unknown field \"" + item.key() +
                                        "\" (expected dialect, dialect_text or json_schema, with tools, options, max_tokens)");
        }
    }
    const int n_kinds = (int) spec.contains("dialect") + (int) spec.contains("dialect_text") + (int) spec.contains("json_schema");
    if (n_kinds != 1) {
        throw std::invalid_argument("%callmask: give exactly one of dialect, dialect_text, json_schema");
    }
    const std::string options = spec.contains("options") ? spec.at("options").dump() : std::string();
    const char *      opts    = options.empty() ? nullptr : options.c_str();
    CallmaskGrammar * g       = nullptr;
    CallmaskStatus    status;
    if (spec.contains("json_schema")) {
        if (spec.contains("tools")) {
            throw std::invalid_argument("%callmask: tools go with a dialect, not a json_schema");
        }
        status = callmask_grammar_from_json_schema(spec.at("json_schema").dump().c_str(), opts, compile_caches(), &g);
    } else {
        const std::string tools = spec.contains("tools") ? spec.at("tools").dump() : std::string("[]");
        if (spec.contains("dialect")) {
            if (!spec.at("dialect").is_string()) {
                throw std::invalid_argument("%callmask: dialect must be a string");
            }
            status = callmask_grammar_from_dialect(spec.at("dialect").get<std::string>().c_str(), tools.c_str(), opts, compile_caches(), &g);
        } else {
            if (!spec.at("dialect_text").is_string()) {
                throw std::invalid_argument("%callmask: dialect_text must be a string");
            }
            status = callmask_grammar_from_dialect_text(spec.at("dialect_text").get<std::string>().c_str(), tools.c_str(), opts, compile_caches(), &g);
        }
    }
    if (status != CALLMASK_STATUS_OK) {
        throw_status(status);
    }
    return grammar_ptr(g, grammar_deleter());
}

// Compiled grammars by key (the spec without max_tokens), least recently used dropped.
class grammar_cache {
  public:
    grammar_ptr get(const json & spec) {
        json key_spec = spec;
        key_spec.erase("max_tokens");
        const std::string key = key_spec.dump();
        {
            std::lock_guard<std::mutex> lock(mutex);
            auto it = index.find(key);
            if (it != index.end()) {
                order.splice(order.begin(), order, it->second);
                return it->second->second;
            }
        }
        grammar_ptr g = compile(key_spec);  // outside the lock: compiles run in parallel
        std::lock_guard<std::mutex> lock(mutex);
        auto it = index.find(key);
        if (it != index.end()) {
            return it->second->second;
        }
        order.emplace_front(key, g);
        index[key] = order.begin();
        while (order.size() > CALLMASK_CACHE_SIZE) {
            index.erase(order.back().first);
            order.pop_back();
        }
        return g;
    }

  private:
    std::mutex mutex;
    std::list<std::pair<std::string, grammar_ptr>> order;
    std::unordered_map<std::string, std::list<std::pair<std::string, grammar_ptr>>::iterator> index;
};

grammar_cache & grammars() {
    static grammar_cache cache;
    return cache;
}

// callmask's copy of a model's vocabulary, read once per llama_vocab.
vocab_ptr vocab_of(const llama_vocab * vocab) {
    static std::mutex mutex;
    static std::map<const llama_vocab *, vocab_ptr> vocabs;
    std::lock_guard<std::mutex> lock(mutex);
    auto it = vocabs.find(vocab);
    if (it != vocabs.end()) {
        return it->second;
    }
    CallmaskVocab *      v      = nullptr;
    const CallmaskStatus status = callmask_vocab_from_llama_vocab(vocab, &v);
    if (status != CALLMASK_STATUS_OK) {
        throw std::runtime_error(last_error(status));
    }
    vocab_ptr p(v, vocab_deleter());
    vocabs[vocab] = p;
    return p;
}

// Folds stream-parser events (a JSON array) into a chat message.
void fold_events(const char * events_json, common_chat_msg & msg) {
    const json events = json::parse(events_json);
    for (const auto & e : events) {
        const std::string type = e.at("type").get<std::string>();
        if (type == "text") {
            msg.content += e.at("text").get<std::string>();
        } else if (type == "reasoning") {
            msg.reasoning_content += e.at("text").get<std::string>();
        } else if (type == "call_start") {
            const size_t index = e.at("index").get<size_t>();
            if (msg.tool_calls.size() <= index) {
                msg.tool_calls.resize(index + 1);
            }
            msg.tool_calls[index].name = e.at("name").get<std::string>();
        } else if (type == "arguments") {
            const size_t index = e.at("index").get<size_t>();
            if (index < msg.tool_calls.size()) {
                msg.tool_calls[index].arguments += e.at("delta").get<std::string>();
            }
        } else if (type == "call_id") {
            const size_t index = e.at("index").get<size_t>();
            if (index < msg.tool_calls.size()) {
                msg.tool_calls[index].id = e.at("id").get<std::string>();
            }
        }
    }
}

}  // namespace

bool common_callmask_is_grammar(const std::string & grammar) {
    return grammar.compare(0, sizeof(CALLMASK_PREFIX) - 1, CALLMASK_PREFIX) == 0;
}

std::string common_callmask_resolve_dialect(const llama_vocab * vocab, const std::string & chat_template,
                                            const std::string & flag) {
    if (flag == "off" || flag.empty()) {
        return "";
    }
    json dialect;
    if (flag == "auto") {
        vocab_ptr v    = vocab_of(vocab);
        char *    name = nullptr;
        const CallmaskStatus status = callmask_dialect_detect(chat_template.c_str(), v.get(), &name);
        if (status == CALLMASK_STATUS_OK) {
            string_ptr owned(name);
            dialect["dialect"] = std::string(name);
        } else {
            // No built-in dialect: derive one from the template itself, where its layout is one
            // callmask knows.
            const std::string detect_error = last_error(status);
            char *            text         = nullptr;
            const CallmaskStatus derived   = chat_template.empty()
                                                 ? status
                                                 : callmask_dialect_derive(chat_template.c_str(), v.get(), &text);
            if (derived != CALLMASK_STATUS_OK) {
                LOG_WRN("%s: %s; and no dialect derives from it: %s; requests with tools use llama.cpp's "
                        "own tool-call grammars (pass --callmask-dialect NAME to use callmask)\n",
                        __func__, detect_error.c_str(), last_error(derived).c_str());
                return "";
            }
            string_ptr owned(text);
            dialect["dialect_text"] = std::string(text);
            LOG_WRN("%s: %s; using a dialect derived from it (callmask dialects --from-template):\n%s\n",
                    __func__, detect_error.c_str(), text);
        }
    } else {
        // a path (with a folder or the .gbnf extension) names a grammar file; anything else a
        // built-in dialect, as callmask's CLI reads --dialect
        const bool is_path = flag.find('/') != std::string::npos ||
                             (flag.size() > 5 && flag.compare(flag.size() - 5, 5, ".gbnf") == 0);
        std::ifstream file;
        if (is_path) {
            file.open(flag);
            if (!file) {
                throw std::runtime_error("--callmask-dialect " + flag + ": cannot read the grammar file");
            }
        }
        if (is_path) {
            std::stringstream text;
            text << file.rdbuf();
            dialect["dialect_text"] = text.str();
        } else {
            dialect["dialect"] = flag;
        }
    }
    // Compile it once with no tools, so a bad name or file stops the server at startup.
    json check = dialect;
    check["tools"]   = json::array();
    check["options"] = { { "tool_choice", "none" } };
    try {
        grammars().get(check);
    } catch (const std::exception & e) {
        throw std::runtime_error(std::string("--callmask-dialect ") + flag + ": " + e.what());
    }
    return dialect.dump();
}

std::string common_callmask_tools_grammar(const std::string & dialect, const std::string & tools_json,
                                          const std::string & tool_choice_json,
                                          const std::string & parallel_tool_calls_json) {
    json spec = json::parse(dialect);
    try {
        spec["tools"] = tools_json.empty() ? json::array() : json::parse(tools_json);
        json options  = json::object();
        if (!tool_choice_json.empty()) {
            options["tool_choice"] = json::parse(tool_choice_json);
        }
        if (!parallel_tool_calls_json.empty()) {
            options["parallel_tool_calls"] = json::parse(parallel_tool_calls_json);
        }
        spec["options"] = options;
    } catch (const json::exception & e) {
        throw std::invalid_argument(std::string("callmask: ") + e.what());
    }
    grammars().get(spec);  // compile now: errors fail the request before it is queued
    return std::string(CALLMASK_PREFIX) + " " + spec.dump();
}

std::string common_callmask_tools_prompt(const std::string & dialect, const std::string & chat_template,
                                         const std::string & tools_json) {
    if (callmask_template_uses_tools(chat_template.c_str())) {
        return "";
    }
    const json  spec = json::parse(dialect);
    std::string name = spec.contains("dialect") ? spec.at("dialect").get<std::string>() : std::string();
    char *      text = nullptr;
    const CallmaskStatus status = callmask_tools_instructions(name.empty() ? nullptr : name.c_str(), tools_json.c_str(), &text);
    if (status != CALLMASK_STATUS_OK) {
        throw_status(status);
    }
    return std::string(string_ptr(text).get());
}

std::string common_callmask_with_max_tokens(const std::string & grammar, int64_t max_tokens) {
    json spec = spec_of(grammar);
    if (max_tokens < 0) {
        spec.erase("max_tokens");
    } else {
        spec["max_tokens"] = max_tokens;
    }
    return std::string(CALLMASK_PREFIX) + " " + spec.dump();
}

llama_sampler * common_callmask_sampler_init(const llama_vocab * vocab, const std::string & grammar) {
    const json  spec = spec_of(grammar);
    grammar_ptr g    = grammars().get(spec);
    vocab_ptr   v    = vocab_of(vocab);
    llama_sampler * smpl = callmask_llama_sampler_init(g.get(), v.get());
    if (!smpl) {
        throw std::runtime_error(last_error(CALLMASK_STATUS_OTHER));
    }
    if (spec.contains("max_tokens")) {
        if (!spec.at("max_tokens").is_number_integer()) {
            llama_sampler_free(smpl);
            throw std::invalid_argument("%callmask: max_tokens must be an integer");
        }
        const CallmaskStatus status = callmask_llama_sampler_set_token_budget(smpl, spec.at("max_tokens").get<int64_t>());
        if (status != CALLMASK_STATUS_OK) {
            llama_sampler_free(smpl);
            throw std::runtime_error(last_error(status));
        }
    }
    return smpl;
}

common_chat_msg common_callmask_parse(const std::string & grammar, const std::string & text, bool is_partial) {
    common_chat_msg msg;
    msg.role = "assistant";
    try {
        grammar_ptr           g = grammars().get(spec_of(grammar));
        CallmaskStreamParser * p = nullptr;
        CallmaskStatus         status = callmask_stream_parser_new(g.get(), &p);
        if (status != CALLMASK_STATUS_OK) {
            throw std::runtime_error(last_error(status));
        }
        std::unique_ptr<CallmaskStreamParser, void (*)(CallmaskStreamParser *)> parser(p, callmask_stream_parser_free);
        char * events = nullptr;
        status        = callmask_stream_parser_push_text(p, text.data(), text.size(), &events);
        if (status != CALLMASK_STATUS_OK) {
            throw std::runtime_error(last_error(status));
        }
        fold_events(string_ptr(events).get(), msg);
        if (!is_partial) {
            status = callmask_stream_parser_finish(p, &events);
            if (status != CALLMASK_STATUS_OK) {
                throw std::runtime_error(last_error(status));
            }
            fold_events(string_ptr(events).get(), msg);
        }
    } catch (const std::exception & e) {
        LOG_WRN("%s: the output is not one of the grammar's (%s); returned as content\n", __func__, e.what());
        msg                   = common_chat_msg();
        msg.role              = "assistant";
        msg.content           = text;
    }
    return msg;
}
