// counter (C++): every node adds 1 to a shared counter ITER times under an svm::mutex, with
// RAII region and lock guard types; then jacobi-like block sums over an svm::shared_array.
//   svmrun -n 4 ./counter_cpp 1000   -> counter=4000 expected=4000 blocks=OK OK
#include <cstdio>
#include <cstdlib>
#include <svm.hpp>

int main(int argc, char **argv) {
    long iters = argc > 1 ? std::atol(argv[1]) : 1000;
    try {
        svm::runtime rt;
        int me = svm::node_id(), nodes = svm::nodes();
        bool ok;
        {
            svm::region r(sizeof(long) * 2, SVM_PROTOCOL_DEFAULT);
            auto counter = r.as_array<long>();
            svm::barrier(); // every node has the region before anyone uses it
            svm::mutex m(7);
            for (long i = 0; i < iters; i++) {
                svm::lock_guard g(m);
                counter[0] += 1;
            }
            // A block-homed region: each node fills its block, everyone checks the whole.
            svm::region data(4 * svm::page_size() * nodes, "sc-mw", svm::home::block());
            auto a = data.alloc<int>(1000 * nodes);
            svm::barrier();
            for (int i = 1000 * me; i < 1000 * (me + 1); i++)
                a[i] = i;
            svm::barrier();
            long sum = 0;
            for (int v : a)
                sum += v;
            long n = 1000L * nodes;
            bool blocks = sum == n * (n - 1) / 2;
            long want = iters * nodes;
            ok = counter[0] == want && blocks;
            if (me == 0)
                std::printf("counter=%ld expected=%ld blocks=%s %s\n", counter[0], want,
                            blocks ? "OK" : "FAIL", ok ? "OK" : "FAIL");
            svm::barrier();
            data.destroy();
        } // r destroyed here, on every node
        // Misuse is an exception with the code, never a crash.
        try {
            svm::mutex(7).unlock();
            ok = false;
        } catch (const svm::error &e) {
            ok = ok && e.code() == SVM_E_LOCK;
        }
        rt.finish();
        return ok ? 0 : 1;
    } catch (const svm::error &e) {
        std::fprintf(stderr, "FAIL svm::error %d: %s\n", e.code(), e.what());
        return 1;
    }
}
