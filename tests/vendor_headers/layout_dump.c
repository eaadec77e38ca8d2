/*
 * layout_dump.c -- prints, as JSON, every vendor-specific value that a
 * monarch_cy._platform_tables.PlatformTable declares, read off the REAL vendor
 * headers (CUDA with -DMCY_VENDOR_CUDA, HIP with -DMCY_VENDOR_HIP
 * -D__HIP_PLATFORM_AMD__).  Keys are the PlatformTable field names, so that
 * tests/test_vendor_headers.py compares them field by field.  Only sizeof,
 * offsetof, enum constants and macros are used: nothing links to the runtime.
 */
#include <stddef.h>
#include <stdio.h>
#include "mcy_cuda_names.h"

#define STR(x) #x
#define XSTR(x) STR(x)
#define WIDTH(T, f) sizeof(((T *)0)->f)

#if defined(MCY_VENDOR_CUDA)
#define PLATFORM "cuda"
#define HEADER_VERSION CUDART_VERSION
#define V(cuda, hip) cuda
#define PTR_TYPE_FIELD type
#define SYMBOL_OF(name, hip) cuda##name
#define DECLARED_OF(name, hip) "cuda" #name
#elif defined(MCY_VENDOR_HIP)
#include <hip/hip_version.h>
#define PLATFORM "rocm"
#define HEADER_VERSION HIP_VERSION
#define V(cuda, hip) hip
#define PTR_TYPE_FIELD memoryType
#define SYMBOL_OF(name, hip) hip
#define DECLARED_OF(name, hip) #hip
#else
#error "layout_dump.c needs -DMCY_VENDOR_CUDA or -DMCY_VENDOR_HIP"
#endif

typedef MCY_POINTER_ATTRS_T ptr_attrs_t;
typedef MCY_DEVICE_PROP_T dev_prop_t;

static int first_symbol = 1;
/* Each entry's symbol as the X-macro list names it, and what the vendor's
 * macros turn that name into (CUDA 12 renames cudaGetDeviceProperties to
 * ..._v2, ROCm 6 renames hipGetDeviceProperties to ...R0600): a renamed symbol
 * must head symbol_alternatives. */
#define PRINT_SYMBOL(name, hip, ret, params) \
    printf("%s\"%s\": [\"%s\", \"%s\"]", first_symbol ? "" : ", ", #name, \
           DECLARED_OF(name, hip), XSTR(SYMBOL_OF(name, hip))); \
    first_symbol = 0;

#define NUM(key, value) printf(", \"%s\": %lld", key, (long long)(value))

int main(void) {
    printf("{\"platform\": \"%s\"", PLATFORM);
    NUM("header_version", HEADER_VERSION);
    NUM("ipc_lazy_enable_peer_access", V(cudaIpcMemLazyEnablePeerAccess, hipIpcMemLazyEnablePeerAccess));
    NUM("attr_compute_capability_major", V(cudaDevAttrComputeCapabilityMajor, hipDeviceAttributeComputeCapabilityMajor));
    NUM("attr_compute_capability_minor", V(cudaDevAttrComputeCapabilityMinor, hipDeviceAttributeComputeCapabilityMinor));
    NUM("attr_multiprocessor_count", V(cudaDevAttrMultiProcessorCount, hipDeviceAttributeMultiprocessorCount));
    NUM("attr_pci_bus_id", V(cudaDevAttrPciBusId, hipDeviceAttributePciBusId));
    NUM("attr_pci_device_id", V(cudaDevAttrPciDeviceId, hipDeviceAttributePciDeviceId));
    NUM("attr_pci_domain_id", V(cudaDevAttrPciDomainId, hipDeviceAttributePciDomainID));

    NUM("pointer_attrs_size", sizeof(ptr_attrs_t));
    NUM("pointer_type_offset", offsetof(ptr_attrs_t, PTR_TYPE_FIELD));
    NUM("pointer_device_offset", offsetof(ptr_attrs_t, device));
    NUM("pointer_devptr_offset", offsetof(ptr_attrs_t, devicePointer));
    NUM("pointer_hostptr_offset", offsetof(ptr_attrs_t, hostPointer));
#if defined(MCY_VENDOR_HIP)
    NUM("pointer_managed_offset", offsetof(ptr_attrs_t, isManaged));
#else
    printf(", \"pointer_managed_offset\": null");
#endif

    NUM("device_prop_size", sizeof(dev_prop_t));
    NUM("prop_name_offset", offsetof(dev_prop_t, name));
    NUM("prop_total_mem_offset", offsetof(dev_prop_t, totalGlobalMem));
#if defined(MCY_VENDOR_HIP)
    NUM("prop_arch_name_offset", offsetof(dev_prop_t, gcnArchName));
#else
    printf(", \"prop_arch_name_offset\": null");
#endif

    /* Widths of what the shim reads at those offsets (int, int, pointer, pointer, size_t, chars). */
    printf(", \"widths\": {\"pointer_type\": %zu, \"pointer_device\": %zu, \"pointer_devptr\": %zu"
           ", \"pointer_hostptr\": %zu, \"prop_name\": %zu, \"prop_total_mem\": %zu",
           WIDTH(ptr_attrs_t, PTR_TYPE_FIELD), WIDTH(ptr_attrs_t, device),
           WIDTH(ptr_attrs_t, devicePointer), WIDTH(ptr_attrs_t, hostPointer),
           WIDTH(dev_prop_t, name), WIDTH(dev_prop_t, totalGlobalMem));
#if defined(MCY_VENDOR_HIP)
    printf(", \"pointer_managed\": %zu, \"prop_arch_name\": %zu",
           WIDTH(ptr_attrs_t, isManaged), WIDTH(dev_prop_t, gcnArchName));
#endif
    printf("}");

#if defined(MCY_VENDOR_CUDA)
    printf(", \"memory_types\": {\"cudaMemoryTypeUnregistered\": %d, \"cudaMemoryTypeHost\": %d"
           ", \"cudaMemoryTypeDevice\": %d, \"cudaMemoryTypeManaged\": %d}",
           cudaMemoryTypeUnregistered, cudaMemoryTypeHost, cudaMemoryTypeDevice, cudaMemoryTypeManaged);
    printf(", \"no_device_statuses\": {\"cudaErrorInsufficientDriver\": %d, \"cudaErrorNoDevice\": %d}",
           cudaErrorInsufficientDriver, cudaErrorNoDevice);
#else
    printf(", \"memory_types\": {\"hipMemoryTypeHost\": %d, \"hipMemoryTypeDevice\": %d"
           ", \"hipMemoryTypeArray\": %d, \"hipMemoryTypeUnified\": %d}",
           hipMemoryTypeHost, hipMemoryTypeDevice, hipMemoryTypeArray, hipMemoryTypeUnified);
    printf(", \"no_device_statuses\": {\"hipErrorInsufficientDriver\": %d, \"hipErrorNoDevice\": %d}",
           hipErrorInsufficientDriver, hipErrorNoDevice);
#endif

    printf(", \"symbols\": {");
    MCY_RUNTIME_FUNCTIONS(PRINT_SYMBOL)
    printf("}}\n");
    return 0;
}
