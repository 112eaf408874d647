/* regions: creates a region, fills it, checks it and destroys it, CYCLES times; the address
 * range of a destroyed region is reused, so the window never runs out and memory stays flat.
 *   svmrun -n 2 ./regions [--keep] [CYCLES] [BYTES] [PROTOCOL]
 *   -> regions node=0 cycles=10000 bytes=65536 reused=9999 bad=0 rss_kb_first=... rss_kb_last=... OK
 * With --keep (first argument) regions are never destroyed: what a job could do before
 * regions could be destroyed. It stops at the first failure to create one and prints how many
 * it made: `regions-kept created=... rss_kb_first=... rss_kb_last=...`. */
#include <string.h>
#include <unistd.h>
#include "check.h"

/* Resident set size of this process in KiB. */
static long rss_kb(void) {
    long pages = 0, resident = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

int main(int argc, char **argv) {
    int keep = argc > 1 && strcmp(argv[1], "--keep") == 0;
    if (keep)
        argc--, argv++;
    long cycles = argc > 1 ? atol(argv[1]) : 1000;
    size_t bytes = argc > 2 ? (size_t)atol(argv[2]) : 65536;
    const char *protocol = argc > 3 ? argv[3] : NULL; /* NULL: the default */
    int me, nodes;
    void *first = NULL;
    long reused = 0, rss_first = 0, bad = 0;
    svm_home_t home = {SVM_HOME_BLOCK, 0, NULL, NULL, 0};

    CHECK(svm_init());
    CHECK(svm_node_id(&me));
    CHECK(svm_nodes(&nodes));
    size_t words = bytes / sizeof(long);
    for (long c = 0; c < cycles; c++) {
        svm_region_t r;
        long *a;
        int rc = svm_region_create_named(bytes, protocol, &home, &r);
        if (keep && rc != SVM_OK) {
            printf("regions-kept node=%d created=%ld bytes=%zu rss_kb_first=%ld rss_kb_last=%ld "
                   "stopped_by=\"%s\"\n",
                   me, c, bytes, rss_first, rss_kb(), svm_strerror(rc));
            CHECK(svm_finish());
            return 0;
        }
        CHECK(rc);
        CHECK(svm_region_addr(r, (void **)&a));
        if (c == 0)
            first = a;
        else if ((void *)a == first)
            reused++;
        /* Fresh memory reads as zeros; each node fills its block (the pages it is home of). */
        size_t lo = words * me / nodes, hi = words * (me + 1) / nodes;
        for (size_t i = lo; i < hi; i++)
            bad += a[i] != 0;
        for (size_t i = lo; i < hi; i++)
            a[i] = c * 7 + (long)i;
        CHECK(svm_barrier());
        /* Read some of the others' words (copies, copysets, read-ahead state everywhere). */
        for (int k = 0; k < 3; k++) {
            size_t probe = (size_t)(c * 977 + k * 4099 + me * 131) % words;
            bad += a[probe] != c * 7 + (long)probe;
        }
        CHECK(svm_barrier()); /* reads done before the next writes of a multiple-writer region */
        for (size_t i = lo; i < hi; i += 509)
            a[i] += 1; /* and write again after others read: invalidations, twins, diffs */
        CHECK(svm_barrier());
        for (int k = 0; k < 2; k++) {
            size_t probe = (size_t)(c * 31 + k * 8191 + me * 977) % words;
            int owner = 0;
            while (words * (owner + 1) / nodes <= probe)
                owner++;
            long bumped = (probe - words * owner / nodes) % 509 == 0;
            bad += a[probe] != c * 7 + (long)probe + bumped;
        }
        if (!keep)
            CHECK(svm_region_destroy(r));
        if (c == 0 || c == 10)
            rss_first = rss_kb(); /* after the first cycles have warmed things up */
    }
    long rss_last = rss_kb();
    int ok = bad == 0 && reused == cycles - 1;
    printf("regions node=%d cycles=%ld bytes=%zu reused=%ld bad=%ld rss_kb_first=%ld "
           "rss_kb_last=%ld %s\n",
           me, cycles, bytes, reused, bad, rss_first, rss_last, ok ? "OK" : "FAIL");
    CHECK(svm_finish());
    return ok ? 0 : 1;
}
