/* Shared by the C examples: end the job on any svm error. */
#ifndef SVM_EXAMPLE_CHECK_H
#define SVM_EXAMPLE_CHECK_H
#include <stdio.h>
#include <stdlib.h>
#include <svm.h>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != SVM_OK) {                                                               \
            fprintf(stderr, "FAIL %s:%d: %s: %s (%s)\n", __FILE__, __LINE__, #call,        \
                    svm_strerror(rc_), svm_last_error());                                  \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#endif
