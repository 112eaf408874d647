/* counter: every node adds 1 to a shared counter ITER times under a lock.
 *   svmrun -n 4 ./counter [--profile FILE] 1000      -> counter=4000 expected=4000 OK */
#include <string.h>
#include "check.h"

int main(int argc, char **argv) {
    if (argc > 2 && strcmp(argv[1], "--profile") == 0) {
        CHECK(svm_set_profile(argv[2]));
        argc -= 2, argv += 2;
    }
    long iters = argc > 1 ? atol(argv[1]) : 1000;
    int me, nodes;
    svm_region_t r;
    long *counter;

    CHECK(svm_init());
    CHECK(svm_node_id(&me));
    CHECK(svm_nodes(&nodes));
    CHECK(svm_region_create(sizeof(long), SVM_PROTOCOL_DEFAULT, NULL, &r));
    CHECK(svm_region_addr(r, (void **)&counter));
    CHECK(svm_barrier()); /* every node has the region before anyone uses it */
    for (long i = 0; i < iters; i++) {
        CHECK(svm_lock(1));
        *counter += 1;
        CHECK(svm_unlock(1));
    }
    CHECK(svm_barrier());
    long want = iters * nodes;
    if (me == 0)
        printf("counter=%ld expected=%ld %s\n", *counter, want, *counter == want ? "OK" : "FAIL");
    int ok = *counter == want;
    CHECK(svm_barrier());
    CHECK(svm_region_destroy(r));
    CHECK(svm_finish());
    return ok ? 0 : 1;
}
