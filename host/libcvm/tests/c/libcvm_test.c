/*
 * Loads libcvm_runtime.so with dlopen/dlsym, as the Cortex node does, and checks every model of
 * an expectations file (written by host/cli/tests/libcvm.rs from `cvm estimate` and `cvm run`):
 * sizes, gas, strings and output bytes; then the return-code class of each error family; then
 * 4 threads x 200 inferences over all models at once, with gas estimation interleaved, whose
 * output bytes must equal the single-threaded ones.
 *
 * usage: libcvm_test <libcvm_runtime.so> <expectations>
 * expectations, one model and input per line, space separated:
 *   symbol params input input_length output_length input_type_size output_type_size
 *   storage_size gas version method(- for none) output_hex
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cvm_runtime.h"

typedef unsigned long long u64;

static int (*load_model)(const char *, int, const char *, int, void **, int, int);
static int (*free_model)(void *);
static int (*inference)(void *, char *, int, char *);
static int (*get_version)(void *, char *);
static int (*get_method)(void *, char *);
static int (*get_input_length)(void *, u64 *);
static int (*get_output_length)(void *, u64 *);
static int (*get_input_type_size)(void *, u64 *);
static int (*get_output_type_size)(void *, u64 *);
static int (*get_storage_size)(void *, u64 *);
static int (*get_gas_from_model)(void *, u64 *);
static int (*get_gas_from_graph)(const char *, u64 *);

static int failures = 0;

#define CHECK(cond, ...)                                                 \
  do {                                                                   \
    if (!(cond)) {                                                       \
      fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);               \
      fprintf(stderr, __VA_ARGS__);                                      \
      fprintf(stderr, "\n");                                             \
      failures++;                                                        \
    }                                                                    \
  } while (0)

static void *symbol(void *lib, const char *name) {
  void *found = dlsym(lib, name);
  if (found == NULL) {
    fprintf(stderr, "missing symbol %s\n", name);
    exit(2);
  }
  return found;
}

/* The whole file, with a NUL after its bytes (not counted in *len). */
static char *read_file(const char *path, int *len) {
  FILE *file = fopen(path, "rb");
  if (file == NULL) {
    fprintf(stderr, "cannot open %s\n", path);
    exit(2);
  }
  fseek(file, 0, SEEK_END);
  long size = ftell(file);
  fseek(file, 0, SEEK_SET);
  char *data = malloc(size + 1);
  if (data == NULL || fread(data, 1, size, file) != (size_t)size) {
    fprintf(stderr, "cannot read %s\n", path);
    exit(2);
  }
  fclose(file);
  data[size] = 0;
  *len = (int)size;
  return data;
}

struct model {
  char params_path[1024];
  char *symbol;
  int symbol_len;
  void *net;
  char *input;
  int input_len;
  unsigned char *output;
  u64 output_len;
  u64 gas;
};

#define MAX_MODELS 16
static struct model models[MAX_MODELS];
static int n_models = 0;

static int hex_value(char c) {
  return c >= 'a' ? c - 'a' + 10 : c - '0';
}

