/* errors: misuse of the C API is an error code, never a crash: calls before svm_init, bad
 * arguments, bad and destroyed regions, double destroy, unlocking a lock not held, reserved
 * ids, bad nodes, short buffers, calls after svm_finish. Prints `errors OK` (node 0).
 *   svmrun -n 2 ./errors */
#include <string.h>
#include "check.h"

static int failures = 0;

#define EXPECT(call, code)                                                                 \
    do {                                                                                   \
        int rc_ = (call);                                                                  \
        if (rc_ != (code)) {                                                               \
            fprintf(stderr, "FAIL %s:%d: %s returned %d (%s), expected %s\n", __FILE__,    \
                    __LINE__, #call, rc_, svm_strerror(rc_), #code);                       \
            failures++;                                                                    \
        }                                                                                  \
    } while (0)

int main(void) {
    int me, nodes, got, got2;
    svm_region_t r, r2;
    void *p;
    size_t len;
    EXPECT(svm_node_id(&me), SVM_E_STATE);
    EXPECT(svm_barrier(), SVM_E_STATE);
    EXPECT(svm_finish(), SVM_E_STATE);
    EXPECT(svm_set_trace(""), SVM_E_ARG);
    CHECK(svm_set_trace(NULL));
    CHECK(svm_init());
    EXPECT(svm_init(), SVM_E_STATE);
    EXPECT(svm_set_profile("p.md"), SVM_E_STATE);
    CHECK(svm_node_id(&me));
    CHECK(svm_nodes(&nodes));
    EXPECT(svm_node_id(NULL), SVM_E_ARG);
    /* regions */
    EXPECT(svm_region_create(0, SVM_PROTOCOL_DEFAULT, NULL, &r), SVM_E_ARG);
    EXPECT(svm_region_create(4096, 99, NULL, &r), SVM_E_PROTOCOL);
    EXPECT(svm_region_create_named(4096, "no-such", NULL, &r), SVM_E_PROTOCOL);
    EXPECT(svm_region_create(4096, SVM_PROTOCOL_DEFAULT, NULL, NULL), SVM_E_ARG);
    svm_home_t bad_node = {SVM_HOME_NODE, 1000, NULL, NULL, 0};
    EXPECT(svm_region_create(4096, SVM_PROTOCOL_DEFAULT, &bad_node, &r), SVM_E_NODE);
    svm_home_t bad_kind = {42, 0, NULL, NULL, 0};
    EXPECT(svm_region_create(4096, SVM_PROTOCOL_DEFAULT, &bad_kind, &r), SVM_E_ARG);
    svm_home_t no_list = {SVM_HOME_CUSTOM, 0, NULL, NULL, 3};
    EXPECT(svm_region_create(4096, SVM_PROTOCOL_DEFAULT, &no_list, &r), SVM_E_ARG);
    EXPECT(svm_region_create((size_t)1 << 62, SVM_PROTOCOL_DEFAULT, NULL, &r), SVM_E_NOMEM);
    int list[2] = {0, nodes - 1};
    uint64_t runs[2] = {1, 1};
    svm_home_t custom = {SVM_HOME_RUNS, 0, list, runs, 2};
    CHECK(svm_region_create(3 * 4096, SVM_PROTOCOL_SCOPE, &custom, &r));
    EXPECT(svm_region_addr(0, &p), SVM_E_REGION);
    EXPECT(svm_region_addr(r + 100, &p), SVM_E_REGION);
    EXPECT(svm_region_alloc(r, 0, &p), SVM_E_ARG);
    EXPECT(svm_region_alloc(r, 4 * 4096, &p), SVM_E_NOMEM);
    CHECK(svm_region_alloc(r, 100, &p));
    CHECK(svm_region_lookup((char *)p + 5, &r2, &len));
    if (r2 != r || len != 5 + (size_t)((char *)p - (char *)p)) {
        fprintf(stderr, "FAIL lookup gave region %u offset %zu\n", r2, len);
        failures++;
    }
    EXPECT(svm_region_lookup(&me, &r2, NULL), SVM_E_ADDR);
    EXPECT(svm_region_free(r, (char *)p + 1), SVM_E_ADDR);
    CHECK(svm_region_free(r, p));
    EXPECT(svm_region_free(r, p), SVM_E_ADDR);
    CHECK(svm_region_destroy(r));
    EXPECT(svm_region_destroy(r), SVM_E_REGION);
    EXPECT(svm_region_addr(r, &p), SVM_E_REGION);
    EXPECT(svm_region_alloc(r, 8, &p), SVM_E_REGION);
    EXPECT(svm_free_local(&me), SVM_E_ADDR);
    /* local allocations homed by first touch: this node touches its own first, so it is their
     * home, whatever node directs them */
    EXPECT(svm_alloc_local_first_touch(4096, NULL), SVM_E_ARG);
    EXPECT(svm_alloc_local_first_touch(0, &p), SVM_E_ARG);
    CHECK(svm_alloc_local_first_touch(2 * 4096, &p));
    EXPECT(svm_home_of(p, &got), SVM_E_ADDR); /* not touched yet: home not known */
    ((volatile char *)p)[0] = 1;
    ((volatile char *)p)[4096] = 2;
    CHECK(svm_home_of(p, &got));
    CHECK(svm_home_of((char *)p + 4096, &got2));
    if (got != me || got2 != me) {
        fprintf(stderr, "FAIL first-touch pages homed on %d and %d, not %d\n", got, got2, me);
        failures++;
    }
    CHECK(svm_free_local(p));
    EXPECT(svm_free_local(p), SVM_E_ADDR);
    /* synchronisation */
    EXPECT(svm_unlock(5), SVM_E_LOCK);
    EXPECT(svm_lock((uint64_t)1 << 63), SVM_E_ID);
    EXPECT(svm_trylock(5, NULL), SVM_E_ARG);
    CHECK(svm_trylock(5, &got));
    if (!got) {
        /* Another node holds it: wait for it like everyone. */
        CHECK(svm_lock(5));
    }
    CHECK(svm_unlock(5));
    EXPECT(svm_barrier_id(3, 0), SVM_E_BARRIER);
    EXPECT(svm_sem_post((uint64_t)1 << 63), SVM_E_ID);
    /* messages */
    EXPECT(svm_send(nodes, 1, "x", 1), SVM_E_NODE);
    EXPECT(svm_send(-5, 1, "x", 1), SVM_E_NODE);
    EXPECT(svm_send(me, 1, NULL, 4), SVM_E_ARG);
    EXPECT(svm_send(me, (uint64_t)1 << 63, "x", 1), SVM_E_ID);
    char buf[4];
    EXPECT(svm_recv(SVM_ANY_NODE, 9, buf, sizeof buf, &len, NULL, 10), SVM_E_TIMEOUT);
    CHECK(svm_send(me, 9, "hello", 5));
    EXPECT(svm_recv(me, 9, buf, sizeof buf, &len, &got, -1), SVM_E_TRUNC);
    if (len != 5 || memcmp(buf, "hell", 4) != 0 || got != me) {
        fprintf(stderr, "FAIL truncated receive: len %zu from %d\n", len, got);
        failures++;
    }
    /* statistics */
    EXPECT(svm_stats(NULL), SVM_E_ARG);
    EXPECT(svm_stats_json(NULL, 0, &len), SVM_E_TRUNC);
    char small[8];
    EXPECT(svm_stats_json(small, sizeof small, &len), SVM_E_TRUNC);
    if (strlen(small) != sizeof small - 1) {
        fprintf(stderr, "FAIL truncated JSON is not NUL-terminated at the end\n");
        failures++;
    }
    if (strcmp(svm_strerror(-1000), "unknown svm error code") != 0)
        failures++;
    CHECK(svm_barrier());
    CHECK(svm_finish());
    EXPECT(svm_barrier(), SVM_E_STATE);
    EXPECT(svm_region_create(4096, SVM_PROTOCOL_DEFAULT, NULL, &r), SVM_E_STATE);
    EXPECT(svm_finish(), SVM_E_STATE);
    EXPECT(svm_init(), SVM_E_STATE);
    if (strstr(svm_last_error(), "svm_init") == NULL) {
        fprintf(stderr, "FAIL last error: %s\n", svm_last_error());
        failures++;
    }
    if (me == 0)
        printf("errors %s\n", failures ? "FAIL" : "OK");
    return failures ? 1 : 0;
}
