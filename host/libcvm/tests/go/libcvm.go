// Package libcvm loads libcvm_runtime.so the way the Cortex node's kernel/libcvm.go does: cgo,
// dlopen with RTLD_NOW|RTLD_GLOBAL, and one dlsym'd C trampoline per CVMAPI function.
package libcvm

/*
#cgo LDFLAGS: -ldl
#cgo CFLAGS: -I${SRCDIR}/../../include -O2 -Wall
#include <dlfcn.h>
#include <stdlib.h>
#include "cvm_runtime.h"

static void* open_library(const char* path, char** err) {
	void* lib = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
	if (lib == NULL) *err = dlerror();
	return lib;
}

typedef unsigned long long u64;

typedef int (*load_fn)(const char*, int, const char*, int, void**, int, int);
typedef int (*free_fn)(void*);
typedef int (*inference_fn)(void*, char*, int, char*);
typedef int (*string_fn)(void*, char*);
typedef int (*size_fn)(void*, u64*);
typedef int (*graph_gas_fn)(const char*, u64*);

#define FIND(lib, name, type) type f = (type)dlsym(lib, name); if (f == NULL) return ERROR_RUNTIME;

static int call_load(void* lib, const char* json, int json_len, const char* params, int params_len,
                     void** net, int device_type, int device_id) {
	FIND(lib, "CVMAPILoadModel", load_fn);
	return f(json, json_len, params, params_len, net, device_type, device_id);
}
static int call_free(void* lib, void* net) {
	FIND(lib, "CVMAPIFreeModel", free_fn);
	return f(net);
}
static int call_inference(void* lib, void* net, char* input, int input_len, char* output) {
	FIND(lib, "CVMAPIInference", inference_fn);
	return f(net, input, input_len, output);
}
static int call_string(void* lib, const char* name, void* net, char* out) {
	FIND(lib, name, string_fn);
	return f(net, out);
}
static int call_size(void* lib, const char* name, void* net, u64* out) {
	FIND(lib, name, size_fn);
	return f(net, out);
}
static int call_graph_gas(void* lib, const char* json, u64* gas) {
	FIND(lib, "CVMAPIGetGasFromGraphFile", graph_gas_fn);
	return f(json, gas);
}
*/
import "C"
import (
	"errors"
	"unsafe"
)

// The return codes.
var (
	Succeed      = int(C.SUCCEED)
	ErrorLogic   = int(C.ERROR_LOGIC)
	ErrorRuntime = int(C.ERROR_RUNTIME)
)

// Lib is an opened libcvm_runtime.so.
type Lib struct{ handle unsafe.Pointer }

// Open dlopens the library at an absolute path.
func Open(path string) (*Lib, error) {
	cPath := C.CString(path)
	defer C.free(unsafe.Pointer(cPath))
	var cErr *C.char
	handle := C.open_library(cPath, &cErr)
	if handle == nil {
		return nil, errors.New(C.GoString(cErr))
	}
	return &Lib{handle: handle}, nil
}

// LoadModel loads a graph JSON and its params.
func (l *Lib) LoadModel(graph, params []byte, deviceType, deviceID int) (unsafe.Pointer, int) {
	var net unsafe.Pointer
	status := C.call_load(l.handle, (*C.char)(unsafe.Pointer(&graph[0])), C.int(len(graph)),
		(*C.char)(unsafe.Pointer(&params[0])), C.int(len(params)), &net,
		C.int(deviceType), C.int(deviceID))
	return net, int(status)
}

// FreeModel frees a handle.
func (l *Lib) FreeModel(net unsafe.Pointer) int { return int(C.call_free(l.handle, net)) }

// Inference runs the model: the output buffer is sized by CVMAPIGetOutputLength first.
func (l *Lib) Inference(net unsafe.Pointer, input []byte) ([]byte, int) {
	size, status := l.Size("CVMAPIGetOutputLength", net)
	if status != Succeed {
		return nil, status
	}
	output := make([]byte, size+1)
	status = int(C.call_inference(l.handle, net, (*C.char)(unsafe.Pointer(&input[0])),
		C.int(len(input)), (*C.char)(unsafe.Pointer(&output[0]))))
	return output[:size], status
}

// String calls CVMAPIGetVersion or CVMAPIGetPreprocessMethod with a 34-byte buffer.
func (l *Lib) String(name string, net unsafe.Pointer) (string, int) {
	var buffer [34]byte
	cName := C.CString(name)
	defer C.free(unsafe.Pointer(cName))
	status := int(C.call_string(l.handle, cName, net, (*C.char)(unsafe.Pointer(&buffer[0]))))
	return C.GoString((*C.char)(unsafe.Pointer(&buffer[0]))), status
}

// Size calls one of the CVMAPIGet* functions that write an unsigned long long.
func (l *Lib) Size(name string, net unsafe.Pointer) (uint64, int) {
	var value C.u64
	cName := C.CString(name)
	defer C.free(unsafe.Pointer(cName))
	status := int(C.call_size(l.handle, cName, net, &value))
	return uint64(value), status
}

// GasFromGraphFile passes the graph as the NUL-terminated string the C function reads: unlike
// the node's kernel/libcvm.go, which passes &json[0] of a Go slice with no NUL after it.
func (l *Lib) GasFromGraphFile(graph []byte) (uint64, int) {
	terminated := append(append([]byte{}, graph...), 0)
	var gas C.u64
	status := int(C.call_graph_gas(l.handle, (*C.char)(unsafe.Pointer(&terminated[0])), &gas))
	return uint64(gas), status
}
