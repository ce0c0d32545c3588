/*
 * libcvm_runtime.so: the CVM engine behind the C interface of the Cortex chain's inference
 * runtime (the CVMAPI functions of CortexFoundation/cvm-runtime, include/cvm/c_api.h), with the
 * same signatures, byte contract and return-code classes. docs/embedding.md documents each
 * function, its hazards and the error classes.
 *
 * Every function returns SUCCEED (0), ERROR_LOGIC (1: the model or the input is at fault, on
 * every node alike) or ERROR_RUNTIME (2: this node failed, the model was not judged). No
 * function aborts the process or lets a panic unwind into the caller. Every function may be
 * called from several threads at once, including on one model handle, except that a handle
 * must not be freed while another call uses it.
 */
#ifndef CVM_RUNTIME_H_
#define CVM_RUNTIME_H_

#ifdef __cplusplus
extern "C" {
#endif

enum { SUCCEED = 0, ERROR_LOGIC = 1, ERROR_RUNTIME = 2 };

/* Loads a model: graph_strlen bytes of graph JSON (the `symbol` file, need not end in NUL) and
 * param_strlen bytes of params. device_type 0 (CPU), 1 (GPU) or 2 (FORMAL) all run the same
 * engine; device_id is ignored. On success *net receives a handle for the calls below. */
int CVMAPILoadModel(const char *graph_json, int graph_strlen,
                    const char *param_bytes, int param_strlen,
                    void **net, int device_type, int device_id);

/* Frees a handle (NULL is a no-op). Not while another call uses it; not twice. */
int CVMAPIFreeModel(void *net);

/* Runs the model on input_len bytes (must equal CVMAPIGetInputLength; int8, or int32 little
 * endian) and writes exactly CVMAPIGetOutputLength bytes to output_data. */
int CVMAPIInference(void *net, char *input_data, int input_len, char *output_data);

/* Writes a NUL-terminated string of 9 characters (the buffer needs 10 bytes): "cvm_1.0.0" or
 * "cvm_1.1.0". */
int CVMAPIGetVersion(void *net, char *version);
/* Writes the graph's `postprocess` as the deployed runtime keeps it, NUL-terminated: "",
 * "argmax", "detection", or any other string of at most 31 characters the graph names (the
 * buffer needs 32 bytes; the Cortex node passes 34). */
int CVMAPIGetPreprocessMethod(void *net, char *method);

int CVMAPIGetInputLength(void *net, unsigned long long *size);
int CVMAPIGetOutputLength(void *net, unsigned long long *size);
int CVMAPIGetInputTypeSize(void *net, unsigned long long *size);
int CVMAPIGetOutputTypeSize(void *net, unsigned long long *size);

/* The deployed runtime's storage size in bytes, and the legacy gas of the model's graph
 * (ERROR_LOGIC when it exceeds the deployed limits, as for CVMAPIGetGasFromGraphFile). */
int CVMAPIGetStorageSize(void *net, unsigned long long *gas);
int CVMAPIGetGasFromModel(void *net, unsigned long long *gas);

/* The legacy gas of a graph JSON. graph_json MUST be NUL-terminated: it is read up to the
 * first NUL, there is no length argument. */
int CVMAPIGetGasFromGraphFile(const char *graph_json, unsigned long long *gas);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CVM_RUNTIME_H_ */
