/*
 * rccl_probe.c -- bind a real NCCL/RCCL library into the `mcy_nccl` table of
 * monarch_cy/include/mcy_nccl_names.h (default mode: no vendor header) the way
 * monarch_cy._nccl_shim does, and call it through the table's typed pointers.
 *
 *   rccl_probe LIBRARY
 *
 * dlopen(LIBRARY); for each of the header's MCY_NCCL_NFUNCS names, dlsym into
 * mcy_nccl.slot[i] (a missing required name is a failure, a missing optional
 * one is reported).  Then, through mcy_nccl.fn only:
 *   GetVersion, GetErrorString(0/InvalidArgument), GetUniqueId twice,
 *   CommInitRank(nranks=1, rank=0) -- expected to fail with no GPU,
 *   GetErrorString(that result), GetLastError(NULL),
 *   CommInitRankConfig with the header's 2.14 config prefix, if present.
 * Prints one JSON object on stdout; exit status 0 once the table is bound
 * (the test judges the values), 2 when dlopen fails, 3 when a required name is missing.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "mcy_nccl_names.h"

static void json_str(const char *key, const char *s, int comma) {
    printf("\"%s\": \"", key);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    printf("\"%s\n", comma ? "," : "");
}

static int nonzero(const ncclUniqueId *u) {
    for (int i = 0; i < MCY_NCCL_UNIQUE_ID_BYTES; i++)
        if (u->internal[i]) return 1;
    return 0;
}

int main(int argc, char **argv) {
    const char *lib = argc > 1 ? argv[1] : "librccl.so.1";
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("{\"error\": \"dlopen\", ");
        json_str("detail", dlerror(), 0);
        printf("}\n");
        return 2;
    }
    printf("{\n");
    json_str("library", lib, 1);
    printf("\"nfuncs\": %d,\n\"sizeof_table\": %zu,\n\"missing_optional\": [", (int)MCY_NCCL_NFUNCS, sizeof(mcy_nccl));
    int first = 1, missing_required = 0;
    for (int i = 0; i < MCY_NCCL_NFUNCS; i++) {
        mcy_nccl.slot[i] = dlsym(h, mcy_nccl_names[i]);
        if (!mcy_nccl.slot[i]) {
            if (mcy_nccl_required[i]) missing_required++;
            printf("%s\"%s%s\"", first ? "" : ", ", mcy_nccl_required[i] ? "REQUIRED:" : "", mcy_nccl_names[i]);
            first = 0;
        }
    }
    printf("],\n");
    if (missing_required) {
        printf("\"error\": \"missing required\"}\n");
        return 3;
    }
    /* The union's named fields and its slots are the same storage, in X-macro order. */
    printf("\"fn_equals_slot\": %s,\n",
           ((void *)mcy_nccl.fn.GetVersion == mcy_nccl.slot[0] &&
            (void *)mcy_nccl.fn.GroupEnd == mcy_nccl.slot[MCY_NCCL_NFUNCS - 1]) ? "true" : "false");

    int version = -1;
    ncclResult_t st = mcy_nccl.fn.GetVersion(&version);
    printf("\"get_version\": [%d, %d],\n", (int)st, version);
    json_str("error_string_success", mcy_nccl.fn.GetErrorString(MCY_NCCL_SUCCESS), 1);
    json_str("error_string_invalid_argument", mcy_nccl.fn.GetErrorString(MCY_NCCL_INVALID_ARGUMENT), 1);

    ncclUniqueId a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    ncclResult_t ra = mcy_nccl.fn.GetUniqueId(&a), rb = mcy_nccl.fn.GetUniqueId(&b);
    printf("\"unique_id\": {\"results\": [%d, %d], \"bytes\": %zu, \"nonzero\": %s, \"distinct\": %s},\n",
           (int)ra, (int)rb, sizeof a, nonzero(&a) ? "true" : "false",
           memcmp(&a, &b, sizeof a) ? "true" : "false");
    fflush(stdout);

    ncclComm_t comm = NULL;
    st = mcy_nccl.fn.CommInitRank(&comm, 1, a, 0);
    printf("\"comm_init_rank\": {\"result\": %d, \"comm_null\": %s, ", (int)st, comm ? "false" : "true");
    json_str("error_string", mcy_nccl.fn.GetErrorString(st), 1);
    const char *last = mcy_nccl.fn.GetLastError(NULL);
    json_str("last_error", last ? last : "", 0);
    printf("},\n");
    if (comm) { /* not expected without a GPU; release it if it happens */
        mcy_nccl.fn.CommAbort(comm);
    }
    if (mcy_nccl.fn.CommInitRankConfig) {
        mcy_nccl_config cfg = {sizeof(mcy_nccl_config), MCY_NCCL_API_MAGIC, MCY_NCCL_CONFIG_VERSION, 1};
        ncclComm_t c2 = NULL;
        st = mcy_nccl.fn.CommInitRankConfig(&c2, 1, b, 0, (ncclConfig_t *)&cfg);
        printf("\"comm_init_rank_config\": %d,\n", (int)st);
        if (c2) mcy_nccl.fn.CommAbort(c2);
    } else {
        printf("\"comm_init_rank_config\": null,\n");
    }
    printf("\"done\": true\n}\n");
    return 0;
}
