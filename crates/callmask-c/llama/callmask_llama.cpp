// callmask's llama.cpp functions for programs that bring their own llama.cpp.
//
// libcallmask_c built with its default feature (`bundled-llama`) links llama-cpp-sys-2's
// llama.cpp and defines the `callmask_llama_*` functions and `callmask_vocab_from_llama_vocab`
// itself. A program that already links a llama.cpp (llama-server, an engine) cannot take that
// build: two llama.cpps in one program clash, and a `llama_sampler_i` laid out for one llama.h
// is wrong for another. It builds the library without the feature
// (`cargo build --release -p callmask-c --no-default-features`: no llama.cpp symbol in it) and
// compiles this file with its own llama.h; this file defines the same functions, with the same
// behaviour, on top of the generic matcher API of callmask.h.
//
//   c++ -std=c++17 -I crates/callmask-c/include -I <llama.cpp>/include
//       -I <llama.cpp>/ggml/include -c crates/callmask-c/llama/callmask_llama.cpp
//
// Nothing here throws into llama.cpp: failures inside the sampler's callbacks are kept and
// reported by callmask_llama_sampler_check, as in the bundled build.

#include "callmask.h"
#include "llama.h"

#include <cmath>
#include <cstdint>
#include <new>
#include <string>
#include <vector>

namespace {

// The state behind one callmask llama_sampler: its matcher, a bitmask row, the budget that
// `reset` restores, and the last failure inside a callback.
struct sampler_state {
    CallmaskMatcher *     matcher = nullptr;
    std::vector<uint32_t> mask;
    int64_t               budget  = -1;
    std::string           error;

    ~sampler_state() { callmask_matcher_free(matcher); }
};

sampler_state * state_of(const llama_sampler * smpl) {
    return static_cast<sampler_state *>(smpl->ctx);
}

void keep_error(sampler_state * st, const char * what) {
    const char * msg = callmask_matcher_last_error(st->matcher);
    st->error = std::string(what) + ": " + (msg ? msg : "unknown failure");
}

const char * sampler_name(const llama_sampler *) {
    return "callmask";
}

void sampler_accept(llama_sampler * smpl, llama_token token) {
    sampler_state * st = state_of(smpl);
    if (token < 0) {
        st->error = "negative token id " + std::to_string(token);
        return;
    }
    if (callmask_matcher_accept_token(st->matcher, (uint32_t) token) != CALLMASK_STATUS_OK) {
        keep_error(st, "accept");
    }
}

void sampler_apply(llama_sampler * smpl, llama_token_data_array * cur_p) {
    sampler_state * st = state_of(smpl);
    if (cur_p->size == 1) {
        // One candidate: llama.cpp's common sampler checking a token drawn without the mask
        // (rejection sampling); a refusal here is an answer, not a failure.
        const llama_token t = cur_p->data[0].id;
        if (t < 0 || !callmask_matcher_is_allowed(st->matcher, (uint32_t) t)) {
            cur_p->data[0].logit = -INFINITY;
        }
        return;
    }
    if (callmask_matcher_fill_mask(st->matcher, st->mask.data(), st->mask.size()) != CALLMASK_STATUS_OK) {
        keep_error(st, "mask");
        for (size_t i = 0; i < cur_p->size; i++) {
            cur_p->data[i].logit = -INFINITY;
        }
        return;
    }
    const size_t n_bits = st->mask.size() * 32;
    bool any = false;
    for (size_t i = 0; i < cur_p->size; i++) {
        const llama_token t = cur_p->data[i].id;
        const bool allowed = t >= 0 && (size_t) t < n_bits && ((st->mask[t / 32] >> (t % 32)) & 1u);
        if (!allowed) {
            cur_p->data[i].logit = -INFINITY;
        } else if (cur_p->data[i].logit > -INFINITY) {
            any = true;
        }
    }
    if (!any) {
        st->error = "no allowed token has a finite logit";
    }
}

void sampler_reset(llama_sampler * smpl) {
    sampler_state * st = state_of(smpl);
    st->error.clear();
    if (callmask_matcher_reset(st->matcher) != CALLMASK_STATUS_OK ||
        callmask_matcher_set_token_budget(st->matcher, st->budget) != CALLMASK_STATUS_OK) {
        keep_error(st, "reset");
    }
}

llama_sampler * make_sampler(sampler_state * st);

llama_sampler * sampler_clone(const llama_sampler * smpl) {
    const sampler_state * st = state_of(smpl);
    sampler_state * copy = new (std::nothrow) sampler_state();
    if (!copy) {
        return nullptr;
    }
    if (callmask_matcher_clone(st->matcher, &copy->matcher) != CALLMASK_STATUS_OK) {
        delete copy;
        return nullptr;
    }
    copy->mask   = st->mask;
    copy->budget = st->budget;
    copy->error  = st->error;
    return make_sampler(copy);
}

void sampler_free(llama_sampler * smpl) {
    delete state_of(smpl);
}

// The vtable: the members every llama.h since the sampler API has; the rest (backend sampling,
// copy_state in newer releases) stay NULL, which llama.cpp reads as "not supported".
llama_sampler_i * sampler_iface() {
    static llama_sampler_i iface = [] {
        llama_sampler_i i{};
        i.name   = sampler_name;
        i.accept = sampler_accept;
        i.apply  = sampler_apply;
        i.reset  = sampler_reset;
        i.clone  = sampler_clone;
        i.free   = sampler_free;
        return i;
    }();
    return &iface;
}

llama_sampler * make_sampler(sampler_state * st) {
    llama_sampler * s = llama_sampler_init(sampler_iface(), st);
    if (!s) {
        delete st;
        callmask_record_error(CALLMASK_STATUS_OTHER, "llama.cpp could not create a sampler");
    }
    return s;
}

sampler_state * ours(const llama_sampler * smpl) {
    return smpl && smpl->iface == sampler_iface() ? state_of(smpl) : nullptr;
}

// Token bytes as llama.cpp renders them: control tokens as their text, others decoded.
int64_t piece_of(void * user_data, uint32_t token, uint8_t * buf, size_t cap) {
    const auto * vocab = static_cast<const llama_vocab *>(user_data);
    const int32_t n = (int32_t) (cap > INT32_MAX ? INT32_MAX : cap);
    return llama_token_to_piece(vocab, (llama_token) token, reinterpret_cast<char *>(buf), n, 0, true);
}

}  // namespace

