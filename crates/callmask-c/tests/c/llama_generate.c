/* Constrained tool calls from a GGUF model in plain C: llama.cpp's own API for the model, the
 * context and the sampler chain, and callmask's sampler (callmask_llama_sampler_init) first in
 * that chain, followed by top-p, temperature and dist. Each generated output is parsed back into
 * OpenAI tool_calls with callmask_grammar_parse.
 *
 *   llama_generate MODEL.gguf TOOLS_JSON
 *
 * Exit 0 when every output finished, parsed, and made a call. */
#include "callmask.h"
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void quiet(enum ggml_log_level level, const char *text, void *user) {
  (void)user;
  if (level >= GGML_LOG_LEVEL_ERROR) fputs(text, stderr);
}

static char *read_file(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) { fprintf(stderr, "cannot open %s\n", path); exit(2); }
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  if (fread(buf, 1, (size_t)n, f) != (size_t)n) exit(2);
  buf[n] = 0;
  fclose(f);
  return buf;
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

#define CM(call)                                                                 \
  do {                                                                           \
    CallmaskStatus st_ = (call);                                                 \
    if (st_ != CALLMASK_STATUS_OK) {                                             \
      fprintf(stderr, "%s: %s: %s\n", #call, callmask_status_name(st_),          \
              callmask_last_error());                                            \
      exit(1);                                                                   \
    }                                                                            \
  } while (0)

enum { MAX_TOKENS = 160 };

/* One constrained generation, within `budget` tokens (end-of-generation included; negative: no
 * budget); returns 0 when the output finished within it, parsed and made a call. */
