module cvm-engine/libcvm-go-test

go 1.19
