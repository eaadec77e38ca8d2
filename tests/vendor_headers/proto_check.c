/*
 * proto_check.c -- compiles mcy_cuda_names.h and nothing else.
 *
 * With -DMCY_VENDOR_CUDA (or -DMCY_VENDOR_HIP -D__HIP_PLATFORM_AMD__) the header
 * includes the real vendor header and static-asserts every function-pointer
 * type and every MCY_* shared constant against it: compiling this file with
 * -Werror is the proof.  tests/test_vendor_headers.py also compiles it against
 * a deliberately corrupted copy of the header, which must fail.
 */
#include "mcy_cuda_names.h"

int main(void) { return MCY_RT_NFUNCS > 0 ? 0 : 1; }