extern "C" {

CallmaskStatus callmask_vocab_from_llama_vocab(const llama_vocab * vocab, CallmaskVocab ** out) {
    if (!vocab || !out) {
        if (out) {
            *out = nullptr;
        }
        return callmask_record_error(CALLMASK_STATUS_NULL_ARGUMENT, vocab ? "out is NULL" : "vocab is NULL");
    }
    try {
        const int32_t n = llama_vocab_n_tokens(vocab);
        std::vector<uint32_t> special;
        std::vector<uint32_t> eos;
        const uint32_t special_bits = LLAMA_TOKEN_ATTR_CONTROL | LLAMA_TOKEN_ATTR_UNKNOWN | LLAMA_TOKEN_ATTR_UNUSED;
        for (int32_t i = 0; i < n; i++) {
            if (llama_vocab_is_control(vocab, i) || (llama_vocab_get_attr(vocab, i) & special_bits)) {
                special.push_back((uint32_t) i);
            }
            if (llama_vocab_is_eog(vocab, i)) {
                eos.push_back((uint32_t) i);
            }
        }
        return callmask_vocab_from_token_callback(
            (size_t) (n < 0 ? 0 : n), piece_of, const_cast<llama_vocab *>(vocab), special.data(), special.size(),
            eos.data(), eos.size(), out);
    } catch (...) {
        *out = nullptr;
        return callmask_record_error(CALLMASK_STATUS_OTHER, "out of memory reading a llama_vocab");
    }
}

llama_sampler * callmask_llama_sampler_init(const CallmaskGrammar * grammar, const CallmaskVocab * vocab) {
    sampler_state * st = new (std::nothrow) sampler_state();
    if (!st) {
        callmask_record_error(CALLMASK_STATUS_OTHER, "out of memory");
        return nullptr;
    }
    try {
        st->mask.assign(callmask_vocab_mask_words(vocab), 0);
    } catch (...) {
        delete st;
        callmask_record_error(CALLMASK_STATUS_OTHER, "out of memory");
        return nullptr;
    }
    if (callmask_matcher_new(grammar, vocab, &st->matcher) != CALLMASK_STATUS_OK) {
        delete st;
        return nullptr;
    }
    return make_sampler(st);
}

llama_sampler * callmask_llama_sampler_init_llama_vocab(const llama_vocab * vocab, const CallmaskGrammar * grammar) {
    CallmaskVocab * v = nullptr;
    if (callmask_vocab_from_llama_vocab(vocab, &v) != CALLMASK_STATUS_OK) {
        return nullptr;
    }
    llama_sampler * s = callmask_llama_sampler_init(grammar, v);
    callmask_vocab_free(v);  // the matcher keeps its own reference
    return s;
}

bool callmask_llama_sampler_is_finished(const llama_sampler * smpl) {
    const sampler_state * st = ours(smpl);
    return st && callmask_matcher_is_finished(st->matcher);
}

bool callmask_llama_sampler_can_end(const llama_sampler * smpl) {
    const sampler_state * st = ours(smpl);
    return st && callmask_matcher_can_end(st->matcher);
}

CallmaskStatus callmask_llama_sampler_check(llama_sampler * smpl) {
    sampler_state * st = ours(smpl);
    if (!st) {
        return smpl ? callmask_record_error(CALLMASK_STATUS_INVALID_ARGUMENT, "not a callmask sampler")
                    : callmask_record_error(CALLMASK_STATUS_NULL_ARGUMENT, "sampler is NULL");
    }
    if (st->error.empty()) {
        return CALLMASK_STATUS_OK;
    }
    const std::string message = "callmask sampler: " + st->error;
    st->error.clear();
    return callmask_record_error(CALLMASK_STATUS_SAMPLER, message.c_str());
}

CallmaskStatus callmask_llama_sampler_set_token_budget(llama_sampler * smpl, int64_t max_tokens) {
    sampler_state * st = ours(smpl);
    if (!st) {
        return smpl ? callmask_record_error(CALLMASK_STATUS_INVALID_ARGUMENT, "not a callmask sampler")
                    : callmask_record_error(CALLMASK_STATUS_NULL_ARGUMENT, "sampler is NULL");
    }
    const CallmaskStatus s = callmask_matcher_set_token_budget(st->matcher, max_tokens);
    if (s == CALLMASK_STATUS_OK) {
        st->budget = max_tokens < 0 ? -1 : max_tokens;
    }
    return s;
}

}  // extern "C"
