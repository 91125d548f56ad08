/* callmask's C API, exercised from C: compile a dialect, walk a valid output token by token
 * comparing allowed-token counts and verdicts with what the Rust API computed (the expected
 * file written by tests/c_programs.rs), rollback/clone/reset/validate, batch masks, whole and
 * streaming parse, a vocabulary rebuilt from token arrays, and every error path.
 *
 *   capi_test TOKENIZER_JSON TOOLS_JSON OUTPUT_TXT EXPECTED_TXT
 *
 * Exit 0 when every check passed; prints each failure. Run under valgrind by the Rust test. */
#include "callmask.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;
#define CHECK(cond, ...)                                                       \
  do {                                                                         \
    if (!(cond)) {                                                             \
      failures++;                                                              \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);          \
      fprintf(stderr, __VA_ARGS__);                                            \
      fprintf(stderr, "\n");                                                   \
    }                                                                          \
  } while (0)

/* A failing call: the expected status, a non-empty last error, and NULL in *out if given. */
#define EXPECT_STATUS(call, want)                                              \
  do {                                                                         \
    CallmaskStatus st_ = (call);                                               \
    const char *e_ = callmask_last_error();                                    \
    CHECK(st_ == (want), "%s returned %s, want %s (%s)", #call,                \
          callmask_status_name(st_), callmask_status_name(want),               \
          e_ ? e_ : "no message");                                             \
    CHECK(e_ != NULL && e_[0] != 0, "no error message after %s", #call);       \
    if (e_) printf("  %-24s %s\n", callmask_status_name(st_), e_);             \
  } while (0)

#define OK(call)                                                               \
  do {                                                                         \
    CallmaskStatus st_ = (call);                                               \
    if (st_ != CALLMASK_STATUS_OK) {                                           \
      fprintf(stderr, "FATAL %s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call,  \
              callmask_status_name(st_), callmask_last_error());               \
      exit(2);                                                                 \
    }                                                                          \
  } while (0)

static char *read_file(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    fprintf(stderr, "FATAL cannot open %s\n", path);
    exit(2);
  }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (fread(buf, 1, (size_t)n, f) != (size_t)n) exit(2);
  buf[n] = 0;
  fclose(f);
  if (len) *len = (size_t)n;
  return buf;
}

static size_t popcount(const uint32_t *w, size_t n) {
  size_t c = 0;
  for (size_t i = 0; i < n; i++) c += (size_t)__builtin_popcount(w[i]);
  return c;
}

static int bit(const uint32_t *w, uint32_t t) { return (w[t >> 5] >> (t & 31)) & 1; }

/* The expected file (see tests/c_programs.rs). */
typedef struct {
  size_t n;           /* tokens, the end-of-generation token last */
  uint32_t *tokens;
  size_t *count;      /* allowed tokens before token i (n + 1 entries: the last after all) */
  int *can_end, *finished;
  char *parse;        /* the Rust parse, as JSON */
  char **events;      /* stream events after each token but the last (n - 1), then finish */
} Expected;

static char *next_line(char **p) {
  char *s = *p, *nl = strchr(s, '\n');
  if (!nl) { fprintf(stderr, "FATAL truncated expected file\n"); exit(2); }
  *nl = 0;
  *p = nl + 1;
  return s;
}

static Expected read_expected(char *text) {
  Expected e;
  char *p = text;
  if (sscanf(next_line(&p), "tokens %zu", &e.n) != 1) exit(2);
  e.tokens = calloc(e.n, sizeof *e.tokens);
  e.count = calloc(e.n + 1, sizeof *e.count);
  e.can_end = calloc(e.n + 1, sizeof *e.can_end);
  e.finished = calloc(e.n + 1, sizeof *e.finished);
  e.events = calloc(e.n, sizeof *e.events);
  for (size_t i = 0; i <= e.n; i++) {
    unsigned tok;
    if (sscanf(next_line(&p), "step %u %zu %d %d", &tok, &e.count[i], &e.can_end[i],
               &e.finished[i]) != 4)
      exit(2);
    if (i < e.n) e.tokens[i] = tok;
  }
  e.parse = next_line(&p) + strlen("parse ");
  for (size_t i = 0; i < e.n; i++) e.events[i] = strchr(next_line(&p), ' ') + 1;
  return e;
}

/* Allowed-token count, can_end and finished of a matcher, checked against step i. */
static void check_step(CallmaskMatcher *m, const Expected *e, size_t i, uint32_t *mask,
                       size_t words, const char *who) {
  memset(mask, 0xAB, (words + 3) * sizeof *mask);
  OK(callmask_matcher_fill_mask(m, mask, words + 3));
  size_t c = popcount(mask, words);
  CHECK(c == e->count[i], "%s step %zu: %zu allowed tokens, Rust says %zu", who, i, c,
        e->count[i]);
  CHECK(mask[words] == 0 && mask[words + 1] == 0 && mask[words + 2] == 0,
        "%s step %zu: padding words not zeroed", who, i);
  if (i < e->n) {
    CHECK(bit(mask, e->tokens[i]), "%s step %zu: next token %u not in the mask", who, i,
          e->tokens[i]);
    CHECK(callmask_matcher_is_allowed(m, e->tokens[i]), "%s step %zu: is_allowed", who, i);
  }
  CHECK(callmask_matcher_can_end(m) == (bool)e->can_end[i], "%s step %zu: can_end", who, i);
  CHECK(callmask_matcher_is_finished(m) == (bool)e->finished[i], "%s step %zu: finished", who,
        i);
}

/* A token table behind a callback (llama_token_to_piece's convention), here another vocabulary;
 * `fail_at` makes one token fail. */
typedef struct {
  const CallmaskVocab *vocab;
  uint32_t fail_at;
} TableSource;

static int64_t token_bytes_from(void *user_data, uint32_t token, uint8_t *buf, size_t cap) {
  const TableSource *src = user_data;
  if (token == src->fail_at) return -1;
  const uint8_t *b;
  size_t l;
  if (callmask_vocab_token_bytes(src->vocab, token, &b, &l) != CALLMASK_STATUS_OK) return -1;
  if (l > cap) return -(int64_t)l;
  memcpy(buf, b, l);
  return (int64_t)l;
}

int main(int argc, char **argv) {
  if (argc != 5) {
    fprintf(stderr, "usage: %s TOKENIZER_JSON TOOLS_JSON OUTPUT_TXT EXPECTED_TXT\n", argv[0]);
    return 2;
  }
  char *tools = read_file(argv[2], NULL);
  size_t out_len;
  char *output = read_file(argv[3], &out_len);
  char *exp_text = read_file(argv[4], NULL);
  Expected e = read_expected(exp_text);
  printf("callmask %s, %zu tokens to walk\n", callmask_version(), e.n);

  /* Vocabulary from tokenizer.json, and the same table rebuilt from arrays. */
  CallmaskVocab *vocab = NULL;
  OK(callmask_vocab_from_tokenizer_json_file(argv[1], &vocab));
  size_t n_vocab = callmask_vocab_size(vocab), words = callmask_vocab_mask_words(vocab);
  CHECK(words == (n_vocab + 31) / 32, "mask words %zu for %zu tokens", words, n_vocab);
  uint32_t *lens = malloc(n_vocab * sizeof *lens);
  uint32_t *specials = malloc(n_vocab * sizeof *specials);
  size_t total = 0, n_special = 0;
  for (uint32_t t = 0; t < n_vocab; t++) {
    const uint8_t *b;
    size_t l;
    OK(callmask_vocab_token_bytes(vocab, t, &b, &l));
    lens[t] = (uint32_t)l;
    total += l;
    if (callmask_vocab_is_special(vocab, t)) specials[n_special++] = t;
  }
  uint8_t *bytes = malloc(total), *at = bytes;
  for (uint32_t t = 0; t < n_vocab; t++) {
    const uint8_t *b;
    size_t l;
    OK(callmask_vocab_token_bytes(vocab, t, &b, &l));
    memcpy(at, b, l);
    at += l;
  }
  const uint32_t *eos;
  size_t n_eos;
  OK(callmask_vocab_eos_tokens(vocab, &eos, &n_eos));
  CallmaskVocab *vocab2 = NULL;
  OK(callmask_vocab_from_tokens(n_vocab, lens, bytes, specials, n_special, eos, n_eos, &vocab2));
  CHECK(callmask_vocab_size(vocab2) == n_vocab, "rebuilt vocabulary size");
  TableSource src = {vocab, UINT32_MAX};
  CallmaskVocab *vocab3 = NULL;
  OK(callmask_vocab_from_token_callback(n_vocab, token_bytes_from, &src, specials, n_special, eos,
                                        n_eos, &vocab3));
  CHECK(callmask_vocab_size(vocab3) == n_vocab, "vocabulary from a callback: size");
  TableSource failing = {vocab, 5};
  CallmaskVocab *vocab_bad = (CallmaskVocab *)1;
  EXPECT_STATUS(callmask_vocab_from_token_callback(n_vocab, token_bytes_from, &failing, NULL, 0,
                                                   NULL, 0, &vocab_bad),
                CALLMASK_STATUS_VOCAB);
  CHECK(vocab_bad == NULL, "callback vocabulary out cleared on failure");
  EXPECT_STATUS(callmask_vocab_from_token_callback(n_vocab, NULL, NULL, NULL, 0, NULL, 0, &vocab_bad),
                CALLMASK_STATUS_NULL_ARGUMENT);
  printf("vocabulary: %zu tokens (%zu special, %zu end-of-generation), %zu mask words\n", n_vocab,
         n_special, n_eos, words);

  /* Compile once; matchers over both vocabularies. */
  CallmaskGrammar *g = NULL;
  OK(callmask_grammar_from_dialect("pythonic", tools, "{\"tool_choice\": \"auto\"}", NULL, &g));
  CallmaskMatcher *m = NULL, *m2 = NULL, *m3 = NULL;
  OK(callmask_matcher_new(g, vocab, &m));
  OK(callmask_matcher_new(g, vocab2, &m2));
  OK(callmask_matcher_new(g, vocab3, &m3));
  uint32_t *mask = malloc((words + 3) * sizeof *mask);
  uint32_t *mask2 = malloc((words + 3) * sizeof *mask2);
  size_t half = e.n / 2;
  CallmaskMatcher *at_half = NULL;
  for (size_t i = 0; i < e.n; i++) {
    check_step(m, &e, i, mask, words, "matcher");
    check_step(m2, &e, i, mask2, words, "arrays vocabulary");
    CHECK(memcmp(mask, mask2, words * sizeof *mask) == 0, "step %zu: masks differ", i);
    check_step(m3, &e, i, mask2, words, "callback vocabulary");
    CHECK(memcmp(mask, mask2, words * sizeof *mask) == 0, "step %zu: callback masks differ", i);
    if (i == half) OK(callmask_matcher_clone(m, &at_half));
    OK(callmask_matcher_accept_token(m, e.tokens[i]));
    OK(callmask_matcher_accept_token(m2, e.tokens[i]));
    OK(callmask_matcher_accept_token(m3, e.tokens[i]));
  }

  /* Token budgets: refused where no complete output fits, counted down per token. */
  CallmaskMatcher *mb = NULL;
  OK(callmask_matcher_new(g, vocab, &mb));
  CHECK(callmask_matcher_tokens_left(mb) == -1, "no budget at first");
  EXPECT_STATUS(callmask_matcher_set_token_budget(mb, 0), CALLMASK_STATUS_BUDGET);
  CHECK(callmask_matcher_tokens_left(mb) == -1, "a refused budget changes nothing");
  OK(callmask_matcher_set_token_budget(mb, 100));
  CHECK(callmask_matcher_tokens_left(mb) == 100, "budget 100");
  OK(callmask_matcher_accept_token(mb, e.tokens[0]));
  CHECK(callmask_matcher_tokens_left(mb) == 99, "one token spent: %lld",
        (long long)callmask_matcher_tokens_left(mb));
  OK(callmask_matcher_set_token_budget(mb, -1));
  CHECK(callmask_matcher_tokens_left(mb) == -1, "budget removed");
  CHECK(callmask_matcher_tokens_left(NULL) == -1, "NULL matcher: no budget");
  EXPECT_STATUS(callmask_matcher_set_token_budget(NULL, 5), CALLMASK_STATUS_NULL_ARGUMENT);
  callmask_matcher_free(mb);

  /* Dialect detection from a chat template. */
  char *dialect = NULL;
  OK(callmask_dialect_detect("{%- if tools %}<tool_call>{\"name\": ...}</tool_call>{% endif %}", vocab,
                             &dialect));
  CHECK(dialect && strcmp(dialect, "hermes") == 0, "detected %s", dialect ? dialect : "(null)");
  callmask_string_free(dialect);
  OK(callmask_dialect_detect(NULL, vocab, &dialect)); /* no template: Llama 3.1's <|python_tag|> */
  CHECK(dialect && strcmp(dialect, "llama31_json") == 0, "detected %s without a template",
        dialect ? dialect : "(null)");
  callmask_string_free(dialect);
  EXPECT_STATUS(callmask_dialect_detect("{{ bos_token }}{% for m in messages %}{% endfor %}", vocab,
                                        &dialect),
                CALLMASK_STATUS_DIALECT);
  CHECK(dialect == NULL, "detect out cleared on failure");

  /* A dialect derived from a template no built-in dialect detects: it compiles and parses. */
  const char *fn_template =
      "{% for m in messages %}{% if m.tool_calls %}{% for c in m.tool_calls %}<fn_call>{{ c.function.name }}\n"
      "{{ c.function.arguments | tojson }}</fn_call>{% endfor %}{% else %}{{ m.content }}{% endif %}"
      "{% endfor %}";
  char *derived = NULL;
  OK(callmask_dialect_derive(fn_template, vocab, &derived));
  CHECK(derived && strstr(derived, "<fn_call>") != NULL, "derived: %s", derived ? derived : "(null)");
  CallmaskGrammar *dg = NULL;
  OK(callmask_grammar_from_dialect_text(derived, "[{\"name\": \"f\", \"parameters\": {\"type\": \"object\", "
                                        "\"properties\": {\"a\": {\"type\": \"integer\"}}}}]",
                                        NULL, NULL, &dg));
  callmask_grammar_free(dg);
  callmask_string_free(derived);
  EXPECT_STATUS(callmask_dialect_derive("{% for m in messages %}{{ m.content }}{% endfor %}", NULL, &derived),
                CALLMASK_STATUS_DIALECT);
  CHECK(derived == NULL, "derive out cleared on failure");
  EXPECT_STATUS(callmask_dialect_derive(NULL, NULL, &derived), CALLMASK_STATUS_NULL_ARGUMENT);

  /* Glue code reports its own failures through the same last error. */
  CHECK(callmask_record_error(CALLMASK_STATUS_SAMPLER, "glue failed") == CALLMASK_STATUS_SAMPLER,
        "record_error returns its status");
  CHECK(strcmp(callmask_last_error(), "glue failed") == 0, "recorded: %s", callmask_last_error());
  callmask_record_error(CALLMASK_STATUS_BUDGET, NULL);
  CHECK(strcmp(callmask_last_error(), "budget") == 0, "recorded without a message: %s",
        callmask_last_error());
  check_step(m, &e, e.n, mask, words, "matcher");
  CHECK(popcount(mask, words) == 0, "finished: empty mask");
  printf("walk: %zu tokens, allowed counts %zu, %zu, ... agree with Rust\n", e.n, e.count[0],
         e.count[1]);

  /* Clone, rollback, accept_tokens, validate, reset. */
  CallmaskMatcher *fork = NULL;
  OK(callmask_matcher_clone(at_half, &fork));
  OK(callmask_matcher_accept_token(fork, e.tokens[half]));
  check_step(at_half, &e, half, mask, words, "clone source after fork moved");
  check_step(fork, &e, half + 1, mask, words, "fork");
  OK(callmask_matcher_rollback(fork, 1));
  check_step(fork, &e, half, mask, words, "fork rolled back");
  size_t n_acc = 99;
  OK(callmask_matcher_accept_tokens(fork, e.tokens + half, e.n - half, &n_acc));
  CHECK(n_acc == e.n - half, "accept_tokens accepted %zu", n_acc);
  check_step(fork, &e, e.n, mask, words, "fork at the end");
  OK(callmask_matcher_rollback(fork, 3));
  check_step(fork, &e, e.n - 3, mask, words, "rollback 3");
  size_t n_valid = 0;
  OK(callmask_matcher_validate_tokens(at_half, e.tokens + half, e.n - half, &n_valid));
  CHECK(n_valid == e.n - half, "validate_tokens: %zu of %zu", n_valid, e.n - half);
  CallmaskMatcher *probe = NULL;
  OK(callmask_matcher_clone(at_half, &probe));
  OK(callmask_matcher_accept_tokens(probe, e.tokens + half, 2, NULL));
  OK(callmask_matcher_fill_mask(probe, mask, words));
  uint32_t refused = 0;
  while (bit(mask, refused)) refused++;
  uint32_t draft[4] = {e.tokens[half], e.tokens[half + 1], refused, e.tokens[half + 2]};
  OK(callmask_matcher_validate_tokens(at_half, draft, 4, &n_valid));
  CHECK(n_valid == 2, "validate_tokens on a draft refused at 2: %zu", n_valid);
  check_step(at_half, &e, half, mask, words, "validate changes nothing");
  OK(callmask_matcher_reset(m));
  check_step(m, &e, 0, mask, words, "reset");

  /* Batch masks: rows equal single fills; a NULL matcher leaves its row alone. */
  CallmaskMatcher *batch[3] = {m, NULL, at_half};
  uint32_t *rows = malloc(3 * words * sizeof *rows);
  memset(rows, 0x5A, 3 * words * sizeof *rows);
  OK(callmask_fill_masks(batch, 3, rows, words));
  OK(callmask_matcher_fill_mask(m, mask, words));
  CHECK(memcmp(rows, mask, words * sizeof *mask) == 0, "batch row 0");
  CHECK(rows[words] == 0x5A5A5A5Au, "batch row 1 untouched");
  OK(callmask_matcher_fill_mask(at_half, mask, words));
  CHECK(memcmp(rows + 2 * words, mask, words * sizeof *mask) == 0, "batch row 2");
  CallmaskMatcher *dup[2] = {m, m};
  EXPECT_STATUS(callmask_fill_masks(dup, 2, rows, words), CALLMASK_STATUS_INVALID_ARGUMENT);

  /* Parse, whole and streaming. */
  char *json = NULL;
  OK(callmask_grammar_parse(g, output, out_len, &json));
  CHECK(strcmp(json, e.parse) == 0, "parse:\n  C:    %s\n  Rust: %s", json, e.parse);
  printf("parse: %s\n", json);
  callmask_string_free(json);
  CallmaskStreamParser *sp = NULL;
  OK(callmask_stream_parser_new(g, &sp));
  for (size_t i = 0; i + 1 < e.n; i++) {
    char *ev = NULL;
    OK(callmask_stream_parser_push_token(sp, vocab, e.tokens[i], &ev));
    CHECK(strcmp(ev, e.events[i]) == 0, "events after token %zu:\n  C:    %s\n  Rust: %s", i, ev,
          e.events[i]);
    callmask_string_free(ev);
  }
  char *ev = NULL;
  OK(callmask_stream_parser_finish(sp, &ev));
  CHECK(strcmp(ev, e.events[e.n - 1]) == 0, "finish events:\n  C:    %s\n  Rust: %s", ev,
        e.events[e.n - 1]);
  callmask_string_free(ev);
  callmask_stream_parser_free(sp);

  /* A JSON Schema grammar on the rebuilt vocabulary. */
  CallmaskGrammar *sg = NULL;
  OK(callmask_grammar_from_json_schema(
      "{\"type\":\"object\",\"properties\":{\"n\":{\"type\":\"integer\",\"minimum\":1}},"
      "\"required\":[\"n\"]}",
      "{\"max_whitespace\": 0}", NULL, &sg));
  OK(callmask_grammar_parse(sg, "{\"n\":12}", 8, &json)); /* a schema grammar validates */
  callmask_string_free(json);
  EXPECT_STATUS(callmask_grammar_parse(sg, "{\"n\":0}", 7, &json), CALLMASK_STATUS_PARSE);
  EXPECT_STATUS(callmask_grammar_parse(sg, "{\"n\": 1}", 8, &json), CALLMASK_STATUS_PARSE);

  /* Caches: the caller's own, filled by the compiles given them, bounded, emptied; a
     zero-byte one keeps nothing; a vocabulary's own; none without them. */
  CallmaskCaches *own = NULL;
  OK(callmask_caches_new(CALLMASK_DEFAULT_CACHE_BYTES, &own));
  const char *email = "{\"type\": \"string\", \"format\": \"email\"}";
  CallmaskGrammar *cached = NULL;
  OK(callmask_grammar_from_json_schema(email, NULL, own, &cached));
  CallmaskCacheStats st;
  OK(callmask_caches_stats(own, &st));
  CHECK(st.entries > 0 && st.bytes > 0 && st.bytes <= st.max_bytes, "caches filled: %zu entries",
        st.entries);
  CHECK(st.max_bytes == CALLMASK_DEFAULT_CACHE_BYTES, "cache size %zu", st.max_bytes);
  uint64_t hits = st.hits;
  callmask_grammar_free(cached);
  OK(callmask_grammar_from_json_schema(email, NULL, own, &cached));
  OK(callmask_caches_stats(own, &st));
  CHECK(st.hits > hits, "a second compile finds its lexemes (%llu hits)",
        (unsigned long long)st.hits);
  OK(callmask_caches_clear(own));
  OK(callmask_caches_stats(own, &st));
  CHECK(st.entries == 0 && st.bytes == 0, "caches cleared");
  callmask_caches_free(own); /* the grammar keeps them alive */
  callmask_grammar_free(cached);
  CallmaskCaches *none_kept = NULL;
  OK(callmask_caches_new(0, &none_kept));
  CallmaskGrammar *uncached = NULL;
  OK(callmask_grammar_from_json_schema("{\"type\": \"string\", \"maxLength\": 5}", NULL,
                                       none_kept, &uncached));
  OK(callmask_caches_stats(none_kept, &st));
  CHECK(st.max_bytes == 0 && st.entries == 0, "a zero-byte cache keeps nothing");
  callmask_grammar_free(uncached);
  callmask_caches_free(none_kept);
  CallmaskCaches *of_vocab = NULL;
  OK(callmask_vocab_caches(vocab, &of_vocab));
  OK(callmask_caches_stats(of_vocab, &st));
  CHECK(st.max_bytes == CALLMASK_DEFAULT_CACHE_BYTES, "a vocabulary's caches: %zu bytes",
        st.max_bytes);
  callmask_caches_free(of_vocab);
  callmask_caches_free(NULL);
  EXPECT_STATUS(callmask_caches_stats(NULL, &st), CALLMASK_STATUS_NULL_ARGUMENT);
  EXPECT_STATUS(callmask_caches_clear(NULL), CALLMASK_STATUS_NULL_ARGUMENT);
  EXPECT_STATUS(callmask_vocab_caches(NULL, &of_vocab), CALLMASK_STATUS_NULL_ARGUMENT);
  EXPECT_STATUS(callmask_caches_new(1, NULL), CALLMASK_STATUS_NULL_ARGUMENT);

  /* Error paths: a status and a message each, never a crash. */
  printf("error paths:\n");
  CallmaskGrammar *bad = (CallmaskGrammar *)1;
  EXPECT_STATUS(callmask_grammar_from_dialect("pythonic", "[{\"name\": ", NULL, NULL, &bad),
                CALLMASK_STATUS_JSON);
  CHECK(bad == NULL, "out pointer cleared on failure");
  EXPECT_STATUS(callmask_grammar_from_dialect("no_such_dialect", tools, NULL, NULL, &bad),
                CALLMASK_STATUS_DIALECT);
  EXPECT_STATUS(callmask_grammar_from_dialect("pythonic", tools, "{\"tool_chioce\": \"auto\"}", NULL,
                                              &bad),
                CALLMASK_STATUS_INVALID_OPTIONS);
  EXPECT_STATUS(callmask_grammar_from_dialect("pythonic", tools, "{\"parallel_calls\": 3}", NULL, &bad),
                CALLMASK_STATUS_INVALID_OPTIONS);
  EXPECT_STATUS(callmask_grammar_from_dialect("pythonic", "{\"tools\": 7}", NULL, NULL, &bad),
                CALLMASK_STATUS_INVALID_TOOLS);
  EXPECT_STATUS(callmask_grammar_from_dialect_text("root ::= (", tools, NULL, NULL, &bad),
                CALLMASK_STATUS_DIALECT);
  EXPECT_STATUS(callmask_grammar_from_json_schema("{\"type\": \"array\", \"uniqueItems\": true}",
                                                  NULL, NULL, &bad),
                CALLMASK_STATUS_SCHEMA);
  EXPECT_STATUS(callmask_grammar_from_json_schema("{\"type\": \"string\"}",
                                                  "{\"compile\": {}}", NULL, &bad),
                CALLMASK_STATUS_INVALID_OPTIONS);
  EXPECT_STATUS(callmask_grammar_from_dialect(NULL, tools, NULL, NULL, &bad),
                CALLMASK_STATUS_NULL_ARGUMENT);
  EXPECT_STATUS(callmask_grammar_from_dialect("pythonic", tools, NULL, NULL, NULL),
                CALLMASK_STATUS_NULL_ARGUMENT);
  CallmaskGrammar *needs_special = NULL;
  OK(callmask_grammar_from_dialect_text("root ::= <|no_such_token|> \"x\"", tools, NULL, NULL,
                                        &needs_special));
  CallmaskMatcher *none = (CallmaskMatcher *)1;
  EXPECT_STATUS(callmask_matcher_new(needs_special, vocab, &none),
                CALLMASK_STATUS_MISSING_SPECIAL_TOKEN);
  CHECK(none == NULL, "matcher out cleared");
  EXPECT_STATUS(callmask_matcher_new(NULL, vocab, &none), CALLMASK_STATUS_NULL_ARGUMENT);

  CallmaskVocab *bad_vocab = NULL;
  EXPECT_STATUS(callmask_vocab_from_tokenizer_json_file("/no/such/tokenizer.json", &bad_vocab),
                CALLMASK_STATUS_IO);
  EXPECT_STATUS(callmask_vocab_from_tokenizer_json("{\"model\": ", 10, &bad_vocab),
                CALLMASK_STATUS_JSON);
  uint32_t tiny_lens[3] = {1, 1, 0};
  uint32_t bad_eos = 7, tiny_special = 2;
  EXPECT_STATUS(callmask_vocab_from_tokens(3, tiny_lens, (const uint8_t *)"ab", &tiny_special, 1,
                                           &bad_eos, 1, &bad_vocab),
                CALLMASK_STATUS_VOCAB);
  EXPECT_STATUS(callmask_vocab_from_tokens(3, tiny_lens, (const uint8_t *)"ab", NULL, 0, NULL, 0,
                                           &bad_vocab),
                CALLMASK_STATUS_VOCAB);
  EXPECT_STATUS(callmask_vocab_from_gguf("/no/such/model.gguf", &bad_vocab), CALLMASK_STATUS_IO);
  const uint8_t *tb;
  size_t tl;
  EXPECT_STATUS(callmask_vocab_token_bytes(vocab, (uint32_t)n_vocab, &tb, &tl),
                CALLMASK_STATUS_TOKEN_OUT_OF_VOCABULARY);

  /* Matcher errors: the matcher is unchanged and keeps the message. */
  uint32_t forbidden = 0;
  OK(callmask_matcher_fill_mask(m, mask, words));
  while (bit(mask, forbidden)) forbidden++;
  EXPECT_STATUS(callmask_matcher_accept_token(m, forbidden), CALLMASK_STATUS_TOKEN_FORBIDDEN);
  const char *merr = callmask_matcher_last_error(m);
  CHECK(merr != NULL && strstr(merr, "not allowed") != NULL, "matcher message: %s",
        merr ? merr : "NULL");
  check_step(m, &e, 0, mask, words, "after a refused token");
  EXPECT_STATUS(callmask_matcher_accept_token(m, (uint32_t)n_vocab + 5),
                CALLMASK_STATUS_TOKEN_OUT_OF_VOCABULARY);
  uint32_t two[2] = {e.tokens[0], forbidden};
  n_acc = 99;
  EXPECT_STATUS(callmask_matcher_accept_tokens(m, two, 2, &n_acc),
                CALLMASK_STATUS_TOKEN_FORBIDDEN);
  CHECK(n_acc == 1, "accept_tokens stopped after %zu", n_acc);
  EXPECT_STATUS(callmask_matcher_rollback(m, 2), CALLMASK_STATUS_ROLLBACK);
  OK(callmask_matcher_rollback(m, 1));
  EXPECT_STATUS(callmask_matcher_fill_mask(m, mask, words - 1), CALLMASK_STATUS_BITMASK_SIZE);
  EXPECT_STATUS(callmask_matcher_fill_mask(m, NULL, words), CALLMASK_STATUS_NULL_ARGUMENT);
  EXPECT_STATUS(callmask_matcher_accept_token(NULL, 1), CALLMASK_STATUS_NULL_ARGUMENT);
  CHECK(!callmask_matcher_can_end(NULL) && !callmask_matcher_is_finished(NULL) &&
            !callmask_matcher_is_allowed(NULL, 0) && callmask_vocab_size(NULL) == 0,
        "NULL queries answer false/0");

  /* Parse errors. */
  json = (char *)1;
  EXPECT_STATUS(callmask_grammar_parse(g, "[get_time_utc(", 14, &json), CALLMASK_STATUS_PARSE);
  CHECK(json == NULL, "parse out cleared");
  EXPECT_STATUS(callmask_grammar_parse(g, "[no_such_function()]", 20, &json),
                CALLMASK_STATUS_PARSE);
  EXPECT_STATUS(callmask_grammar_parse(g, "\xff\xfe", 2, &json), CALLMASK_STATUS_INVALID_ARGUMENT);
  EXPECT_STATUS(callmask_grammar_parse(g, NULL, 3, &json), CALLMASK_STATUS_NULL_ARGUMENT);
  OK(callmask_stream_parser_new(g, &sp));
  EXPECT_STATUS(callmask_stream_parser_push_text(sp, "[get_weather_of_mars(", 21, &ev),
                CALLMASK_STATUS_PARSE);
  CHECK(callmask_stream_parser_last_error(sp) != NULL, "parser keeps its error");
  EXPECT_STATUS(callmask_stream_parser_finish(sp, &ev), CALLMASK_STATUS_PARSE);
  callmask_stream_parser_free(sp);

  /* llama.cpp sampler entry points on bad input. */
  CHECK(callmask_llama_sampler_init(NULL, vocab) == NULL, "sampler from a NULL grammar");
  CHECK(callmask_llama_sampler_init_llama_vocab(NULL, g) == NULL, "sampler from a NULL vocab");
  EXPECT_STATUS(callmask_llama_sampler_check(NULL), CALLMASK_STATUS_NULL_ARGUMENT);
  CHECK(!callmask_llama_sampler_is_finished(NULL), "NULL sampler is not finished");

  /* Free in an order other than creation: handles keep what they need. */
  callmask_grammar_free(g);
  callmask_vocab_free(vocab);
  check_step(at_half, &e, half, mask, words, "matcher outlives its grammar and vocabulary");
  callmask_matcher_free(m);
  callmask_matcher_free(m2);
  callmask_matcher_free(m3);
  callmask_matcher_free(at_half);
  callmask_matcher_free(fork);
  callmask_matcher_free(probe);
  callmask_grammar_free(sg);
  callmask_grammar_free(needs_special);
  callmask_vocab_free(vocab2);
  callmask_vocab_free(vocab3);
  callmask_vocab_free(NULL);
  callmask_string_free(NULL);
  free(rows);
  free(mask);
  free(mask2);
  free(lens);
  free(specials);
  free(bytes);
  free(e.tokens);
  free(e.count);
  free(e.can_end);
  free(e.finished);
  free(e.events);
  free(tools);
  free(output);
  free(exp_text);
  if (failures) {
    fprintf(stderr, "%d check(s) failed\n", failures);
    return 1;
  }
  printf("all C API checks passed\n");
  return 0;
}
