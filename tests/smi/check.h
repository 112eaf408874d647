/* Shared by the SMI test programs: fail loudly (and end the whole job) on a broken check. */
#include <stdio.h>
#include <stdlib.h>
#include "smi.h"

#define CHECK(cond, ...)                                                        \
    do {                                                                        \
        if (!(cond)) {                                                          \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, "\n");                                              \
            fflush(stderr);                                                     \
            SMI_Abort(1);                                                       \
        }                                                                       \
    } while (0)
#define OK(call) CHECK((call) == SMI_SUCCESS, "%s", #call)