static void check_model(const char *line) {
  char symbol_path[1024], params_path[1024], input_path[1024], version[64], method[64];
  static char hex[1 << 20];
  u64 in_len, out_len, in_ts, out_ts, storage, gas, value;
  if (sscanf(line, "%1023s %1023s %1023s %llu %llu %llu %llu %llu %llu %63s %63s %1048575s",
             symbol_path, params_path, input_path, &in_len, &out_len, &in_ts, &out_ts,
             &storage, &gas, version, method, hex) != 12) {
    fprintf(stderr, "bad expectations line: %s\n", line);
    exit(2);
  }
  if (strcmp(method, "-") == 0) method[0] = 0;
  struct model *m = &models[n_models++];
  strcpy(m->params_path, params_path);
  int params_len;
  char *params = read_file(params_path, &params_len);
  m->symbol = read_file(symbol_path, &m->symbol_len);
  m->input = read_file(input_path, &m->input_len);

  int status = load_model(m->symbol, m->symbol_len, params, params_len, &m->net, 0, 0);
  CHECK(status == SUCCEED, "%s: CVMAPILoadModel returned %d", symbol_path, status);
  free(params);
  if (status != SUCCEED) exit(1);

#define FIGURE(getter, expected)                                                  \
  value = 12345;                                                                   \
  status = getter(m->net, &value);                                                 \
  CHECK(status == SUCCEED && value == (expected), "%s: %s gave %d, %llu, not %llu", \
        symbol_path, #getter, status, value, (u64)(expected));
  FIGURE(get_input_length, in_len);
  FIGURE(get_output_length, out_len);
  FIGURE(get_input_type_size, in_ts);
  FIGURE(get_output_type_size, out_ts);
  FIGURE(get_storage_size, storage);
  FIGURE(get_gas_from_model, gas);
  value = 0;
  status = get_gas_from_graph(m->symbol, &value);
  CHECK(status == SUCCEED && value == gas, "%s: CVMAPIGetGasFromGraphFile gave %d, %llu",
        symbol_path, status, value);

  char text[34];
  CHECK(get_version(m->net, text) == SUCCEED && strcmp(text, version) == 0,
        "%s: version %s", symbol_path, text);
  CHECK(get_method(m->net, text) == SUCCEED && strcmp(text, method) == 0,
        "%s: method \"%s\"", symbol_path, text);

  m->gas = gas;
  m->output_len = out_len;
  m->output = malloc(out_len + 1);
  CHECK(strlen(hex) == 2 * out_len, "%s: expected output has %zu hex digits", input_path,
        strlen(hex));
  for (u64 i = 0; i < out_len; i++)
    m->output[i] = (unsigned char)(hex_value(hex[2 * i]) * 16 + hex_value(hex[2 * i + 1]));
  unsigned char *output = malloc(out_len + 1);
  status = inference(m->net, m->input, m->input_len, (char *)output);
  CHECK(status == SUCCEED && memcmp(output, m->output, out_len) == 0,
        "%s on %s: CVMAPIInference returned %d or other bytes", symbol_path, input_path, status);
  free(output);
}

static void check_error_classes(void) {
  struct model *m = &models[0];
  void *net = NULL;
  u64 value;
  char out[64];
  const char *broken = "{\"nodes\": [";
  /* The deployed runtime's classes: a JSON syntax error is a CHECK failure (runtime error),
     params cut inside their last array are a logic error. */
  int params_len;
  char *params = read_file(m->params_path, &params_len);
  CHECK(load_model(broken, (int)strlen(broken), params, params_len, &net, 0, 0) == ERROR_RUNTIME,
        "malformed graph JSON");
  CHECK(load_model(m->symbol, m->symbol_len, params, params_len - 1, &net, 0, 0) == ERROR_LOGIC,
        "malformed params");
  struct model *other = &models[1];
  CHECK(load_model(other->symbol, other->symbol_len, params, params_len, &net, 0, 0) ==
            ERROR_RUNTIME,
        "params of another graph (they name no variable of it: a LOG(FATAL))");
  CHECK(get_gas_from_graph(broken, &value) == ERROR_RUNTIME, "gas of malformed graph JSON");
  /* Wrong input lengths: logic errors. */
  CHECK(inference(m->net, m->input, m->input_len - 1, out) == ERROR_LOGIC, "short input");
  CHECK(inference(m->net, m->input, -1, out) == ERROR_LOGIC, "negative input length");
  /* A null graph or params with a length, or a negative length: the deployed runtime builds a
     std::string from them, which throws a logic_error. A null graph of length 0 is the empty
     string, a JSON error (CHECK: runtime error). */
  CHECK(load_model(NULL, 3, params, params_len, &net, 0, 0) == ERROR_LOGIC, "null graph");
  CHECK(load_model(m->symbol, -1, params, params_len, &net, 0, 0) == ERROR_LOGIC,
        "negative graph length");
  CHECK(load_model(m->symbol, m->symbol_len, NULL, 5, &net, 0, 0) == ERROR_LOGIC, "null params");
  CHECK(load_model(NULL, 0, params, params_len, &net, 0, 0) == ERROR_RUNTIME, "empty graph");
  CHECK(load_model(m->symbol, m->symbol_len, NULL, 0, &net, 0, 0) == ERROR_LOGIC,
        "empty params");
  CHECK(get_gas_from_graph(NULL, &value) == ERROR_LOGIC, "null graph for gas");
  /* Checked pointers and node-local failures: runtime errors. */
  CHECK(load_model(m->symbol, m->symbol_len, params, params_len, &net, 9, 0) == ERROR_RUNTIME,
        "unknown device type");

  CHECK(load_model(m->symbol, m->symbol_len, params, params_len, NULL, 0, 0) == ERROR_RUNTIME,
        "null handle pointer");
  CHECK(inference(NULL, m->input, m->input_len, out) == ERROR_RUNTIME, "null handle");
  CHECK(inference(m->net, m->input, m->input_len, NULL) == ERROR_RUNTIME, "null output");
  CHECK(get_input_length(m->net, NULL) == ERROR_RUNTIME, "null size");
  CHECK(get_version(NULL, out) == ERROR_RUNTIME, "null handle for the version");

  CHECK(free_model(NULL) == SUCCEED, "freeing NULL");
  /* Every device type of the deployed runtime loads, on the same engine. */
  for (int device_type = 0; device_type <= 2; device_type++) {
    net = NULL;
    CHECK(load_model(m->symbol, m->symbol_len, params, params_len, &net, device_type, 3) ==
              SUCCEED,
          "device type %d", device_type);
    CHECK(free_model(net) == SUCCEED, "free");
  }
  free(params);
}

#define THREADS 4
#define RUNS 200

static void *worker(void *arg) {
  long thread = (long)arg;
  long *mismatches = malloc(sizeof(long));
  *mismatches = 0;
  for (int run = 0; run < RUNS; run++) {
    struct model *m = &models[(run + thread) % n_models];
    unsigned char *output = malloc(m->output_len + 1);
    if (inference(m->net, m->input, m->input_len, (char *)output) != SUCCEED ||
        memcmp(output, m->output, m->output_len) != 0)
      (*mismatches)++;
    free(output);
    if (run % 4 == thread) {
      u64 gas = 0;
      if (get_gas_from_graph(m->symbol, &gas) != SUCCEED || gas != m->gas) (*mismatches)++;
    }
  }
  return mismatches;
}

int main(int argc, char **argv) {
  if (argc != 3) {
    fprintf(stderr, "usage: %s <libcvm_runtime.so> <expectations>\n", argv[0]);
    return 2;
  }
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 2;
  }
  load_model = symbol(lib, "CVMAPILoadModel");
  free_model = symbol(lib, "CVMAPIFreeModel");
  inference = symbol(lib, "CVMAPIInference");
  get_version = symbol(lib, "CVMAPIGetVersion");
  get_method = symbol(lib, "CVMAPIGetPreprocessMethod");
  get_input_length = symbol(lib, "CVMAPIGetInputLength");
  get_output_length = symbol(lib, "CVMAPIGetOutputLength");
  get_input_type_size = symbol(lib, "CVMAPIGetInputTypeSize");
  get_output_type_size = symbol(lib, "CVMAPIGetOutputTypeSize");
  get_storage_size = symbol(lib, "CVMAPIGetStorageSize");
  get_gas_from_model = symbol(lib, "CVMAPIGetGasFromModel");
  get_gas_from_graph = symbol(lib, "CVMAPIGetGasFromGraphFile");

  FILE *expectations = fopen(argv[2], "r");
  if (expectations == NULL) {
    fprintf(stderr, "cannot open %s\n", argv[2]);
    return 2;
  }
  static char line[1 << 21];
  while (fgets(line, sizeof line, expectations) != NULL && n_models < MAX_MODELS)
    if (line[0] != '\n') check_model(line);
  fclose(expectations);
  if (n_models < 3) {
    fprintf(stderr, "need at least 3 models, got %d\n", n_models);
    return 2;
  }
  check_error_classes();

  pthread_t threads[THREADS];
  for (long t = 0; t < THREADS; t++) pthread_create(&threads[t], NULL, worker, (void *)t);
  long mismatches = 0;
  for (int t = 0; t < THREADS; t++) {
    void *result;
    pthread_join(threads[t], &result);
    mismatches += *(long *)result;
    free(result);
  }
  CHECK(mismatches == 0, "%ld concurrent runs or gas estimates differ", mismatches);

  for (int i = 0; i < n_models; i++) CHECK(free_model(models[i].net) == SUCCEED, "free");
  printf("%d models, %d threads x %d runs: %s\n", n_models, THREADS, RUNS,
         failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
