package libcvm

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestModels checks every line of $LIBCVM_EXPECTATIONS (written by host/cli/tests/libcvm.rs
// from `cvm estimate` and `cvm run`) through $LIBCVM_PATH, in the order the node's kernel.New
// queries a model, then the error classes the node tells apart.
func TestModels(t *testing.T) {
	lib, err := Open(os.Getenv("LIBCVM_PATH"))
	if err != nil {
		t.Fatalf("dlopen: %v", err)
	}
	file, err := os.Open(os.Getenv("LIBCVM_EXPECTATIONS"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<21), 1<<21)
	models := 0
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) != 12 {
			continue
		}
		models++
		read := func(path string) []byte {
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			return data
		}
		graph, params, input := read(fields[0]), read(fields[1]), read(fields[2])
		net, status := lib.LoadModel(graph, params, 0, 0)
		if status != Succeed {
			t.Fatalf("%s: CVMAPILoadModel returned %d", fields[0], status)
		}
		for i, name := range []string{"CVMAPIGetInputLength", "CVMAPIGetOutputLength",
			"CVMAPIGetInputTypeSize", "CVMAPIGetOutputTypeSize", "CVMAPIGetStorageSize",
			"CVMAPIGetGasFromModel"} {
			want, _ := strconv.ParseUint(fields[3+i], 10, 64)
			if got, status := lib.Size(name, net); status != Succeed || got != want {
				t.Errorf("%s: %s gave %d, %d, want %d", fields[0], name, status, got, want)
			}
		}
		gas, _ := strconv.ParseUint(fields[8], 10, 64)
		if got, status := lib.GasFromGraphFile(graph); status != Succeed || got != gas {
			t.Errorf("%s: CVMAPIGetGasFromGraphFile gave %d, %d", fields[0], status, got)
		}
		method := strings.TrimPrefix(fields[10], "-")
		if got, status := lib.String("CVMAPIGetVersion", net); status != Succeed || got != fields[9] {
			t.Errorf("%s: version %q", fields[0], got)
		}
		if got, status := lib.String("CVMAPIGetPreprocessMethod", net); status != Succeed || got != method {
			t.Errorf("%s: method %q", fields[0], got)
		}
		want, _ := hex.DecodeString(fields[11])
		if got, status := lib.Inference(net, input); status != Succeed || !bytes.Equal(got, want) {
			t.Errorf("%s on %s: status %d, output %x, want %x", fields[0], fields[2], status, got, want)
		}
		if _, status := lib.Inference(net, input[1:]); status != ErrorLogic {
			t.Errorf("%s: a short input gave %d, want ERROR_LOGIC", fields[0], status)
		}
		if _, status := lib.LoadModel([]byte("{\"nodes\": ["), params, 0, 0); status != ErrorRuntime {
			t.Errorf("malformed graph JSON gave %d, want ERROR_RUNTIME", status)
		}
		if _, status := lib.LoadModel(graph, params[:len(params)-1], 0, 0); status != ErrorLogic {
			t.Errorf("malformed params gave %d, want ERROR_LOGIC", status)
		}
		if _, status := lib.LoadModel(graph, params, 5, 0); status != ErrorRuntime {
			t.Errorf("an unknown device type gave %d, want ERROR_RUNTIME", status)
		}
		if status := lib.FreeModel(net); status != Succeed {
			t.Errorf("CVMAPIFreeModel returned %d", status)
		}
	}
	if models < 3 {
		t.Fatalf("only %d models in the expectations", models)
	}
}