static int generate(struct llama_model *model, const CallmaskVocab *cvocab, const char *tools,
                    const char *dialect, const char *question, uint32_t seed, int budget) {
  const struct llama_vocab *vocab = llama_model_get_vocab(model);
  CallmaskGrammar *grammar = NULL;
  CallmaskCaches *caches = NULL; /* the vocabulary's own: what this model's compiles share */
  CM(callmask_vocab_caches(cvocab, &caches));
  CM(callmask_grammar_from_dialect(
      dialect, tools,
      "{\"tool_choice\": \"required\", \"parallel_calls\": false, \"max_text_chars\": 100}", caches,
      &grammar));
  callmask_caches_free(caches); /* the grammar keeps them */

  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 2048;
  cp.n_batch = 2048;
  /* One thread by default: ggml's threads spin at their barriers, which crawls on a busy
   * machine; CALLMASK_THREADS sets another count. */
  const char *th = getenv("CALLMASK_THREADS");
  cp.n_threads = cp.n_threads_batch = th ? atoi(th) : 1;
  struct llama_context *ctx = llama_init_from_model(model, cp);
  if (!ctx) { fprintf(stderr, "llama_init_from_model failed\n"); exit(1); }

  /* The chain: callmask's mask first, then llama.cpp's own samplers. */
  struct llama_sampler *chain = llama_sampler_chain_init(llama_sampler_chain_default_params());
  struct llama_sampler *mask = callmask_llama_sampler_init(grammar, cvocab);
  if (!mask) { fprintf(stderr, "callmask_llama_sampler_init: %s\n", callmask_last_error()); exit(1); }
  llama_sampler_chain_add(chain, mask);
  llama_sampler_chain_add(chain, llama_sampler_init_top_p(0.9f, 1));
  llama_sampler_chain_add(chain, llama_sampler_init_temp(0.7f));
  llama_sampler_chain_add(chain, llama_sampler_init_dist(seed));
  if (strcmp(llama_sampler_name(mask), "callmask") != 0) { fprintf(stderr, "sampler name\n"); exit(1); }
  if (budget >= 0) {
    CallmaskStatus too_small = callmask_llama_sampler_set_token_budget(mask, 1);
    if (too_small != CALLMASK_STATUS_BUDGET) { fprintf(stderr, "budget 1 not refused\n"); exit(1); }
    CM(callmask_llama_sampler_set_token_budget(mask, budget));
  }

  char prompt[16384];
  snprintf(prompt, sizeof prompt,
           "<start_of_turn>user\nYou can call these functions:\n%s\nAnswer with a function "
           "call.\n%s<end_of_turn>\n<start_of_turn>model\n",
           tools, question);
  llama_token toks[2048];
  int n_prompt = llama_tokenize(vocab, prompt, (int32_t)strlen(prompt), toks, 2048, true, true);
  if (n_prompt < 0) { fprintf(stderr, "prompt too long\n"); exit(1); }
  double t0 = now();
  if (llama_decode(ctx, llama_batch_get_one(toks, n_prompt))) { fprintf(stderr, "decode\n"); exit(1); }

  char text[8192];
  size_t len = 0;
  int n_gen = 0, finished = 0;
  double t1 = now();
  while (n_gen < MAX_TOKENS) {
    llama_token t = llama_sampler_sample(chain, ctx, -1); /* applies the chain, then accepts */
    CM(callmask_llama_sampler_check(mask));
    if (llama_vocab_is_eog(vocab, t)) { finished = 1; break; }
    const uint8_t *b;
    size_t l;
    CM(callmask_vocab_token_bytes(cvocab, (uint32_t)t, &b, &l));
    if (len + l >= sizeof text) break;
    memcpy(text + len, b, l);
    len += l;
    n_gen++;
    if (callmask_llama_sampler_is_finished(mask)) { finished = 1; break; }
    if (llama_decode(ctx, llama_batch_get_one(&t, 1))) { fprintf(stderr, "decode\n"); exit(1); }
  }
  double t2 = now();
  text[len] = 0;
  printf("--- %s, seed %u: %s\n%s\n", dialect, seed, question, text);
  printf("[%d prompt tokens in %.2f s, %d generated in %.2f s: %.1f tokens/s]\n", n_prompt,
         t1 - t0, n_gen, t2 - t1, n_gen / (t2 - t1 > 0 ? t2 - t1 : 1e-9));

  int ok = finished && (budget < 0 || n_gen + 1 <= budget);
  if (budget >= 0) printf("[budget %d tokens: %d + end-of-generation]\n", budget, n_gen);
  char *json = NULL;
  CallmaskStatus st = callmask_grammar_parse(grammar, text, len, &json);
  if (st == CALLMASK_STATUS_OK) {
    printf("%s\n", json);
    ok = ok && strstr(json, "\"tool_calls\":[{") != NULL;
    callmask_string_free(json);
  } else {
    printf("parse failed: %s\n", callmask_last_error());
    ok = 0;
  }

  /* The sampler behaves as a llama.cpp sampler: clone (a fork at the same position), reset. */
  struct llama_sampler *copy = llama_sampler_clone(mask);
  ok = ok && callmask_llama_sampler_is_finished(copy) == callmask_llama_sampler_is_finished(mask);
  llama_sampler_free(copy);
  llama_sampler_reset(chain);
  ok = ok && !callmask_llama_sampler_can_end(mask); /* a call is required: not at the start */

  llama_sampler_free(chain); /* frees the callmask sampler too */
  llama_free(ctx);
  callmask_grammar_free(grammar);
  if (!ok) fprintf(stderr, "FAIL: %s output did not finish, parse and call\n", dialect);
  return ok ? 0 : 1;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s MODEL.gguf TOOLS_JSON\n", argv[0]);
    return 2;
  }
  llama_log_set(quiet, NULL);
  llama_backend_init();
  char *tools = read_file(argv[2]);
  struct llama_model_params mp = llama_model_default_params();
  struct llama_model *model = llama_model_load_from_file(argv[1], mp);
  if (!model) { fprintf(stderr, "cannot load %s\n", argv[1]); return 1; }
  CallmaskVocab *cvocab = NULL;
  double t0 = now();
  CM(callmask_vocab_from_llama_vocab(llama_model_get_vocab(model), &cvocab));
  printf("vocabulary from llama_vocab: %zu tokens in %.3f s\n", callmask_vocab_size(cvocab),
         now() - t0);

  int fails = 0;
  fails += generate(model, cvocab, tools, "pythonic", "What's the weather like in Paris?", 1, -1);
  fails += generate(model, cvocab, tools, "functools", "What is the stock price of NVDA?", 2, 48);
  fails += generate(model, cvocab, tools, "empower", "Who is user 42?", 3, 36);

  callmask_vocab_free(cvocab);
  llama_model_free(model);
  llama_backend_free();
  free(tools);
  printf(fails ? "%d generation(s) failed\n" : "all generations finished, parsed and called\n",
         fails);
  return fails ? 1 : 0;
}
