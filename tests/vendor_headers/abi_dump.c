/*
 * abi_dump.c -- prints, as JSON, the ABI the Cython shim is built with.
 *
 * Compiled once in default mode (no vendor header: the shim's own build) and
 * once in vendor mode; tests/test_vendor_headers.py requires both outputs to be
 * identical, so the default build lays out handles, status codes, the IPC
 * handle and the call table exactly as the vendor's headers do.
 */
#include <stdio.h>
#include "mcy_cuda_names.h"

int main(void) {
    printf("{\"sizeof_cudaError_t\": %zu", sizeof(cudaError_t));
    printf(", \"sizeof_cudaStream_t\": %zu", sizeof(cudaStream_t));
    printf(", \"sizeof_cudaEvent_t\": %zu", sizeof(cudaEvent_t));
    printf(", \"sizeof_cudaIpcMemHandle_t\": %zu", sizeof(cudaIpcMemHandle_t));
    printf(", \"alignof_cudaIpcMemHandle_t\": %zu", (size_t)_Alignof(cudaIpcMemHandle_t));
    printf(", \"sizeof_mcy_device_attr_t\": %zu", sizeof(mcy_device_attr_t));
    printf(", \"sizeof_mcy_memcpy_kind_t\": %zu", sizeof(mcy_memcpy_kind_t));
    printf(", \"sizeof_void_p\": %zu", sizeof(void *));
    printf(", \"sizeof_mcy_rt_fns\": %zu", sizeof(mcy_rt_fns));
    printf(", \"sizeof_mcy_rt_table\": %zu", sizeof(mcy_rt_table));
    printf(", \"MCY_RT_NFUNCS\": %d", (int)MCY_RT_NFUNCS);
    printf(", \"functions\": [");
    for (int i = 0; i < MCY_RT_NFUNCS; i++)
        printf("%s[\"%s\", \"%s\"]", i ? ", " : "", mcy_rt_cuda_names[i], mcy_rt_hip_names[i]);
    printf("]");
    /* The optional driver-level table: same ABI rules. */
    printf(", \"sizeof_mcy_devptr_t\": %zu", sizeof(mcy_devptr_t));
    printf(", \"sizeof_mcy_drv_status_t\": %zu", sizeof(mcy_drv_status_t));
    printf(", \"sizeof_mcy_range_handle_t\": %zu", sizeof(mcy_range_handle_t));
    printf(", \"sizeof_mcy_drv_table\": %zu", sizeof(mcy_drv_table));
    printf(", \"driver_functions\": [");
    for (int i = 0; i < MCY_DRV_NFUNCS; i++)
        printf("%s[\"%s\", \"%s\"]", i ? ", " : "", mcy_drv_cuda_names[i], mcy_drv_hip_names[i]);
    printf("]}\n");
    return 0;
}
